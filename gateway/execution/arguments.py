"""Argument validation against a tool's exact input schema (JSON Schema 2020-12).

Validators are compiled once per schema and cached. Errors are written for a model to fix in one try:
each names the failing field by path, what was expected and what was given.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError, best_match

from ..catalog import JSONSchema, Tool
from .fastschema import is_valid

MAX_ERRORS = 8
_CACHE_SIZE = 4096


def _tolerant_pattern(validator: Any, pattern: str, instance: Any, schema: JSONSchema) -> Iterator[ValidationError]:
    # Specs carry ECMA-262 regexes Python cannot compile (`\p{L}`); those are left to the upstream to judge
    # rather than failing every call.
    if not isinstance(instance, str):
        return
    try:
        if re.search(pattern, instance) is None:
            yield ValidationError(f"{instance!r} does not match {pattern!r}")
    except re.error:
        return


def _tolerant_pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: JSONSchema
) -> Iterator[ValidationError]:
    if not isinstance(instance, dict):
        return
    for pattern, subschema in patterns.items():
        try:
            compiled = re.compile(pattern)
        except re.error:
            continue
        for key, value in instance.items():
            if compiled.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


_Validator = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    {"pattern": _tolerant_pattern, "patternProperties": _tolerant_pattern_properties},
)


class _ValidatorCache:
    """Validators by schema identity; the schema object is kept so a reused `id` can't hit a stale entry."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[JSONSchema, Any]] = {}
        self._lock = threading.Lock()

    def get(self, schema: JSONSchema) -> Any:
        entry = self._entries.get(id(schema))
        if entry is not None and entry[0] is schema:
            return entry[1]
        validator = _Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
        with self._lock:
            if len(self._entries) >= _CACHE_SIZE:
                self._entries.pop(next(iter(self._entries)))
            self._entries[id(schema)] = (schema, validator)
        return validator


_validators = _ValidatorCache()


def validator_for(schema: JSONSchema) -> Any:
    return _validators.get(schema)


def validate_arguments(tool: Tool, arguments: Any, *, optional: Iterable[str] = ()) -> list[str]:
    """Every problem with `arguments` for `tool`, as short sentences; empty when they are valid.

    `optional` names top-level arguments whose absence is fine even when the schema requires them
    (the gateway supplies them, e.g. credentials).
    """
    if not isinstance(arguments, dict):
        return [f"the arguments must be a JSON object, got {_describe(arguments)}"]
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {"type": "object"}
    if is_valid(schema, arguments):  # the common case, in microseconds; errors are still worded by jsonschema
        return []
    skip = set(optional)
    messages: list[str] = []
    try:
        errors = sorted(validator_for(schema).iter_errors(arguments), key=_error_order)
    except Exception:  # a broken schema (e.g. a bad $ref) must not block the call; the upstream still judges it
        return []
    for error in errors:
        if error.validator == "required" and not error.absolute_path and _missing_name(error) in skip:
            continue
        messages.append(format_error(error))
        if len(messages) >= MAX_ERRORS:
            break
    return messages


def _error_order(error: ValidationError) -> tuple[int, str]:
    return (len(error.absolute_path), _path(error.absolute_path))


def _missing_name(error: ValidationError) -> str | None:
    match = re.match(r"'(.*)' is a required property", error.message)
    return match.group(1) if match else None


def format_error(error: ValidationError) -> str:
    """One line: `<path>: expected ..., got ...`."""
    where = _path(error.absolute_path)
    kind = error.validator
    value = error.validator_value
    instance = error.instance
    if kind == "required":
        name = _missing_name(error) or "?"
        field = f"{where}.{name}" if where != "(root)" else name
        return f"{field}: required field is missing"
    if kind == "additionalProperties" and isinstance(instance, dict):
        schema = error.schema if isinstance(error.schema, dict) else {}
        allowed = sorted((schema.get("properties") or {}).keys())
        extra = sorted(set(instance) - set(allowed))
        hint = f" (allowed: {', '.join(allowed[:20])})" if allowed else ""
        return f"{where}: unexpected field(s) {', '.join(extra)}{hint}"
    if kind == "type":
        expected = " or ".join(value) if isinstance(value, list) else value
        return f"{where}: expected {expected}, got {_describe(instance)}"
    if kind == "enum":
        return f"{where}: expected one of {_short(value, 160)}, got {_short(instance)}"
    if kind == "const":
        return f"{where}: expected {_short(value)}, got {_short(instance)}"
    if kind == "format":
        return f"{where}: expected a valid {value}, got {_short(instance)}"
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
        return f"{where}: expected {_BOUNDS[kind]} {value}, got {_short(instance)}"
    if kind in ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"):
        size = len(instance) if isinstance(instance, (str, list, dict)) else "?"
        return f"{where}: expected {_BOUNDS[kind]} {value}, got {size}"
    if kind == "pattern":
        return f"{where}: expected a string matching {value!r}, got {_short(instance)}"
    if kind in ("oneOf", "anyOf"):
        inner = best_match(error.context) if error.context else None
        detail = f" (closest: {format_error(inner)})" if inner is not None else ""
        what = "exactly one" if kind == "oneOf" else "at least one"
        shapes = len(value) if isinstance(value, list) else "the"
        return f"{where}: expected a value matching {what} of {shapes} allowed shapes{detail}"
    return f"{where}: {_short(error.message, 200)}"


_BOUNDS = {
    "minimum": "a number >=",
    "maximum": "a number <=",
    "exclusiveMinimum": "a number >",
    "exclusiveMaximum": "a number <",
    "multipleOf": "a multiple of",
    "minLength": "at least this many characters:",
    "maxLength": "at most this many characters:",
    "minItems": "at least this many items:",
    "maxItems": "at most this many items:",
    "minProperties": "at least this many fields:",
    "maxProperties": "at most this many fields:",
}


def _path(path: Iterable[Any]) -> str:
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "(root)"


def _describe(value: Any) -> str:
    kind = {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
        type(None): "null",
    }.get(type(value), type(value).__name__)
    if isinstance(value, (dict, list)):
        return kind
    return f"{kind} {_short(value)}"


def _short(value: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
