"""A checker of OpenAI strict-mode schemas, written from OpenAI's "Supported schemas" rules (Structured Outputs).

Independent of `gateway.dialects` on purpose: it reads only the rendered schema. Rules:
- the root is an object, not an `anyOf`;
- every object has `additionalProperties: false` and lists every property in `required`;
- only supported keywords: no `allOf`, `not`, `if`/`then`/`else`, `dependentRequired`, `dependentSchemas`,
  `oneOf`, `patternProperties`, ...; string `format`s among the supported ones;
- arrays have `items`; a `$ref` points into the root's `$defs` and has no other keyword beside it (OpenAI's
  SDK inlines such refs because the API refuses them);
- at most 5000 object properties in all and 10 levels of nesting; at most 1000 enum values in all; a string
  enum of more than 250 values at most 15,000 characters; at most 120,000 characters of property names,
  definition names, enum values and const values together.
"""

from __future__ import annotations

from typing import Any

TYPES = {"string", "number", "integer", "boolean", "object", "array", "null"}
FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
KEYWORDS = {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "$ref",
            "description", "title", "pattern", "format", "multipleOf", "minimum", "maximum", "exclusiveMinimum",
            "exclusiveMaximum", "minItems", "maxItems"}
_PY_TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,), "null": (type(None),),
             "object": (dict,), "array": (list,)}


def strict_violations(schema: dict[str, Any]) -> list[str]:
    """Every rule the schema breaks, as `pointer: rule` lines (empty: it is a valid strict-mode schema)."""
    problems: list[str] = []
    if schema.get("type") != "object" or "anyOf" in schema:
        problems.append("/: the root must be an object, not anyOf")
    defs = schema.get("$defs") or {}
    totals = {"properties": 0, "enum": 0, "characters": sum(len(name) for name in defs)}
    _check({k: v for k, v in schema.items() if k != "$defs"}, "", 1, defs, totals, problems)
    for name, definition in defs.items():
        _check(definition, f"/$defs/{name}", 1, defs, totals, problems)
    if totals["properties"] > 5000:
        problems.append(f"/: {totals['properties']} object properties (at most 5000)")
    if totals["enum"] > 1000:
        problems.append(f"/: {totals['enum']} enum values (at most 1000)")
    if totals["characters"] > 120_000:
        problems.append(f"/: {totals['characters']} characters of names and values (at most 120,000)")
    return problems


def _check(node: Any, at: str, depth: int, defs: dict[str, Any], totals: dict[str, int],
           problems: list[str]) -> None:
    if not isinstance(node, dict):
        problems.append(f"{at or '/'}: a schema must be an object, got {node!r}")
        return
    where = at or "/"
    unknown = set(node) - KEYWORDS
    if unknown:
        problems.append(f"{where}: unsupported keywords {sorted(unknown)}")
    if "$ref" in node:
        if len(node) > 1:
            problems.append(f"{where}: $ref beside {sorted(set(node) - {'$ref'})}")
        ref = node["$ref"]
        if not (ref == "#" or isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in defs):
            problems.append(f"{where}: $ref {ref!r} does not point into $defs")
        return
    kinds = node.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if kinds is not None and (not isinstance(kinds, list) or not set(kinds) <= TYPES or not kinds):
        problems.append(f"{where}: type {node.get('type')!r}")
        kinds = []
    if kinds is None and not any(k in node for k in ("anyOf", "enum", "const")):
        problems.append(f"{where}: no type")
    kinds = kinds or []
    if "object" in kinds or "properties" in node:
        properties = node.get("properties")
        if not isinstance(properties, dict):
            problems.append(f"{where}: an object without properties")
            properties = {}
        if node.get("additionalProperties") is not False:
            problems.append(f"{where}: additionalProperties must be false")
        required = node.get("required")
        if not isinstance(required, list) or sorted(required) != sorted(properties):
            problems.append(f"{where}: every property must be required")
        if properties and depth > 10:
            problems.append(f"{where}: more than 10 levels of nesting")
        totals["properties"] += len(properties)
        totals["characters"] += sum(len(name) for name in properties)
        for name, sub in properties.items():
            _check(sub, f"{at}/properties/{name}", depth + 1, defs, totals, problems)
    if "array" in kinds:
        if not isinstance(node.get("items"), dict):
            problems.append(f"{where}: an array without items")
    if "items" in node:
        _check(node["items"], f"{at}/items", depth + 1, defs, totals, problems)
    if "format" in node and node["format"] not in FORMATS:
        problems.append(f"{where}: format {node['format']!r}")
    if "enum" in node:
        values = node["enum"]
        if not isinstance(values, list) or not values:
            problems.append(f"{where}: enum must be a non-empty list")
            values = []
        totals["enum"] += len(values)
        characters = sum(len(v) for v in values if isinstance(v, str))
        totals["characters"] += characters
        if len(values) > 250 and characters > 15_000:
            problems.append(f"{where}: an enum of {len(values)} values and {characters} characters")
        for value in values:
            if kinds and not any(isinstance(value, _PY_TYPES[k]) and not (
                    k in ("integer", "number") and isinstance(value, bool)) for k in kinds):
                problems.append(f"{where}: enum value {value!r} is not of type {kinds}")
    if isinstance(node.get("const"), str):
        totals["characters"] += len(node["const"])
    if "anyOf" in node:
        branches = node["anyOf"]
        if not isinstance(branches, list) or not branches:
            problems.append(f"{where}: anyOf must be a non-empty list")
            branches = []
        for index, branch in enumerate(branches):
            _check(branch, f"{at}/anyOf/{index}", depth, defs, totals, problems)


def model_arguments(schema: dict[str, Any], *, leave_out: bool) -> Any:
    """What a model held to the strict schema might send: every property (null for each nullable one when
    `leave_out`), the first non-null branch of an `anyOf`, and JSON text where the description asks for it."""
    return _value(schema, schema.get("$defs") or {}, leave_out, 0)


def _value(node: dict[str, Any], defs: dict[str, Any], leave_out: bool, depth: int) -> Any:
    if "$ref" in node:
        return _value(defs[node["$ref"][8:]], defs, leave_out, depth + 1) if depth < 40 else None
    if "anyOf" in node:
        branches = [b for b in node["anyOf"] if b.get("type") != "null"]
        return _value(branches[0], defs, leave_out, depth) if branches else None
    if "const" in node:
        return node["const"]
    if "enum" in node:
        return next((v for v in node["enum"] if v is not None), None)
    kinds = node.get("type")
    kinds = [kinds] if isinstance(kinds, str) else [k for k in kinds if k != "null"]
    if not kinds:
        return None
    kind = kinds[0]
    if kind == "object":
        out = {}
        for name, sub in node["properties"].items():
            nullable = sub.get("type") == "null" or "null" in (sub.get("type") or ()) or any(
                b.get("type") == "null" for b in sub.get("anyOf", ()))
            deep = depth > 8 and nullable  # a recursive schema ends where it may
            out[name] = None if leave_out and nullable or deep else _value(sub, defs, leave_out, depth + 1)
        return out
    if kind == "array":
        return [] if depth > 8 else [_value(node["items"], defs, leave_out, depth + 1)]
    if kind == "string":
        return "{}" if "JSON text" in node.get("description", "") else "text"
    if kind in ("integer", "number"):
        low = node.get("minimum", node.get("exclusiveMinimum", 0))
        return int(low) + 1 if kind == "integer" or isinstance(low, int) else low + 1
    return True
