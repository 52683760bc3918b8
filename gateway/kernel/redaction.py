"""Redaction of secrets from everything the model, the logs and the audit trail see.

A `Redactor` knows the manifest's secret values (and tokens learned at run time, such as OAuth2
access tokens) and replaces every occurrence with a marker, also in the forms an upstream (or a model that read one)
is likely to write them in, each as a maintained encoder writes it (exact forms, no fuzzy matching): percent-encoded
(a query string in an error message; its escapes in either case), form-encoded, base64 or base64url (a Basic
credential: `user:password`), base64 in MIME's 76-character lines (`base64.encodebytes`, an email body: a long
token split by line breaks), inside the base64 of a larger payload (the characters that stand for the secret's bytes
alone, at each of the three alignments, as secret scanners match them), inside a JSON string (Python's `json.dumps`,
ASCII-only or not; with a slash escaped as PHP's `json_encode` writes it; HTML-safe, as Go's `encoding/json` and
Jinja's `tojson` write `<`, `>` and `&`: JSON held as text, a text body, a model's code block) and HTML-escaped
(`html.escape`). A form is added only when it differs from the secret: a token of letters, digits, `-` and `_` has
the percent, base64 (alone and inside a payload) and (when long) MIME forms only.

What the redactor knows is also what a call's arguments may not carry (`found_in`): a call that would send one of
the gateway's credentials to an api is refused before it is sent (`gateway.execution.stages.ValidateArguments`).

Log lines: `redact_logs(redactor)` installs a log-record factory that scrubs each record as it is created.
Filters on a logger miss records of its child loggers, and a library may log what an upstream echoed
(httpcore logs response headers at DEBUG), so the scrubbing happens where every record is born: the
message is rendered and passed through the registered `Redactor`s; a record that held a secret is
rewritten (its string arguments scrubbed, or the whole message frozen when that is not enough); a record
without one is left as it was (uvicorn's access formatter needs its arguments). A traceback is rendered and
scrubbed too. Records are only created for enabled levels, so the cost is
paid only for lines that are actually written.
"""

from __future__ import annotations

import base64
import html
import json
import logging
import re
import threading
import weakref
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlsplit, urlunsplit

import orjson

MARKER = "[REDACTED]"
MIN_SECRET_LENGTH = 4
"""Shorter values are not redacted: replacing every `abc` in a body would destroy it and protect nothing."""
SECRET_NAME = re.compile(r"auth|key|token|secret|passw|signature|sig$|session|cookie|credential", re.IGNORECASE)
"""Names (headers, query parameters) whose values are credentials."""
TOKEN_LIKE = 16
"""A query value at least this long is taken for a credential whatever its name (signed URLs, webhook tokens)."""


def url_password(url: str) -> list[str]:
    """The password in a URL's userinfo (as written and decoded), or nothing."""
    try:
        password = urlsplit(url).password
    except ValueError:
        return []
    return [password, unquote(password)] if password else []


