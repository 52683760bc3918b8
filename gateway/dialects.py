"""Tool definitions in each provider's wire format, rendered at the edge from the exact catalog schema.

Formats: `json` (the catalog's own view), `openai` (Chat Completions `tools`), `anthropic`, `gemini`
(one `FunctionDeclaration` per tool) and `mcp` (MCP `Tool`). The input is anything with `name`,
`description`, `input_schema` and `output_schema` (`Tool` and `AgentTool` both). Schemas are never
changed in place: the catalog shares them between tools.

Rules that are not obvious:
- OpenAI strict (`strict=True`): every object is closed (`additionalProperties: false`), every property
  is required, and a property that was optional becomes nullable (`null` means "not given": see
  `drop_strict_nulls`). Keywords strict mode does not support (`minLength`, `default`, `examples`,
  most `format`s, `dependentRequired` of an optional spread body, ...) are dropped; the executor still
  validates against the exact schema. A schema strict mode cannot express at all (a free-form object or
  map, `allOf` of non-objects, `not`, a schema without a type), or one beyond OpenAI's documented limits
  (5000 properties, 10 levels of nesting, 1000 enum values, 120,000 characters), renders that tool with
  `strict: false` and its exact schema instead.
- Gemini: the schema goes into `parameters` (Gemini's OpenAPI-subset `Schema`) only when it fits that
  subset once annotations are dropped: `type` (one type, or one type + null → `nullable`), `properties`,
  `required`, `items`, `anyOf` (`oneOf` becomes `anyOf`), string `enum`s, `minimum`/`maximum`, the
  length/count bounds, `pattern`, and the formats Gemini lists (float, double, int32, int64, date-time,
  enum). Anything else (`$ref`/`$defs`, `const`, `exclusiveMinimum`, `allOf`, non-string enums, maps, ...)
  sends the exact schema as `parametersJsonSchema` instead, so a bad keyword never reaches `parameters`.
  A tool without arguments gets no `parameters` at all (Gemini rejects an OBJECT without properties).
- MCP: `inputSchema` is the input schema; `outputSchema` must have `type: "object"` at its root, so a
  non-object output is wrapped as `{"type": "object", "properties": {"result": <schema>}}` and the
  structured result must be sent as `{"result": value}` (see `mcp_structured_content`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from .openapi._schema import make_nullable

FORMATS = ("json", "openai", "anthropic", "gemini", "mcp")
_OPENAI_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"})
_OPENAI_DROP = frozenset({"title", "default", "examples", "deprecated", "readOnly", "writeOnly", "$comment",
                          "minLength", "maxLength", "minProperties", "maxProperties", "uniqueItems",
                          "contentMediaType", "contentEncoding", "minContains", "maxContains",
                          "dependentRequired"})
_OPENAI_KEEP = frozenset({"type", "description", "enum", "const", "pattern", "multipleOf", "minimum", "maximum",
                          "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems"})
_GEMINI_TYPES = {"string": "STRING", "number": "NUMBER", "integer": "INTEGER", "boolean": "BOOLEAN",
                 "array": "ARRAY", "object": "OBJECT"}
_GEMINI_FORMATS = {"NUMBER": {"float", "double"}, "INTEGER": {"int32", "int64"}, "STRING": {"date-time", "enum"}}
_GEMINI_COPY = ("description", "title", "minimum", "maximum", "minItems", "maxItems", "minLength", "maxLength",
                "minProperties", "maxProperties", "pattern")
_GEMINI_DROP = frozenset({"examples", "default", "deprecated", "readOnly", "writeOnly", "$comment",
                          "contentMediaType", "contentEncoding", "format", "additionalProperties"})


class ToolLike(Protocol):
    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None


class _Unfit(Exception):
    """The schema does not fit the target dialect's subset."""


def render_tools(tools: Iterable[ToolLike], format: str, *, strict: bool = False,
                 budget: int | None = None) -> list[dict[str, Any]]:
    """Render every tool in one wire format (`json`, `openai`, `anthropic`, `gemini`, `mcp`).

    With a `budget` (tokens per tool), each tool is rendered as its model view within that budget
    (`gateway.openapi.views`); `json` always shows the exact schema."""
    if budget is not None and format != "json":
        from .openapi.views import model_view

        tools = [model_view(t, budget) for t in tools]
    if format == "json":
        return [json_tool(t) for t in tools]
    if format == "openai":
        return [openai_tool(t, strict=strict) for t in tools]
    if format == "anthropic":
        return [anthropic_tool(t) for t in tools]
    if format == "gemini":
        return [gemini_function(t) for t in tools]
    if format == "mcp":
        return [mcp_tool(t) for t in tools]
    raise ValueError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")


