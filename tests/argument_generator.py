"""Minimal valid arguments from a JSON Schema (2020-12): required fields and the smallest values that pass.

Used by the corpus judge to call every operation. Independent of the executor's code on purpose: it reads
only the tool's input schema, never its binding.
"""

from __future__ import annotations

import re
from typing import Any

try:
    from re import _parser as _sre_parser  # type: ignore[attr-defined]
except ImportError:  # Python < 3.11
    import sre_parse as _sre_parser  # type: ignore[no-redef]

from jsonschema import Draft202012Validator

_FORMATS = {
    "date-time": "2024-01-02T03:04:05Z",
    "date": "2024-01-02",
    "time": "03:04:05Z",
    "email": "a@example.com",
    "idn-email": "a@example.com",
    "uri": "https://example.com/x",
    "url": "https://example.com/x",
    "iri": "https://example.com/x",
    "uri-reference": "/x",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "hostname": "example.com",
    "byte": "YWJj",
    "binary": "abc",
    "int32": "1",
    "int64": "1",
    "duration": "P1D",
    "regex": "a",
    "password": "pw-judge",
}
_PATTERN_CANDIDATES = ("a", "1", "abc", "A", "a1", "x-1", "2024-01-02", "abc123", "A1", "123",
                       "2024-01-02T03:04:05Z", "aa", "a.b", "a_b", "ab12cd34", "US", "USD", "en")
_MAX_DEPTH = 12


class Unsatisfiable(Exception):
    pass


def generate(schema: Any, root: dict[str, Any], *, depth: int = 0) -> Any:
    if depth > _MAX_DEPTH:
        raise Unsatisfiable("too deep")
    if schema is True or schema == {}:
        return "x"
    if schema is False or not isinstance(schema, dict):
        raise Unsatisfiable("false schema")
    if "$ref" in schema:
        target = _resolve(schema["$ref"], root)
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return generate({**target, **rest} if rest else target, root, depth=depth + 1)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        choices = [v for v in schema["enum"] if v is not None] or schema["enum"]
        return choices[0]
    if "allOf" in schema:
        merged = dict(schema)
        for part in merged.pop("allOf"):
            merged = _merge(merged, _deref(part, root))
        return generate(merged, root, depth=depth + 1)
    for key in ("oneOf", "anyOf"):
        if key in schema:
            rest = {k: v for k, v in schema.items() if k != key}
            for branch in schema[key]:
                candidate_schema = _merge(rest, _deref(branch, root))
                try:
                    value = generate(candidate_schema, root, depth=depth + 1)
                except Unsatisfiable:
                    continue
                if _valid(value, schema, root):
                    return value
            raise Unsatisfiable(f"no {key} branch")
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
    return _BY_TYPE[kind](schema, root, depth)


def _object(schema: dict[str, Any], root: dict[str, Any], depth: int) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    value = {}
    for name in schema.get("required") or []:
        value[name] = generate(properties.get(name, {}), root, depth=depth + 1)
    # At least one field when the schema names any: an empty object has no wire form in some styles.
    wanted = max(schema.get("minProperties") or 0, 1 if properties else 0)
    for name, prop in properties.items():
        if len(value) >= wanted:
            break
        try:
            value.setdefault(name, generate(prop, root, depth=depth + 1))
        except Unsatisfiable:
            continue
    # dependentRequired (an optional body spread at the top level): a given field brings the ones it needs.
    dependent = schema.get("dependentRequired") or {}
    for name in list(value):
        for needed in dependent.get(name, ()):
            if needed not in value:
                value[needed] = generate(properties.get(needed, {}), root, depth=depth + 1)
    return value


def _array(schema: dict[str, Any], root: dict[str, Any], depth: int) -> list[Any]:
    count = max(schema.get("minItems") or 0, 1)
    if schema.get("maxItems") == 0:
        return []
    items = schema.get("items", {})
    first = generate(items, root, depth=depth + 1)
    values = [first]
    for index in range(1, count):
        values.append(_vary(first, index))
    return values


def _vary(value: Any, index: int) -> Any:
    if isinstance(value, str):
        return value + str(index)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value + index
    return value


