"""A tool's input schema as a tree of form fields (the console's "try a tool" form).

Strings, numbers, integers, booleans, enums, arrays and nested objects become labelled controls; what a form
cannot say plainly (`oneOf`/`anyOf`, free-form objects, `$ref` cycles, tuples) becomes a JSON box for that
value. The browser turns the filled form back into the arguments object (static/console.js); the gateway
then validates it against the exact schema, as it validates every call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

MAX_DEPTH = 6
"""Deeper objects are edited as JSON: a form nested further is no easier than the JSON it stands for."""


@dataclass(slots=True, kw_only=True)
class Field:
    name: str
    """The property name (empty for an array's item template)."""
    label: str
    kind: str
    """string | number | integer | boolean | enum | array | object | json"""
    required: bool = False
    description: str = ""
    format: str = ""
    default: str = ""
    """The schema's default (or example) as the control's initial text; JSON for json/enum kinds."""
    options: list[tuple[str, str]] = field(default_factory=list)
    """Enum choices: (JSON-encoded value, label)."""
    children: list[Field] = field(default_factory=list)
    """Object properties."""
    item: Field | None = None
    """The template of an array's items."""
    id: str = ""
    """A unique DOM id, so each control has a `<label for>`."""


def form_fields(schema: Any) -> list[Field]:
    """The top-level fields of an input schema (an object); `[]` when it takes no arguments."""
    defs = schema.get("$defs", {}) if isinstance(schema, dict) else {}
    counter = [0]
    root = _field("", schema, required=True, defs=defs, depth=0, counter=counter, prefix="arg")
    if root.kind == "object":
        return root.children
    plain_object = isinstance(schema, dict) and schema.get("type", "object") == "object" and not any(
        k in schema for k in ("oneOf", "anyOf", "allOf"))
    return [] if plain_object else [root]  # no properties: the raw JSON editor is the form


def _resolve(schema: Any, defs: dict[str, Any], seen: frozenset[str]) -> tuple[Any, frozenset[str]]:
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#/$defs/"):
        name = schema["$ref"].removeprefix("#/$defs/")
        if name in seen or name not in defs:
            return None, seen  # a cycle: edited as JSON
        seen = seen | {name}
        schema = {**defs[name], **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema, seen


def _field(name: str, schema: Any, *, required: bool, defs: dict[str, Any], depth: int, counter: list[int],
           prefix: str, seen: frozenset[str] = frozenset()) -> Field:
    counter[0] += 1
    dom_id = f"{prefix}-{counter[0]}"
    resolved, seen = _resolve(schema, defs, seen)
    base = Field(name=name, label=name or "item", kind="json", required=required, id=dom_id)
    if not isinstance(resolved, dict):
        return base
    base.description = str(resolved.get("description") or resolved.get("title") or "")[:300]
    types = resolved.get("type")
    if isinstance(types, list):  # ["string", "null"]: the non-null type, left empty for null
        non_null = [t for t in types if t != "null"]
        types = non_null[0] if len(non_null) == 1 else None
    if "default" in resolved or "examples" in resolved:
        sample = resolved.get("default", (resolved.get("examples") or [None])[0])
        base.default = sample if isinstance(sample, str) else json.dumps(sample) if sample is not None else ""
    if isinstance(resolved.get("enum"), list) and resolved["enum"]:
        base.kind = "enum"
        base.options = [(json.dumps(v), str(v)) for v in resolved["enum"]]
        if "default" in resolved:
            base.default = json.dumps(resolved["default"])
        return base
    if any(k in resolved for k in ("oneOf", "anyOf", "allOf", "not", "if")):
        return base
    if types == "string":
        base.kind = "string"
        base.format = str(resolved.get("format") or "")
    elif types in ("number", "integer", "boolean"):
        base.kind = str(types)
    elif types == "array":
        items = resolved.get("items")
        if depth < MAX_DEPTH and isinstance(items, dict):
            base.kind = "array"
            base.item = _field("", items, required=True, defs=defs, depth=depth + 1, counter=counter,
                               prefix=dom_id, seen=seen)
    elif (types == "object" or "properties" in resolved) and depth < MAX_DEPTH:
        properties = resolved.get("properties")
        if isinstance(properties, dict) and properties:
            needed = set(resolved.get("required") or [])
            base.kind = "object"
            base.children = [_field(key, value, required=key in needed, defs=defs, depth=depth + 1,
                                    counter=counter, prefix=prefix, seen=seen)
                             for key, value in properties.items()]
    return base
