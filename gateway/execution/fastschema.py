"""A fast "is this valid?" for the hot path, with the `jsonschema` package kept as the judge of errors.

Validating a call's arguments (and an MCP result against its output schema) with the pure-Python
`jsonschema` costs tens to hundreds of microseconds per call; `jsonschema_rs` answers the same question
in a few. So: when the fast validator says "valid", the instance is valid; otherwise (or when the fast
validator is missing or cannot compile the schema) the caller runs its `jsonschema` validator as before,
which alone decides and words the errors. Format assertions are on in the fast validator, so it is at
least as strict as the slow path and a "valid" here never hides an error the slow path would report.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

try:
    import jsonschema_rs
except ImportError:  # optional: everything works without it, only slower
    jsonschema_rs = None  # type: ignore[assignment]

_CACHE_SIZE = 8192
_UNUSABLE: Callable[[Any], bool] = lambda instance: False  # noqa: E731 - "ask the slow path"

_entries: dict[int, tuple[Any, Callable[[Any], bool]]] = {}
_lock = threading.Lock()


def is_valid(schema: Any, instance: Any) -> bool:
    """True only when `instance` is certainly valid against `schema`; False means: ask `jsonschema`."""
    entry = _entries.get(id(schema))
    if entry is None or entry[0] is not schema:  # keyed by identity, the schema kept so an id is never reused
        entry = (schema, _compile(schema))
        with _lock:
            if len(_entries) >= _CACHE_SIZE:
                _entries.pop(next(iter(_entries)))
            _entries[id(schema)] = entry
    try:
        return entry[1](instance)
    except Exception:  # noqa: BLE001 - an instance the fast validator can't take (e.g. a non-JSON value)
        return False


def _compile(schema: Any) -> Callable[[Any], bool]:
    if jsonschema_rs is None or not isinstance(schema, dict | bool):
        return _UNUSABLE
    try:
        validator = jsonschema_rs.validator_for(schema, validate_formats=True)
    except Exception:  # noqa: BLE001 - a schema it can't compile (e.g. a regex dialect): the slow path decides
        return _UNUSABLE
    is_valid_instance: Callable[[Any], bool] = validator.is_valid
    return is_valid_instance