def _string(schema: dict[str, Any], root: dict[str, Any], depth: int) -> str:
    text = _FORMATS.get(schema.get("format", ""), "a")
    pattern = schema.get("pattern")
    if pattern:
        try:
            compiled = re.compile(pattern)
        except re.error:
            compiled = None
        if compiled is not None and not compiled.search(text):
            text = next((c for c in _PATTERN_CANDIDATES if compiled.search(c)), None) or _from_regex(pattern)
    low, high = schema.get("minLength") or 0, schema.get("maxLength")
    if len(text) < low:
        text = text + "a" * (low - len(text))
    if high is not None and len(text) > high:
        text = text[:high]
    return text


def _number(schema: dict[str, Any], root: dict[str, Any], depth: int, integer: bool = False) -> int | float:
    low = schema.get("minimum")
    exclusive = schema.get("exclusiveMinimum")
    if isinstance(exclusive, (int, float)) and not isinstance(exclusive, bool):
        low = exclusive + 1 if integer else exclusive + 0.5
    value = low if low is not None else 1
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if high is not None and value > high:
        value = high if "maximum" in schema else high - 1
    step = schema.get("multipleOf")
    if step:
        value = (int(value / step) + (0 if value % step == 0 else 1)) * step
    return int(value) if integer else value


_BY_TYPE = {
    "object": _object,
    "array": _array,
    "string": _string,
    "integer": lambda s, r, d: _number(s, r, d, integer=True),
    "number": _number,
    "boolean": lambda s, r, d: True,
    "null": lambda s, r, d: None,
}


def _unsat(reason: str) -> str:
    raise Unsatisfiable(reason)


def _resolve(ref: str, root: dict[str, Any]) -> Any:
    if not ref.startswith("#/"):
        raise Unsatisfiable(f"external $ref {ref}")
    target: Any = root
    for part in ref[2:].split("/"):
        target = target.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(target, dict) else None
    if target is None:
        raise Unsatisfiable(f"dangling $ref {ref}")
    return target


def _deref(schema: Any, root: dict[str, Any]) -> Any:
    while isinstance(schema, dict) and "$ref" in schema and len(schema) == 1:
        schema = _resolve(schema["$ref"], root)
    return schema


def _merge(a: dict[str, Any], b: Any) -> dict[str, Any]:
    if not isinstance(b, dict):
        return a
    merged = dict(a)
    for key, value in b.items():
        if key == "properties":
            merged["properties"] = {**(merged.get("properties") or {}), **value}
        elif key == "required":
            merged["required"] = list(dict.fromkeys((merged.get("required") or []) + list(value)))
        elif key not in merged:
            merged[key] = value
    return merged


def _valid(value: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    wrapped = {**schema, "$defs": root.get("$defs", {})} if "$defs" in root else schema
    return Draft202012Validator(wrapped).is_valid(value)


def _from_regex(pattern: str) -> str:
    """The shortest string the regex's parse tree spells (first branch, minimum repeats)."""
    try:
        tree = _sre_parser.parse(pattern)
        text = _spell(tree)
    except Exception:
        return _unsat("pattern")
    if re.search(pattern, text) is None:
        return _unsat("pattern")
    return text


def _spell(items: Any) -> str:
    out = []
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(arg))
        elif name == "NOT_LITERAL":
            out.append("a" if arg != ord("a") else "b")
        elif name == "ANY":
            out.append("a")
        elif name == "IN":
            out.append(_spell_class(arg))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, _high, sub = arg
            out.append(_spell(sub) * max(low, 0))
        elif name == "SUBPATTERN":
            out.append(_spell(arg[-1]))
        elif name == "BRANCH":
            out.append(_spell(arg[1][0]))
        elif name in ("AT", "ASSERT", "ASSERT_NOT", "GROUPREF"):
            continue
        else:
            raise ValueError(name)
    return "".join(out)


def _spell_class(items: Any) -> str:
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            return chr(arg)
        if name == "RANGE":
            return chr(arg[0])
        if name == "CATEGORY":
            return {"CATEGORY_DIGIT": "1", "CATEGORY_SPACE": " "}.get(str(arg), "a")
        if name == "NEGATE":
            return "a"
    return "a"
