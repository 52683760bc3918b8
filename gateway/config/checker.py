"""Typed reads from a YAML mapping that turn every mistake into a located diagnostic.

The manifest loader reads each key through a `Checker`: a wrong type, an unknown key (with a
did-you-mean), a value out of range all become `Diagnostic`s carrying the key path and line, and
the read returns None so loading goes on and the next mistake is found too.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from ..catalog import Diagnostic, Level
from .yamlnodes import MISSING, KeyPath, format_path


def suggest(word: str, options: Iterable[str], *, what: str = "", limit: int = 12) -> str:
    """` (did you mean 'shop'?)` for a near miss, else ` (known: a, b, c)`; empty when there are no options."""
    choices = sorted(set(options))
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    if not choices:
        return f" (no {what} defined)" if what else ""
    shown = ", ".join(choices[:limit]) + (", ..." if len(choices) > limit else "")
    return f" (known: {shown})"


def describe_type(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        shown = value if len(value) <= 30 else value[:27] + "..."
        return f"a string ({shown!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


class Checker:
    """Collects diagnostics for one file; every `read` method reports and returns None on a bad value."""

    def __init__(self, file: str, lines: dict[KeyPath, int]) -> None:
        self.file = file
        self.lines = lines
        self.diagnostics: list[Diagnostic] = []

    def line(self, path: KeyPath) -> int | None:
        while True:
            if path in self.lines:
                return self.lines[path]
            if not path:
                return None
            path = path[:-1]

    def report(self, level: Level, path: KeyPath, message: str) -> None:
        self.diagnostics.append(
            Diagnostic(level=level, file=self.file, pointer=format_path(path), line=self.line(path), message=message)
        )

    def error(self, path: KeyPath, message: str) -> None:
        self.report("error", path, message)

    def warning(self, path: KeyPath, message: str) -> None:
        self.report("warning", path, message)

    @property
    def has_errors(self) -> bool:
        return any(d.level == "error" for d in self.diagnostics)

    # -- structure ------------------------------------------------------------------------------

    def mapping(self, value: Any, path: KeyPath, allowed: Iterable[str] | None = None) -> dict[str, Any] | None:
        """`value` as a mapping (None or absent: empty), reporting unknown keys when `allowed` is given."""
        if value is None:
            return {}
        if value is MISSING:
            return None
        if not isinstance(value, dict):
            self.error(path, f"expected a mapping, got {describe_type(value)}")
            return None
        if allowed is not None:
            known = list(allowed)
            for key in value:
                if key not in known:
                    self.error((*path, key), f"unknown key {key!r}" + suggest(key, known))
        return value

    def list_of(self, value: Any, path: KeyPath) -> list[Any] | None:
        if value is None:
            return []
        if value is MISSING:
            return None
        if not isinstance(value, list):
            self.error(path, f"expected a list, got {describe_type(value)}")
            return None
        return value

    # -- scalars --------------------------------------------------------------------------------

    def string(self, m: dict[str, Any], path: KeyPath, key: str, *, required: bool = False) -> str | None:
        value = m.get(key)
        if value is MISSING:
            return None
        if value is None:
            if required:
                self.error((*path, key) if key in m else path, f"{key!r} is required")
            return None
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            self.error((*path, key), f"expected a string, got {describe_type(value)}")
            return None
        text = str(value)
        if required and not text.strip():
            self.error((*path, key), f"{key!r} must not be empty")
            return None
        return text

    def number(
        self, m: dict[str, Any], path: KeyPath, key: str, *, integer: bool = False, minimum: float = 0,
        exclusive: bool = False,
    ) -> float | int | None:
        value = m.get(key)
        if value is None or value is MISSING:
            return None
        kind = "an integer" if integer else "a number"
        if isinstance(value, str):
            try:
                value = int(value) if integer else float(value)
            except ValueError:
                self.error((*path, key), f"expected {kind}, got {describe_type(value)}")
                return None
        if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
            self.error((*path, key), f"expected {kind}, got {describe_type(value)}")
            return None
        if value < minimum or (exclusive and value == minimum):
            bound = f"greater than {minimum:g}" if exclusive else f"at least {minimum:g}"
            self.error((*path, key), f"must be {bound}, got {value}")
            return None
        return value

    def boolean(self, m: dict[str, Any], path: KeyPath, key: str, *, default: bool) -> bool:
        value = m.get(key, default)
        if value is MISSING:
            return default
        if not isinstance(value, bool):
            self.error((*path, key), f"expected true or false, got {value!r}")
            return default
        return value

    def choice(self, m: dict[str, Any], path: KeyPath, key: str, choices: Iterable[str]) -> str | None:
        value = self.string(m, path, key)
        if value is None:
            return None
        options = list(choices)
        if value not in options:
            self.error((*path, key), f"{value!r} is not one of {', '.join(options)}" + _near(value, options))
            return None
        return value

    def strings(self, m: dict[str, Any], path: KeyPath, key: str) -> list[str] | None:
        """A list of strings; a single string is taken as a list of one. None when absent or bad."""
        value = m.get(key)
        if value is None or value is MISSING:
            return None
        if isinstance(value, str):
            return [value]
        items = self.list_of(value, (*path, key))
        if items is None:
            return None
        out: list[str] = []
        for index, item in enumerate(items):
            if item is MISSING:
                continue
            if isinstance(item, bool) or not isinstance(item, str | int | float):
                self.error((*path, key, index), f"expected a string, got {describe_type(item)}")
                continue
            out.append(str(item))
        return out

    def string_map(self, m: dict[str, Any], path: KeyPath, key: str) -> dict[str, str]:
        """A mapping of string to string (headers); numbers are written as text."""
        value = self.mapping(m.get(key), (*path, key))
        out: dict[str, str] = {}
        for name, item in (value or {}).items():
            if item is MISSING:
                continue
            if isinstance(item, bool) or not isinstance(item, str | int | float):
                self.error((*path, key, name), f"expected a string, got {describe_type(item)}")
                continue
            out[name] = str(item)
        return out


def _near(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
