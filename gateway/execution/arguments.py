"""Argument validation against a tool's exact input schema (JSON Schema 2020-12).

`jsonschema_rs` judges (`fastschema.is_valid`, on the event loop: a compiled Rust validator). What it
refuses is worded for a model to fix in one try: each problem names the failing field by path, what was expected
and what was given, for the first few problems only (`schema_errors`: a bounded walk that never runs a
regular expression in Python). Wording is CPU work: the doors run it in a worker thread
(`run_off_the_loop`), at most `WORDING_THREADS` at a time.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar

from ..catalog import JSONSchema, Tool
from . import fastschema

if TYPE_CHECKING:  # the wording's validator (the `jsonschema` package) is imported when something is to be worded
    from jsonschema.exceptions import ValidationError

T = TypeVar("T")

MAX_ERRORS = 8
WORDING_THREADS = 2
"""Wordings of refused instances that run at once; more wait their turn off the event loop."""

_RELAXED_CACHE_SIZE = 4096


def validate_arguments(tool: Tool, arguments: Any, *, optional: Iterable[str] = ()) -> list[str]:
    """Every problem with `arguments` for `tool` (the first few), as short sentences; empty when they are valid.

    `optional` names top-level arguments whose absence is fine even when the schema requires them
    (the gateway supplies them, e.g. credentials).
    """
    if not isinstance(arguments, dict):
        return [f"the arguments must be a JSON object, got {_describe(arguments)}"]
    schema = input_schema(tool, optional)
    if fastschema.is_valid(schema, arguments):
        return []
    return problems(schema, arguments)


def input_schema(tool: Tool, optional: Iterable[str] = ()) -> JSONSchema:
    """The schema the tool's arguments are judged by (`Tool.judged_schema`, else its input schema), without the
    `optional` names among its top-level `required` ones."""
    exact = tool.judged_schema or tool.input_schema
    schema = exact if isinstance(exact, dict) else {"type": "object"}
    names = frozenset(optional)
    required = schema.get("required")
    if not names or not isinstance(required, list) or names.isdisjoint(required):
        return schema
    return _relaxed.get(schema, names)


def problems(schema: Any, instance: Any, *, count: int = MAX_ERRORS) -> list[str]:
    """What is wrong with `instance` against `schema`, the first `count` problems; empty when nothing is (only
    possible for a schema the judge cannot compile: then this walk is the verdict)."""
    from .schema_errors import BudgetSpent, first_errors

    try:
        errors = first_errors(schema, instance, count * 4)
    except BudgetSpent:
        if not fastschema.usable(schema):
            return []  # no judge and no verdict within the budget: the upstream judges, as for any unusable schema
        return ["(root): does not match the schema, somewhere too deep in a value too large for the gateway to say "
                "where"]
    if not errors:
        return ["(root): does not match the schema"] if fastschema.usable(schema) else []
    errors.sort(key=_error_order)  # the shallowest of the first ones found: a missing field before its siblings' items
    lines = list(dict.fromkeys(format_error(error) for error in _first_per_missing_dependency(errors)))
    return lines[:count]


def _first_per_missing_dependency(errors: list[ValidationError]) -> list[ValidationError]:
    """Each field `dependentRequired` misses once: an optional body's required fields are required of every field
    given (`gateway.openapi`), so one missing field is an error per field given."""
    seen: set[tuple[str, str]] = set()
    kept = []
    for error in errors:
        dependency = _dependency(error)
        if dependency is not None:
            key = (_path(error.absolute_path), dependency[0])
            if key in seen:
                continue
            seen.add(key)
        kept.append(error)
    return kept


def _dependency(error: ValidationError) -> tuple[str, str] | None:
    """(the missing field, the field given that requires it) of a `dependentRequired` error."""
    if error.validator != "dependentRequired":
        return None
    match = re.match(r"'(.*)' is a dependency of '(.*)'$", error.message)
    return (match.group(1), match.group(2)) if match else None


def validator_for(schema: Any) -> Any:
    """The wording validator of `schema` (`gateway.execution.schema_errors.validator_for`)."""
    from .schema_errors import validator_for as build

    return build(schema)


async def run_off_the_loop(work: Callable[[], T]) -> T:
    """`work()` in a worker thread, among at most `WORDING_THREADS`."""
    return await anyio.to_thread.run_sync(work, limiter=_wording_limiter())


_limiter: RunVar[anyio.CapacityLimiter] = RunVar("gateway_wording_limiter")


def _wording_limiter() -> anyio.CapacityLimiter:
    try:
        return _limiter.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(WORDING_THREADS)
        _limiter.set(limiter)
        return limiter


class _RelaxedSchemas:
    """Input schemas with some required names dropped, by the schema's identity (kept, so an id is never reused)
    and the names."""

    def __init__(self) -> None:
        self._entries: dict[tuple[int, frozenset[str]], tuple[JSONSchema, JSONSchema]] = {}
        self._lock = threading.Lock()

    def get(self, schema: JSONSchema, names: frozenset[str]) -> JSONSchema:
        key = (id(schema), names)
        entry = self._entries.get(key)
        if entry is not None and entry[0] is schema:
            return entry[1]
        relaxed = {**schema, "required": [name for name in schema["required"] if name not in names]}
        with self._lock:
            if len(self._entries) >= _RELAXED_CACHE_SIZE:
                self._entries.pop(next(iter(self._entries)))
            self._entries[key] = (schema, relaxed)
        return relaxed


_relaxed = _RelaxedSchemas()


def _error_order(error: ValidationError) -> int:
    return len(error.absolute_path)  # a stable sort: the walk's order among errors of one depth


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
    dependency = _dependency(error)
    if dependency is not None:
        field = f"{where}.{dependency[0]}" if where != "(root)" else dependency[0]
        return f"{field}: required field is missing (required once {dependency[1]!r} is given)"
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
        return f"{where}: expected one of {_enum_values(value)}, got {_short(instance)}"
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
        from jsonschema.exceptions import best_match

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


def _enum_values(values: Any, limit: int = 160) -> str:
    """An enum's values as a JSON list, whole values only, and how many more when they do not all fit: text cut
    inside the list left it unclosed and did not say how many the model (or developer) was not shown."""
    if not isinstance(values, list):
        return _short(values, limit)
    shown: list[str] = []
    for value in values:
        text = _short(value)
        if shown and sum(len(s) + 2 for s in shown) + len(text) > limit:
            break
        shown.append(text)
    rest = len(values) - len(shown)
    return "[" + ", ".join(shown) + (f", … {rest} more" if rest else "") + "]"


def _short(value: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
