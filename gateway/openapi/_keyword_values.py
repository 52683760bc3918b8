"""Whether a spec's keyword value is one the gateway keeps (`_schema.SchemaTranslator` drops the others with a
warning): a `pattern` Python can compile and the linear regex engine runs (never one that only a backtracking engine
runs on a model's value: `fastschema.linear_pattern`), numbers and counts of the right kind."""

from __future__ import annotations

import re
from typing import Any

from ..execution.fastschema import linear_pattern

_PATTERN_FAULT: dict[str, str | None] = {}


def pattern_fault(pattern: str) -> str | None:
    """Why a spec's `pattern` is dropped, or None when it is kept."""
    if pattern in _PATTERN_FAULT:
        return _PATTERN_FAULT[pattern]
    fault = None
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError):
        fault = "is not a valid regular expression"
    if fault is None and not linear_pattern(pattern):
        fault = ("needs a backtracking regex engine (look-around or a back-reference), which the gateway never "
                 "runs on a value (the API may still check it)")
    _PATTERN_FAULT[pattern] = fault
    return fault


def is_number(value: Any) -> bool:
    """A JSON number (not a boolean, which Python counts as an int)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_string(schema: dict[str, Any]) -> bool:
    """Whether `schema` admits strings."""
    kind = schema.get("type")
    return kind == "string" or isinstance(kind, list) and "string" in kind


def is_count(value: Any) -> bool:
    """A non-negative whole number (`minLength`, `maxItems`...)."""
    return is_number(value) and value >= 0 and float(value).is_integer()
