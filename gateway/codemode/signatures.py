"""Tools as Python functions: their names in a script, and typed signatures read from their exact schemas.

A tool name is a Python identifier as it is (`listIssues`, `get_item`) where it can be; otherwise it is made one
(`-` and other characters become `_`, a leading digit or a name Python or its builtins already use gets a `_`),
and `FunctionNames` maps it back. Parameters that are not identifiers (`X-Api-Key`, `$filter`, `from`) are passed
as `**{"$filter": ...}`.

Types are written the way a model reads them fastest, close to Python's own hints:

    str  int  float  bool  None  Any  list[T]  dict[str, T]  Literal["a", "b"]  A | B
    {id: int, name?: str}          an object (a dict) with the key `id` and the optional key `name`

taken from the exact JSON Schema (2020-12, as the catalog keeps it): `$ref`s are followed (a recursive one is
named, not expanded), `anyOf`/`oneOf` become unions, `allOf` of objects one object, and objects nested deeper
than `depth` become `dict` (the model asks `describe_tool` for the rest).
"""

from __future__ import annotations

import builtins
import json
import keyword
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..catalog import AgentTool
from ..dialects.brevity import first_sentences

_NOT_IDENTIFIER = re.compile(r"\W")
_TAKEN = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(dir(builtins))
_MAX_ENUM = 8
_MAX_PROPERTIES = 12
_SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}


def python_name(name: str) -> str:
    """`name` as a Python identifier that calls no builtin (`get-item` -> `get_item`, `list` -> `list_`)."""
    ident = _NOT_IDENTIFIER.sub("_", name) or "_"
    if ident[0].isdigit():
        ident = "_" + ident
    return ident + "_" if ident in _TAKEN else ident


class FunctionNames:
    """The functions of a script: Python name <-> the agent's tool name (unique, in toolset order)."""

    def __init__(self, tool_names: Iterable[str]) -> None:
        self._tools: dict[str, str] = {}
        self._functions: dict[str, str] = {}
        for tool_name in tool_names:
            function = python_name(tool_name)
            base, count = function, 1
            while function in self._tools:  # `get-item` beside `get_item`: the later one gets a number
                count += 1
                function = f"{base}_{count}"
            self._tools[function] = tool_name
            self._functions[tool_name] = function

    def tool(self, function: str) -> str | None:
        """The tool a script's function name calls; None when it names none."""
        return self._tools.get(function)

    def function(self, tool_name: str) -> str:
        return self._functions.get(tool_name) or python_name(tool_name)

    def __contains__(self, function: object) -> bool:
        return function in self._tools

    def __len__(self) -> int:
        return len(self._tools)


def signature(agent_tool: AgentTool, function: str | None = None, *, depth: int = 2, returns: bool = True,
              summary: bool = True) -> str:
    """`agent_tool` as a Python function stub, e.g.

        # List the issues of a repository.
        def listIssues(*, owner: str, repo: str, state: Literal["open", "closed", "all"] = None) -> list[{...}]

    Parameters: function: its name in the script (default: `python_name` of the tool's); depth: how deep
    nested types are spelled out; returns: with the return type (the success body's schema); summary: with the
    tool's first sentence as a comment line."""
    schema = agent_tool.input_schema if isinstance(agent_tool.input_schema, dict) else {}
    writer = _TypeWriter(schema.get("$defs") or {})
    required = set(schema.get("required") or [])
    properties: dict[str, Any] = schema.get("properties") or {}
    if not isinstance(properties, dict):
        properties = {}
    named: list[str] = []
    loose: list[str] = []
    for key, sub in sorted(properties.items(), key=lambda item: item[0] not in required):
        hint = writer.hint(sub, depth)
        if key.isidentifier() and not keyword.iskeyword(key):
            named.append(f"{key}: {hint}" if key in required else f"{key}: {hint} = None")
        else:
            loose.append(f"{json.dumps(key)}{'' if key in required else '?'}: {hint}")
    params = ["*", *named] if named else []
    if loose:
        params.append("**{" + ", ".join(loose) + "}")
    result = "Any"
    if returns and isinstance(agent_tool.output_schema, dict):
        out = agent_tool.output_schema
        result = _TypeWriter(out.get("$defs") or {}).hint(out, depth)
    head = f"def {function or python_name(agent_tool.name)}({', '.join(params)}) -> {result}"
    text = first_sentences(agent_tool.description, 160).replace("\n", " ") if summary else ""
    return f"# {text}\n{head}" if text else head