def url_secrets(url: str | None) -> list[str]:
    """The credentials an operator wrote into a URL: its userinfo, and query values with a secret's name or a
    token's length (the name stays readable; the value is redacted wherever it turns up)."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
        password, username = parts.password, parts.username
    except ValueError:
        return []
    values: list[str] = []
    if password:
        values += [password, unquote(password), f"{username or ''}:{password}"]
    elif username:  # https://TOKEN@host
        values += [username, unquote(username)]
    for name, value in parse_qsl(parts.query, keep_blank_values=False):
        if SECRET_NAME.search(name) or len(value) >= TOKEN_LIKE:
            values.append(value)
    return values


def url_without_credentials(url: str) -> str:
    """`url` as it may be shown: scheme, host, port and path; no userinfo, query or fragment."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "(a URL that does not parse)"
    netloc = (f"[{host}]" if ":" in host else host) + (f":{port}" if port is not None else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


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
        self._starts: dict[str, tuple[str, ...]] = {}
        """The variants by their first character (what `HeldText` asks of a streamed text's tail)."""
        self._sought: tuple[str, ...] = ()
        """What `appears_in` looks for: the variants that hold no other variant (a text holds a variant exactly when
        it holds one of these: the base64 of `user:password` holds the password's base64 middle, say), so that a
        secret's many forms cost fewer searches of every text."""
        self._json_variants: tuple[str, ...] = ()
        """`_sought` as orjson writes it inside a JSON string (a quote, a backslash, a control character escaped), to
        look for in a value's JSON text."""
        self._json_pattern: re.Pattern[str] | None = None
        """`_json_variants` as one pattern, once there are more than `PATTERN_FROM` of them: what `found_in` asks of
        every call's arguments (a short text, where one pass of a pattern beats a search per form once there are more
        than a few, and not before: bench/secret_search.py)."""
        self.epoch: object = object()
        """Replaced whenever the redactor learns a secret: a value redacted under the current epoch needs no
        second pass (the executor marks the body it redacted, `ToolResult.redacted_under`)."""
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
            self._sought = _holding_no_other(self._variants)
            self._json_variants = _holding_no_other(tuple(orjson.dumps(v).decode()[1:-1] for v in self._variants))
            self._json_pattern = re.compile("|".join(map(re.escape, self._json_variants))) \
                if len(self._json_variants) > PATTERN_FROM else None
            starts: dict[str, list[str]] = {}
            for variant in self._variants:
                starts.setdefault(variant[0], []).append(variant)
            self._starts = {first: tuple(forms) for first, forms in starts.items()}
            self.epoch = object()

    def add_basic(self, username: str | None, password: str | None) -> None:
        """Learn a Basic credential: the password, and `user:password`, whose base64 forms (the header's, a MIME
        body's lines) would otherwise slip through."""
        if username is None or not password:
            return
        self.add(password, f"{username}:{password}")

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def text(self, text: str) -> str:
        pattern = self._pattern
        if pattern is None or not text or not self.appears_in(text):
            return text
        return pattern.sub(MARKER, text)

    def unfinished_from(self, text: str) -> int:
        """Where `text`'s tail may be the start of a secret's form that the next piece of a stream would finish (a
        form not already whole there, whose start the tail is); `len(text)` when no tail is (`HeldText`)."""
        pattern, starts = self._pattern, self._starts
        if pattern is None:
            return len(text)
        whole = [(found.start(), found.end()) for found in pattern.finditer(text)]
        for at in range(max(0, len(text) - len(self._variants[0]) + 1), len(text)):
            forms = starts.get(text[at])
            if not forms or any(start < at < end for start, end in whole):  # inside a whole form: redacted as is
                continue
            tail = text[at:]
            if any(form.startswith(tail) for form in forms):
                return at
        return len(text)

    def appears_in(self, text: str) -> bool:
        """Whether a secret (in any of the forms redacted) occurs in `text`.

        A substring test per form rather than the pattern's search: Python's regex engine tries the alternation
        at every position, several times slower on the usual answer that holds no secret. `any(map(...))` runs the
        tests in C (no Python step per form)."""
        return any(map(text.__contains__, self._sought))

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
        try:
            # Searched as text: `bytes.__contains__` first tries its argument as an integer, and builds and drops a
            # TypeError for every form looked for.
            text = orjson.dumps(value).decode()
        except TypeError:
            return True
        return any(map(text.__contains__, variants))  # in C: asked of every call's arguments and result

    def found_in(self, value: Any) -> bool:
        """Whether a secret, in any form redacted, occurs in a JSON-like value: in a string at any depth, or a key
        (a call's arguments, which must not carry a credential the gateway holds out to an api:
        `gateway.execution.stages.ValidateArguments`).

        Asked of every call's arguments: one orjson dump and, in C, a substring test per form or (past
        `PATTERN_FROM` forms) one search of a precompiled pattern of them all; a hit there is confirmed on the value's
        strings (a form of digits would match a number)."""
        forms = self._json_variants
        if not forms:
            return False
        try:
            text = orjson.dumps(value).decode()  # a string too: written with JSON's escapes, as the forms are sought
        except TypeError:  # a value JSON has no form for: walked
            return self._held_by(value)
        pattern = self._json_pattern
        found = any(map(text.__contains__, forms)) if pattern is None else pattern.search(text) is not None
        return found and self._held_by(value)

    def _held_by(self, value: Any) -> bool:
        if isinstance(value, str):
            return self.appears_in(value)
        if isinstance(value, dict):
            return any((isinstance(k, str) and self.appears_in(k)) or self._held_by(v) for k, v in value.items())
        if isinstance(value, (list, tuple)):
            return any(map(self._held_by, value))
        return False

    def covers(self, other: Redactor) -> bool:
        """Whether this redactor knows every secret `other` knows (what `other` would redact, this one did)."""
        return other._secrets <= self._secrets

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self._walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._walk(v) for v in value]
        return value


