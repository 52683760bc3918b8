"""The judge of JSON Schema validity: `jsonschema_rs`, compiled once per schema.

`is_valid` answers "does this instance hold?" for arguments, an API's answer and the gateway's own requests; the
pure-Python `jsonschema` package only words what is wrong once this says "invalid" (`gateway.execution.schema_errors`),
and asks `pattern_matches` whenever a `pattern` is to be checked, so a regular expression is only ever run by
`jsonschema_rs`'s engine, and only its linear one (the `regex` crate: `RegexOptions`), never by Python's backtracking
`re` nor by `fancy-regex`, the library's default, which backtracks for look-around and back-references within a limit
that still lets one 61-character value hold the event loop for 0.2 s, and a spec's `anyOf` of 20 such patterns for
2 s. A spec's pattern that needs it is dropped when the spec loads (`linear_pattern`, asked by
`gateway.openapi._keyword_values`).

Formats: the ones listed in `ASSERTED_FORMATS` are checked; the others `jsonschema_rs` knows (`hostname`,
`duration`, ...) are annotations, as they always were for the Python validator the gateway used before.

A schema `jsonschema_rs` cannot compile (none in the corpus of real specs does) has no fast judge: `is_valid`
says False and `usable` says so, and the wording validator decides alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, cast

try:
    import jsonschema_rs
except ImportError:  # a declared dependency; without it every check takes the slow path and patterns go unchecked
    jsonschema_rs = None  # type: ignore[assignment]

ASSERTED_FORMATS = frozenset({
    "date", "date-time", "time", "email", "idn-email", "idn-hostname", "ipv4", "ipv6", "uri", "uri-reference",
    "uuid", "json-pointer", "relative-json-pointer", "regex",
})
"""Formats whose values are checked (a wrong one refuses the call); every other format is an annotation."""

_ANNOTATED = ("hostname", "duration", "iri", "iri-reference", "uri-template")
"""Formats `jsonschema_rs` would check on its own, told to accept anything."""

_LINEAR = jsonschema_rs.RegexOptions() if jsonschema_rs is not None else None

_CACHE_SIZE = 8192
_PATTERN_CACHE_SIZE = 4096
_UNIQUE_KEY = ("uniqueItems",)  # not a string: no pattern is this key


def _accept(value: str) -> bool:
    return True


class _Cache:
    """Compiled validators by key. An entry keyed by a schema's `id` keeps the schema beside it (`owner`), so a
    reused `id` never finds another schema's validator; an entry keyed by value has no owner (None)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: dict[Any, tuple[Any, Any]] = {}
        self.lock = threading.Lock()

    def get(self, key: Any, owner: Any, build: Callable[[], Any]) -> Any:
        entry = self.entries.get(key)
        if entry is not None and entry[0] is owner:
            return entry[1]
        value = build()
        with self.lock:
            if len(self.entries) >= self.size:
                self.entries.pop(next(iter(self.entries)))
            self.entries[key] = (owner, value)
        return value


_validators = _Cache(_CACHE_SIZE)
_patterns = _Cache(_PATTERN_CACHE_SIZE)
_parts = _Cache(_PATTERN_CACHE_SIZE)


def _compile(schema: Any) -> Any:
    """The `jsonschema_rs` validator of `schema`, or None when it cannot compile it."""
    if jsonschema_rs is None or not isinstance(schema, dict | bool):
        return None
    try:
        return jsonschema_rs.validator_for(schema, validate_formats=True, pattern_options=_LINEAR,
                                           formats=dict.fromkeys(_ANNOTATED, _accept))
    except Exception:  # noqa: BLE001 - a schema it can't compile: the wording validator decides alone
        return None


def _validator(schema: Any) -> Any:
    entry = _validators.entries.get(id(schema))  # the usual: compiled already (no closure made, no call)
    if entry is not None and entry[0] is schema:
        return entry[1]
    return _validators.get(id(schema), schema, lambda: _compile(schema))


def usable(schema: Any) -> bool:
    """Whether `jsonschema_rs` judges `schema` (else `is_valid` is always False and the slow path decides)."""
    return _validator(schema) is not None


def judge_of(schema: Any) -> Callable[[Any], bool] | None:
    """`schema`'s compiled judge (`validator.is_valid`) for a caller that keeps it (a tool's chain of stages), or
    None when there is none (`usable`). It may raise for an instance that is not JSON data: `is_valid` says False
    then."""
    validator = _validator(schema)
    return None if validator is None else cast(Callable[[Any], bool], validator.is_valid)


def is_valid(schema: Any, instance: Any) -> bool:
    """True only when `instance` is valid against `schema`; False when it is not, or when there is no fast judge
    (`usable`) or the instance is not JSON data."""
    validator = _validator(schema)
    if validator is None:
        return False
    try:
        return bool(validator.is_valid(instance))
    except Exception:  # noqa: BLE001 - an instance it can't take (e.g. a non-JSON value)
        return False


def judge_of_part(part: Any, root: Any) -> Callable[[Any], bool] | None:
    """A judge of instances of `part`, a subschema of `root` (its `$ref`s to `#/$defs/...` resolved in `root`), or
    None when there is none. Its verdicts only guide where the wording looks; the root's verdict is `is_valid`'s."""
    if not isinstance(part, dict) or not isinstance(root, dict):
        return None
    defs = root.get("$defs")
    validator = _parts.get((id(part), id(root)), part, lambda: _compile(
        {**part, "$defs": defs} if isinstance(defs, dict) and "$defs" not in part else part))
    if validator is None:
        return None
    judge: Callable[[Any], bool] = validator.is_valid
    return judge


def pattern_matches(pattern: str, text: str) -> bool | None:
    """Whether `text` matches the ECMA-262 `pattern` (anywhere, as JSON Schema's `pattern` means), by
    `jsonschema_rs`'s regex engine; None when it cannot compile the pattern (the check is left to the upstream)."""
    validator = _patterns.get(pattern, None, lambda: _compile({"pattern": pattern}))
    if validator is None:
        return None
    return bool(validator.is_valid(text))


def linear_pattern(pattern: str) -> bool:
    """Whether the linear engine runs `pattern` (not one that needs look-around or a back-reference)."""
    return _patterns.get(pattern, None, lambda: _compile({"pattern": pattern})) is not None


def format_holds(format: str, text: str) -> bool | None:
    """Whether `text` is a valid `format` as the judge checks it; None for a format that is only an annotation."""
    if format not in ASSERTED_FORMATS:
        return None
    validator = _patterns.get(("format", format), None, lambda: _compile({"format": format}))
    if validator is None:
        return None
    return bool(validator.is_valid(text))


def unique(items: list[Any]) -> bool:
    """Whether the array's items are unique as JSON values, in `jsonschema_rs`'s linear time (the Python validator
    compares objects pair by pair)."""
    validator = _patterns.get(_UNIQUE_KEY, None, lambda: _compile({"uniqueItems": True}))
    if validator is None:
        return True
    return bool(validator.is_valid(items))


