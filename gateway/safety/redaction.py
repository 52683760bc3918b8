"""Redaction of secrets from everything the model, the logs and the audit trail see.

A `Redactor` knows the manifest's secret values (and tokens learned at run time, such as OAuth2
access tokens) and replaces every occurrence with a marker, also in the forms an upstream is likely to
echo them back in: percent-encoded (a query string in an error message), form-encoded, and base64
(a Basic credential or `user:password`).
"""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus

import orjson

MARKER = "[REDACTED]"
MIN_SECRET_LENGTH = 4
"""Shorter values are not redacted: replacing every `abc` in a body would destroy it and protect nothing."""


class Redactor:
    """Replaces secret values in text and in JSON-like values.

    Args:
        secrets: the secret values (empty and too-short ones are ignored).
    """

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._lock = threading.Lock()
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._variants: tuple[str, ...] = ()
        """Every form of every secret, longest first: what `_pattern` matches."""
        self._json_variants: tuple[bytes, ...] | None = ()
        """The variants as UTF-8, to look for in a value's JSON text; None when one has a character JSON escapes
        (a quote, a backslash, a control character): its JSON form differs, so only the walk finds it."""
        self.add(*secrets)

    def add(self, *secrets: str | None) -> None:
        """Learn more secrets (e.g. an access token fetched at run time)."""
        fresh = {s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH} - self._secrets
        if not fresh:
            return
        with self._lock:
            self._secrets |= fresh
            self._variants = _all_variants(self._secrets)
            self._pattern = re.compile("|".join(re.escape(v) for v in self._variants))
            self._json_variants = (None if any(_escaped_in_json(v) for v in self._variants)
                                   else tuple(v.encode() for v in self._variants))

    def add_basic(self, username: str | None, password: str | None) -> None:
        """Learn a Basic credential: its base64 form would otherwise slip through."""
        if username is None or not password:
            return
        self.add(password, base64.b64encode(f"{username}:{password}".encode()).decode("ascii"))

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def text(self, text: str) -> str:
        pattern = self._pattern
        if pattern is None or not text or not self.appears_in(text):
            return text
        return pattern.sub(MARKER, text)

    def appears_in(self, text: str) -> bool:
        """Whether a secret (in any of the forms redacted) occurs in `text`.

        A substring test per form rather than the pattern's search: Python's regex engine tries the alternation
        at every position, several times slower on the usual answer that holds no secret."""
        for variant in self._variants:
            if variant in text:
                return True
        return False

    def value(self, value: Any) -> Any:
        """A JSON-like value with secrets replaced in every string, keys included: a copy when it held one, the
        value itself when it held none.

        A dict or list is first written as JSON text (orjson, in C) and searched for every form of every secret:
        most values hold none, and then no string of theirs is visited. A value orjson cannot write (a non-string
        key, an object) is walked."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, (dict, list)) and not self._may_hold_secret(value):
            return value
        return self._walk(value)

    def _may_hold_secret(self, value: dict[Any, Any] | list[Any]) -> bool:
        variants = self._json_variants
        if variants is None:
            return True
        try:
            text = orjson.dumps(value)
        except TypeError:
            return True
        return any(variant in text for variant in variants)

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self._walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._walk(v) for v in value]
        return value


def _escaped_in_json(text: str) -> bool:
    return '"' in text or "\\" in text or any(ord(c) < 0x20 for c in text)


def _variants(secret: str) -> set[str]:
    variants = {secret, quote(secret, safe=""), quote_plus(secret, safe=""), quote(secret)}
    encoded = base64.b64encode(secret.encode()).decode("ascii")
    variants.add(encoded)
    variants.add(encoded.rstrip("="))
    return {v for v in variants if len(v) >= MIN_SECRET_LENGTH}


def _all_variants(secrets: set[str]) -> tuple[str, ...]:
    variants: set[str] = set()
    for secret in secrets:
        variants |= _variants(secret)
    # Longest first so a secret that contains another is replaced whole.
    return tuple(sorted(variants, key=len, reverse=True))