class HeldText:
    """Text that arrives in pieces (a streamed model reply), passed on redacted: only a tail that is the start of a
    secret's form is held, until the next piece (or the end: `flush`) shows whether the form goes on; the rest goes
    on at once (text that could start no form is never held)."""

    __slots__ = ("_redactor", "_held")

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._held = ""

    def feed(self, piece: str) -> str:
        """What of the text so far may be sent now, redacted ("" while all of it is held)."""
        text = self._held + piece
        cut = self._redactor.unfinished_from(text)
        self._held = text[cut:]
        return self._redactor.text(text[:cut])

    def flush(self) -> str:
        """The rest, redacted (the text ended)."""
        rest, self._held = self._held, ""
        return self._redactor.text(rest)


def _variants(secret: str) -> set[str]:
    variants = {secret, quote(secret, safe=""), quote_plus(secret, safe=""), quote(secret)}
    # Percent-escapes in lower case too: what some servers and libraries write (redteam47: an upstream that echoed
    # the query `sk-AB%2fcd%2bef` handed the model a key it could decode).
    variants |= {_LOWER_ESCAPE.sub(lambda found: found.group().lower(), v) for v in variants if "%" in v}
    encoded = base64.b64encode(secret.encode()).decode("ascii")
    variants.add(encoded)
    variants.add(encoded.rstrip("="))
    urlsafe = encoded.replace("+", "-").replace("/", "_")  # base64url (JWTs, signed URLs)
    variants |= {urlsafe, urlsafe.rstrip("=")}
    # MIME's lines (`base64.encodebytes`, an email body): split every 76 characters, by LF or, on the wire, CRLF.
    lines = base64.encodebytes(secret.encode()).decode("ascii").rstrip("\n")
    if "\n" in lines:
        variants |= {lines, lines.replace("\n", "\r\n")}
    # Inside the base64 of a larger payload (a JSON document, a config file, an email): the secret starts at any of
    # three alignments, and the characters that depend on its bytes alone are the same whatever surrounds it.
    variants |= _base64_middles(secret.encode())
    # Inside a JSON string: escaped as Python's json writes it (non-ASCII as \uXXXX, or kept), and each form with a
    # slash also as `\/` (PHP's json_encode): JSON kept as text (a text body, a log line, a model's code block).
    ascii_only = {json.dumps(v)[1:-1] for v in variants}
    kept = {json.dumps(v, ensure_ascii=False)[1:-1] for v in variants}
    # HTML-safe JSON: Go's encoding/json by default (`<`, `>`, `&` as \u003c, \u003e, \u0026, U+2028/9 escaped,
    # other non-ASCII kept) and Jinja's `tojson` (Flask's: ASCII-only, and `'` as \u0027 too).
    escaped = ascii_only | kept | {_html_safe(e, _GO_HTML_SAFE) for e in kept} \
        | {_html_safe(e, _JINJA_HTML_SAFE) for e in ascii_only}
    escaped |= {e.replace("/", "\\/") for e in escaped if "/" in e}
    variants |= escaped
    variants.add(html.escape(secret))  # an HTML page or attribute (an error page that echoes the request)
    return {v for v in variants if len(v) >= MIN_SECRET_LENGTH}


_LOWER_ESCAPE = re.compile(r"%[0-9A-F]{2}")
_GO_HTML_SAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_JINJA_HTML_SAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "'": "\\u0027"}
PATTERN_FROM = 8
"""Past this many forms, a short text is searched with one precompiled pattern of them all rather than form by form."""
MIN_BASE64_MIDDLE = 2 * MIN_SECRET_LENGTH
"""The shortest run of base64 characters taken for a secret inside a larger payload's base64 (as long as the
shortest secret's own base64)."""


