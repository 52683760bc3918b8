"""Gemini: one `FunctionDeclaration` per tool, in Gemini's OpenAPI-subset `Schema` when the schema fits it.

The schema goes into `parameters` only when it fits that subset once annotations are dropped: `type` (one
type, or one type + null → `nullable`), `properties`, `required`, `items`, `anyOf` (`oneOf` becomes
`anyOf`), string `enum`s, `minimum`/`maximum`, the length/count bounds, `pattern`, and the formats Gemini
lists (float, double, int32, int64, date-time, enum). Anything else (`$ref`/`$defs`, `const`,
`exclusiveMinimum`, `allOf`, non-string enums, maps, ...) sends the exact schema as `parametersJsonSchema`
instead, so a bad keyword never reaches `parameters`. A tool without arguments gets no `parameters` at all
(Gemini rejects an OBJECT without properties).
"""

from __future__ import annotations

from typing import Any

from .tool import ToolLike

_GEMINI_TYPES = {"string": "STRING", "number": "NUMBER", "integer": "INTEGER", "boolean": "BOOLEAN",
                 "array": "ARRAY", "object": "OBJECT"}
_GEMINI_FORMATS = {"NUMBER": {"float", "double"}, "INTEGER": {"int32", "int64"}, "STRING": {"date-time", "enum"}}
_GEMINI_COPY = ("description", "title", "minimum", "maximum", "minItems", "maxItems", "minLength", "maxLength",
                "minProperties", "maxProperties", "pattern")
_GEMINI_DROP = frozenset({"examples", "default", "deprecated", "readOnly", "writeOnly", "$comment",
                          "contentMediaType", "contentEncoding", "format", "additionalProperties"})


class _Unfit(Exception):
    """The schema does not fit Gemini's subset."""


def gemini_function(t: ToolLike) -> dict[str, Any]:
    declaration: dict[str, Any] = {"name": t.name, "description": t.description}
    if not t.input_schema.get("properties"):
        return declaration  # Gemini rejects an OBJECT without properties; a tool without arguments has none
    subset = gemini_schema(t.input_schema)
    if subset is not None:
        declaration["parameters"] = subset
    else:
        declaration["parametersJsonSchema"] = {k: v for k, v in t.input_schema.items() if k != "$schema"}
    return declaration


def gemini_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The schema in Gemini's `Schema` subset, or None when it does not fit (see the module docstring)."""
    try:
        return _gemini(schema)
    except _Unfit:
        return None


def _gemini(node: Any) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise _Unfit("boolean schema")
    out: dict[str, Any] = {}
    kinds = node.get("type")
    nullable = False
    if isinstance(kinds, list):
        nullable = "null" in kinds
        kinds = [k for k in kinds if k != "null"]
        if len(kinds) != 1:
            raise _Unfit("several types")
        kinds = kinds[0]
    if kinds is not None:
        if kinds not in _GEMINI_TYPES:
            raise _Unfit(f"type {kinds}")
        out["type"] = _GEMINI_TYPES[kinds]
    for key, value in node.items():
        if key == "type" or key in _GEMINI_DROP:
            continue
        if key in _GEMINI_COPY:
            out[key] = value
        elif key == "properties":
            out["properties"] = {name: _gemini(sub) for name, sub in value.items()}
        elif key == "required":
            out["required"] = list(value)
        elif key == "items":
            out["items"] = _gemini(value)
        elif key in ("anyOf", "oneOf"):
            out["anyOf"] = [_gemini(sub) for sub in value]
        elif key == "enum":
            values = [v for v in value if v is not None]
            if not all(isinstance(v, str) for v in values) or out.get("type", "STRING") != "STRING":
                raise _Unfit("non-string enum")
            nullable = nullable or None in value
            out["enum"] = values
        else:
            raise _Unfit(key)
    if node.get("additionalProperties") not in (None, False) or "type" not in out and "anyOf" not in out:
        raise _Unfit("a map or an untyped schema")
    if out.get("type") == "OBJECT" and not out.get("properties"):
        raise _Unfit("an object without properties")
    allowed = _GEMINI_FORMATS.get(out.get("type", ""), ())
    if node.get("format") in allowed:
        out["format"] = node["format"]
    if nullable:
        out["nullable"] = True
    return out