class _TypeWriter:
    def __init__(self, defs: Mapping[str, Any]) -> None:
        self.defs = defs
        self.visiting: list[str] = []

    def hint(self, schema: Any, depth: int) -> str:
        if schema is True or not isinstance(schema, dict) or not schema:
            return "Any"
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self._ref(ref, depth)
        if "const" in schema:
            return f"Literal[{json.dumps(schema['const'])}]"
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            if len(enum) <= _MAX_ENUM:
                return "Literal[" + ", ".join(json.dumps(v) for v in enum) + "]"
            return _SCALARS.get(str(schema.get("type")), "Any")
        for union in ("anyOf", "oneOf"):
            members = schema.get(union)
            if isinstance(members, list) and members:
                return _union(self.hint(m, depth) for m in members)
        if isinstance(schema.get("allOf"), list):
            return self._all_of(schema, depth)
        kind = schema.get("type")
        if isinstance(kind, list):
            return _union(self.hint({**schema, "type": k}, depth) for k in kind)
        if kind is None:
            kind = "object" if "properties" in schema else "array" if "items" in schema else None
        if kind == "array":
            items = schema.get("items")
            return f"list[{self.hint(items, depth)}]" if items not in (None, True, {}) else "list"
        if kind == "object":
            return self._object(schema, depth)
        return _SCALARS.get(kind, "Any") if isinstance(kind, str) else "Any"

    def _ref(self, ref: str, depth: int) -> str:
        name = ref.rsplit("/", 1)[-1]
        target = self.defs.get(name) if ref.startswith("#/$defs/") else None
        if target is None:
            return "Any"
        if name in self.visiting:
            return name  # recursive: named, never expanded again
        self.visiting.append(name)
        try:
            return self.hint(target, depth)
        finally:
            self.visiting.pop()

    def _object(self, schema: Mapping[str, Any], depth: int) -> str:
        properties = schema.get("properties")
        if isinstance(properties, dict) and properties:
            if depth <= 0:
                return "dict"
            required = set(schema.get("required") or [])
            shown = list(properties.items())[:_MAX_PROPERTIES]
            fields = [f"{key}{'' if key in required else '?'}: {self.hint(sub, depth - 1)}" for key, sub in shown]
            if len(properties) > _MAX_PROPERTIES:
                fields.append("...")
            return "{" + ", ".join(fields) + "}"
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and extra and depth > 0:
            return f"dict[str, {self.hint(extra, depth - 1)}]"
        return "dict"

    def _all_of(self, schema: Mapping[str, Any], depth: int) -> str:
        merged: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
        for member in schema["allOf"]:
            while isinstance(member, dict) and isinstance(member.get("$ref"), str):
                name = str(member["$ref"]).rsplit("/", 1)[-1]
                if name in self.visiting:
                    return name
                member = self.defs.get(name)
            if not isinstance(member, dict):
                return "dict"
            if not isinstance(member.get("properties"), dict):
                return self.hint(member, depth) if len(schema["allOf"]) == 1 else "dict"
            merged["properties"].update(member["properties"])
            merged["required"].extend(member.get("required") or [])
        return self._object(merged, depth)


def _union(hints: Iterable[str]) -> str:
    unique = list(dict.fromkeys(hints))
    if "Any" in unique:
        return "Any"
    return " | ".join(unique)
