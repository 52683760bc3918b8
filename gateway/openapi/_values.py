"""Values a spec writes beside a schema that break that very schema: kept from the model.

A model copies what a tool's schema shows it. A `default` of `"100"` on an integer, an example
`"string"` on a `format: uuid`, or an `enum: [1, 2]` on a string would each lead it to send a value the
executor refuses (or, for the enum, leave no value at all that passes). So, in input schemas:

- `enum` members of the wrong JSON type: on a string, numbers and booleans become their JSON text
  (`1` -> `"1"`, `true` -> `"true"`: what a query or path carries, and clearly what the author meant);
  others are dropped, and an enum left empty goes. One warning per schema.
- `default` and each of `examples` are validated against the schema they sit in (formats asserted,
  as the executor does, `$defs` attached for `$ref`s); those that fail are dropped with a warning.
  The checks run in one pass after a spec's operations are compiled (`ValueChecks.run`), once per
  translated schema, shared by every tool that uses it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

jsonschema_rs: Any
try:
    import jsonschema_rs
except ImportError:  # optional: jsonschema decides instead, slower
    jsonschema_rs = None

Warn = Callable[[str, str, str], None]
"""Told `(file, pointer, message)`: where the value dropped is written, and why."""

_PYTHON_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool) or isinstance(v, float) and v.is_integer(),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}
_ANNOTATED = ("default", "examples")


def _has_type(value: Any, kinds: list[str]) -> bool:
    return any(_PYTHON_TYPES[kind](value) for kind in kinds if kind in _PYTHON_TYPES)


def fix_enum(schema: dict[str, Any], warn: Warn, file: str, where: str) -> None:
    """Members of `schema["enum"]` that its `type` refuses: converted to text for strings, else dropped."""
    kind = schema.get("type")
    enum = schema["enum"]
    if kind == "string":  # the common case, and big enums (countries, currencies): kept fast
        if all(isinstance(value, str) for value in enum):
            return
    elif isinstance(kind, str):
        test = _PYTHON_TYPES.get(kind)
        if test is None or all(map(test, enum)):
            return
    kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else None
    if not kinds or all(_has_type(value, kinds) for value in enum):
        return
    kept: list[Any] = []
    for value in enum:
        if _has_type(value, kinds):
            kept.append(value)
        elif "string" in kinds and isinstance(value, int | float | bool):
            kept.append(json.dumps(value))
    kept = list(dict.fromkeys(json.dumps(v, sort_keys=True) for v in kept))
    values = [json.loads(text) for text in kept]
    if values:
        schema["enum"] = values
        warn(file, where, f"enum values of the wrong type for type {kind!r}: {enum!r} read as {values!r}")
    else:
        del schema["enum"]
        warn(file, where, f"no enum value has type {kind!r} ({enum!r}): the enum is dropped")


class ValueChecks:
    """`default`/`examples` of translated input schemas, checked together once the spec is compiled."""

    def __init__(self) -> None:
        self._pending: dict[int, tuple[dict[str, Any], str, str, bool]] = {}

    def add(self, schema: dict[str, Any], file: str, where: str, *, allow_null: bool = False) -> None:
        """Check `schema`'s values later (a warning names `file` and `where`, where it is written); `allow_null`: the
        schema is made nullable around it (null passes)."""
        self._pending.setdefault(id(schema), (schema, file, where, allow_null))

    def run(self, defs_for: Callable[[set[str]], dict[str, Any]], warn: Warn) -> None:
        """Drop every value that fails its schema. `defs_for(names)` gives the `$defs` those names reach."""
        pending, self._pending = self._pending, {}
        for schema, file, where, allow_null in pending.values():
            plain = {key: value for key, value in schema.items() if key not in _ANNOTATED}
            refs = _ref_names(plain)
            if refs:
                plain["$defs"] = defs_for(refs)
            validator = _validator(plain)
            if validator is None:
                continue
            check = (lambda value, v=validator: value is None or v(value)) if allow_null else validator
            if "default" in schema and not check(schema["default"]):
                warn(file, where, f"default {_short(schema['default'])} does not match its own schema: dropped")
                del schema["default"]
            examples = schema.get("examples")
            if isinstance(examples, list):
                good = [example for example in examples if check(example)]
                if len(good) != len(examples):
                    bad = [example for example in examples if not check(example)]
                    warn(file, where,
                         f"example(s) {', '.join(map(_short, bad))} do not match their own schema: dropped")
                    if good:
                        schema["examples"] = good
                    else:
                        del schema["examples"]


def _validator(schema: dict[str, Any]) -> Callable[[Any], bool] | None:
    """`is_valid` for `schema`, formats asserted; None when no validator takes the schema (then nothing is dropped)."""
    if jsonschema_rs is not None:
        try:
            validator = jsonschema_rs.validator_for(schema, validate_formats=True)
        except Exception:  # noqa: BLE001 - e.g. a regex dialect it cannot compile: keep the values
            return None

        def check(value: Any) -> bool:
            try:
                return bool(validator.is_valid(value))
            except Exception:  # noqa: BLE001 - a value it cannot take (not JSON): keep it
                return True
        return check
    from jsonschema import Draft202012Validator, FormatChecker

    try:
        slow = Draft202012Validator(schema, format_checker=FormatChecker())
        slow.is_valid(None)
    except Exception:  # noqa: BLE001
        return None
    return lambda value: bool(slow.is_valid(value))


def _ref_names(schema: Any) -> set[str]:
    names: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                names.add(ref[len("#/$defs/"):])
            stack.extend(value for key, value in node.items()
                         if key not in _ANNOTATED and isinstance(value, dict | list))
        elif isinstance(node, list):
            stack.extend(value for value in node if isinstance(value, dict | list))
    return names


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