def _html_safe(escaped: str, table: dict[str, str]) -> str:
    return "".join(table.get(c, c) for c in escaped)


def _base64_middles(secret: bytes) -> set[str]:
    """The base64 characters that stand for `secret`'s bytes alone, at each of the three alignments it may have in a
    larger payload (as secret scanners match a base64-encoded secret), in base64 and base64url: a character covers
    six bits, so those that mix in a neighbouring byte's bits, at either end, are left out."""
    middles: set[str] = set()
    for before in range(3):
        encoded = base64.b64encode(bytes(before) + secret + bytes(3)).decode("ascii")
        start = -(-8 * before // 6)  # the first character whose six bits are all the secret's
        end = 8 * (before + len(secret)) // 6  # past the last such character
        middle = encoded[start:end]
        if len(middle) >= MIN_BASE64_MIDDLE:
            middles |= {middle, middle.replace("+", "-").replace("/", "_")}
    return middles


def _holding_no_other(forms: tuple[str, ...]) -> tuple[str, ...]:
    """The forms that hold no other form: a text holds one of `forms` exactly when it holds one of these."""
    kept: list[str] = []
    for form in sorted(set(forms), key=len):
        if not any(shorter in form for shorter in kept):
            kept.append(form)
    return tuple(kept)


def _all_variants(secrets: set[str]) -> tuple[str, ...]:
    variants: set[str] = set()
    for secret in secrets:
        variants |= _variants(secret)
    # Longest first so a secret that contains another is replaced whole.
    return tuple(sorted(variants, key=len, reverse=True))


# -- log records -----------------------------------------------------------------------------------------------------

_lock = threading.RLock()  # reentrant: a weakref callback may run inside the locked block (garbage collection)
_refs: tuple[weakref.ref[Redactor], ...] = ()
"""The registered redactors, held weakly; a tuple replaced whole so the factory reads it without a lock."""
_installed = False


def redact_logs(redactor: Redactor) -> None:
    """Scrub `redactor`'s secrets from every log record from now on (idempotent; held weakly)."""
    global _installed, _refs
    with _lock:
        if any(ref() is redactor for ref in _refs):
            return
        _refs = (*(ref for ref in _refs if ref() is not None), weakref.ref(redactor, _forget))
        if _installed:
            return
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            if _refs:
                _scrub(record)
            return record

        logging.setLogRecordFactory(factory)
        _installed = True


def _forget(dead: weakref.ref[Redactor]) -> None:
    global _refs
    with _lock:
        _refs = tuple(ref for ref in _refs if ref is not dead)


def _scrub(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a malformed log call: leave it to logging's own error reporting
        return
    # The common case, a line without a secret, costs one search per redactor: no list of them is made, and no
    # copies (every record of the process passes here, an access line per request among them).
    for ref in _refs:
        redactor = ref()
        if redactor is not None and redactor.appears_in(message):
            redactors = _live()
            clean = _clean(message, redactors)
            record.msg, record.args = _scrubbed_args(record, redactors) or (clean, ())
            break
    if record.exc_info and not record.exc_text:
        text = logging.Formatter().formatException(record.exc_info)
        for redactor in _live():
            text = redactor.text(text)
        record.exc_text = text


def _live() -> list[Redactor]:
    return [r for ref in _refs if (r := ref()) is not None]


def _clean(text: str, redactors: list[Redactor]) -> str:
    for redactor in redactors:
        text = redactor.text(text)
    return text


def _scrubbed_args(record: logging.LogRecord, redactors: list[Redactor]) -> tuple[Any, tuple[Any, ...]] | None:
    """The record's own format with its string arguments scrubbed, when that leaves no secret.

    Formatters that read `args` themselves (uvicorn's access log unpacks five of them) break on a frozen
    record, so the arguments keep their shape whenever scrubbing them one by one is enough.
    """
    if not isinstance(record.args, tuple) or not record.args or not isinstance(record.msg, str):
        return None
    args = tuple(_clean(a, redactors) if isinstance(a, str) else a for a in record.args)
    msg = _clean(record.msg, redactors)
    try:
        rendered = msg % args
    except (TypeError, ValueError):
        return None
    return (msg, args) if _clean(rendered, redactors) == rendered else None