def json_tool(t: ToolLike) -> dict[str, Any]:
    to_dict = getattr(t, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    rendered = {"name": t.name, "description": t.description, "input_schema": t.input_schema,
                "output_schema": t.output_schema}
    inner = getattr(t, "tool", None)
    for key in ("api", "operation_id", "method", "path"):
        rendered[key] = getattr(inner, key, None) if inner is not None else None
    return rendered


# -- OpenAI -----------------------------------------------------------------------------------------


def openai_tool(t: ToolLike, strict: bool = False) -> dict[str, Any]:
    function: dict[str, Any] = {"name": t.name, "description": t.description, "parameters": t.input_schema}
    if strict:
        converted = strict_schema(t.input_schema)
        if converted is not None:
            function["parameters"] = converted
            function["strict"] = True
        else:
            function["strict"] = False
    return {"type": "function", "function": function}


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The OpenAI strict-mode form of an input schema, or None when strict mode cannot express it."""
    defs = schema.get("$defs") if isinstance(schema.get("$defs"), dict) else {}
    try:
        converted = _strict({k: v for k, v in schema.items() if k != "$defs"}, False, defs)
    except _Unfit:
        return None
    if converted.get("type") != "object":
        return None
    counts = _strict_counts([converted], 0)
    if defs:
        strict_defs, def_counts = _strict_defs(defs)
        if strict_defs is None:
            return None
        converted["$defs"] = strict_defs
        counts = tuple(a + b for a, b in zip(counts, def_counts, strict=True))
    properties, enums, characters, too_deep = counts
    if properties > 5000 or enums > 1000 or characters > 120_000 or too_deep:
        return None
    return converted


_STRICT_DEFS: dict[int, tuple[dict[str, Any], dict[str, Any] | None, tuple[int, int, int, int]]] = {}


def _strict_defs(defs: dict[str, Any]) -> tuple[dict[str, Any] | None, tuple[int, int, int, int]]:
    """Strict forms of a `$defs` mapping, memoized by identity: the catalog shares one mapping between the
    tools that reach the same definitions (the entry keeps the mapping alive, so its id is not reused)."""
    hit = _STRICT_DEFS.get(id(defs))
    if hit is not None and hit[0] is defs:
        return hit[1], hit[2]
    converted: dict[str, Any] | None
    try:
        converted = {name: _strict(value, False, defs) for name, value in defs.items()}
        counts = _strict_counts(converted.values(), sum(len(name) for name in defs))
    except _Unfit:
        converted, counts = None, (0, 0, 0, 0)
    if len(_STRICT_DEFS) > 4096:
        _STRICT_DEFS.clear()
    _STRICT_DEFS[id(defs)] = (defs, converted, counts)
    return converted, counts


def _strict_counts(roots: Iterable[Any], characters: int) -> tuple[int, int, int, int]:
    """What OpenAI's strict-mode limits count: properties (5000), enum values (1000), characters of
    names and enum/const values (120,000), and whether nesting goes beyond 10 levels."""
    properties = enums = too_deep = 0
    stack: list[tuple[Any, int]] = [(root, 1) for root in roots]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, dict):
            continue
        props = node.get("properties") or {}
        if props and depth > 10:
            too_deep = 1
        properties += len(props)
        characters += sum(len(name) for name in props)
        for value in node.get("enum", ()):
            enums += 1
            characters += len(value) if isinstance(value, str) else 0
        if isinstance(node.get("const"), str):
            characters += len(node["const"])
        stack.extend((value, depth + 1) for value in props.values())
        if "items" in node:
            stack.append((node["items"], depth + 1))
        stack.extend((value, depth) for value in node.get("anyOf", ()))
    return properties, enums, characters, too_deep


def _strict(node: Any, optional: bool, defs: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(node, dict) or not node:
        raise _Unfit("a schema without a type")
    if "allOf" in node:
        node = _merge_all_of(node, defs, set())
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            required = set(node.get("required", ()))
            out["properties"] = {name: _strict(sub, name not in required, defs) for name, sub in value.items()}
            out["required"] = list(value)
        elif key in ("anyOf", "oneOf"):
            out["anyOf"] = [_strict(sub, False, defs) for sub in value]
        elif key == "items":
            out["items"] = _strict(value, False, defs)
        elif key == "$ref":
            out["$ref"] = value
        elif key == "format":
            if value in _OPENAI_FORMATS:
                out["format"] = value
        elif key in _OPENAI_KEEP:
            out[key] = value
        elif key in _OPENAI_DROP or key in ("required", "additionalProperties", "$defs"):
            continue
        else:
            raise _Unfit(key)
    kinds = out.get("type")
    is_object = kinds == "object" or isinstance(kinds, list) and "object" in kinds
    if is_object or "properties" in out:
        if not out.get("properties") or node.get("additionalProperties") not in (None, False):
            raise _Unfit("a free-form object")
        out["additionalProperties"] = False
    if not any(k in out for k in ("type", "$ref", "anyOf", "enum", "const")):
        raise _Unfit("a schema without a type")
    return make_nullable(out, lift_description=True) if optional else out


def _merge_all_of(node: dict[str, Any], defs: dict[str, Any], seen: set[str]) -> dict[str, Any]:
    """Flatten `allOf` (following `$defs` references) into one object schema, as strict mode has no `allOf`."""
    parts = node["allOf"]
    if len(parts) == 1 and set(node) <= {"allOf", "description", "title"} and isinstance(parts[0], dict):
        single = parts[0]
        if "$ref" not in single or len(single) > 1:
            return {**single, **{k: v for k, v in node.items() if k != "allOf"}}
        return {"$ref": single["$ref"], **{k: v for k, v in node.items() if k != "allOf"}}
    merged: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
    for key in ("description", "title"):
        if key in node:
            merged[key] = node[key]
    for part in [*parts, {k: v for k, v in node.items() if k != "allOf"}]:
        while isinstance(part, dict) and set(part) - {"description", "title"} == {"$ref"}:
            name = part["$ref"].rsplit("/", 1)[-1]
            if name in seen or name not in defs:
                raise _Unfit("allOf through a recursive reference")
            seen = seen | {name}
            part = defs[name]
        if not isinstance(part, dict):
            raise _Unfit("allOf of non-objects")
        if "allOf" in part:
            part = _merge_all_of(part, defs, seen)
        if part.get("type", "object") != "object":
            raise _Unfit("allOf of non-objects")
        if set(part) - {"type", "properties", "required", "description", "additionalProperties", "title"}:
            raise _Unfit("allOf with other keywords")
        merged["properties"].update(part.get("properties", {}))
        merged["required"].extend(part.get("required", ()))
    return merged


def drop_strict_nulls(input_schema: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """Undo strict mode's "optional = nullable": a null for an optional property means "not given".

    Strict mode makes every optional property of every object level required-but-nullable, so the model sends
    `null` for everything it leaves out. Those nulls are removed at every level the schema describes (through
    `$ref`, `allOf`, `items`), even where the spec allows null: otherwise a strict PATCH would clear every
    optional field it did not mean to touch. A null for a required property is kept (it is the model's value).
    """
    return _drop_nulls(arguments, input_schema, input_schema.get("$defs") or {}, 0)


def _drop_nulls(value: Any, schema: Any, defs: dict[str, Any], depth: int) -> Any:
    schema = _resolve_ref(schema, defs)
    if depth > 64 or not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        properties, required = _object_members(schema, defs)
        out = {}
        for key, item in value.items():
            sub = properties.get(key)
            if item is None and sub is not None and key not in required:
                continue
            out[key] = item if sub is None else _drop_nulls(item, sub, defs, depth + 1)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_drop_nulls(item, schema["items"], defs, depth + 1) for item in value]
    return value


def _resolve_ref(schema: Any, defs: dict[str, Any]) -> Any:
    for _ in range(16):  # a chain of plain aliases; recursion proper goes through properties
        if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str)):
            break
        schema = defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
    return schema


def _object_members(schema: dict[str, Any], defs: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    properties = dict(schema.get("properties") or {})
    required = set(schema.get("required") or ())
    for part in schema.get("allOf") or ():
        part = _resolve_ref(part, defs)
        if isinstance(part, dict):
            more, more_required = _object_members(part, defs)
            properties.update(more)
            required |= more_required
    return properties, required


# -- Anthropic --------------------------------------------------------------------------------------


def anthropic_tool(t: ToolLike) -> dict[str, Any]:
    return {"name": t.name, "description": t.description, "input_schema": t.input_schema}


# -- Gemini -----------------------------------------------------------------------------------------


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


# -- MCP --------------------------------------------------------------------------------------------


def mcp_tool(t: ToolLike) -> dict[str, Any]:
    rendered: dict[str, Any] = {"name": t.name, "description": t.description, "inputSchema": t.input_schema}
    output = mcp_output_schema(t.output_schema)
    if output is not None:
        rendered["outputSchema"] = output
    method = getattr(getattr(t, "tool", None) or t, "method", None)
    if isinstance(method, str):
        read_only = method in ("GET", "HEAD", "OPTIONS")
        rendered["annotations"] = {"readOnlyHint": read_only, "destructiveHint": method == "DELETE",
                                   "idempotentHint": method in ("GET", "HEAD", "OPTIONS", "PUT", "DELETE")}
    return rendered


def mcp_output_wraps(output_schema: dict[str, Any] | None) -> bool:
    return output_schema is not None and output_schema.get("type") != "object"


def mcp_output_schema(output_schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """`outputSchema` for MCP: the output itself when its root is an object, else wrapped in `result`."""
    if output_schema is None:
        return None
    if not mcp_output_wraps(output_schema):
        return output_schema
    inner = {k: v for k, v in output_schema.items() if k != "$defs"}
    wrapped: dict[str, Any] = {"type": "object", "properties": {"result": inner}, "required": ["result"]}
    if "$defs" in output_schema:
        wrapped["$defs"] = output_schema["$defs"]  # refs are `#/$defs/...`: they must stay at the root
    return wrapped


def mcp_structured_content(output_schema: dict[str, Any] | None, value: Any) -> Any:
    """The `structuredContent` to send for `value`, matching `mcp_output_schema`."""
    return {"result": value} if mcp_output_wraps(output_schema) else value
