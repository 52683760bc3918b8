"""What a model sees of a tool: a *view* of its exact schema that fits a token budget in every provider format.

The catalog keeps each tool's exact schema; the executor validates against it. A prompt cannot hold it for big
APIs (one Graph tool is hundreds of KB), so `model_view(tool, budget)` applies reduction steps, in this order,
and stops at the first that fits (measured over the OpenAI, OpenAI strict, Anthropic, Gemini and MCP renderings):

1. `read_only`: readOnly properties out of the input (the spec says they are not sent), writeOnly out of the output;
2. `defs`: small leaf `$defs` inlined, unused ones dropped;
3. `annotations`: examples, `x-` extensions, `$comment` and titles out;
4. `descriptions`: every description shortened to its first sentence;
5. `depth:N` (N = 6, 4, 3, 2, 1): the output schema out, references inlined down to depth N, and everything deeper
   replaced by a stub that keeps the JSON type and says how to read its shape (`describe_tool` with a pointer);
6. `enums`: enums of more than 16 values summarized in the description (a few values named);
7. `required_only`: only required properties, as stubs (the last resort; it always fits).

Every step only *widens* what the schema accepts (keywords out, subschemas replaced by open ones, a closed
object opened when one of its properties goes), so the view never refuses arguments the exact schema accepts;
what it leaves out comes back from validation as the usual corrective error. `describe(tool, pointer)` answers
the exact schema of a tool or of one part of it (the `describe_tool` tool of the loop and the MCP door).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from ..dialects import anthropic_tool, gemini_function, mcp_tool, openai_tool

DEFAULT_TOOL_BUDGET = 4000
"""Tokens (estimated) one tool's definition may take in any format; `gateway.tool_budget`."""
CHARS_PER_TOKEN = 3
"""A conservative estimate for JSON schemas (tokenizers give 3-4 characters per token on them)."""
DESCRIBE_TOOL = "describe_tool"
_ANNOTATIONS = frozenset({"examples", "example", "$comment", "title"})
_LARGE_ENUM = 16
_DEPTHS = (6, 4, 3, 2, 1)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[`\"'])")


class ToolLike(Protocol):
    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None


@dataclass(slots=True, kw_only=True)
class ToolView:
    """One tool as a model is shown it; `source` is the tool it views (its exact schema is there)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    source: Any
    steps: tuple[str, ...] = ()
    """The reduction steps applied (empty: the exact schema fit)."""
    tokens: int = 0
    """The estimated tokens of the largest rendering of this view."""

    @property
    def stubbed(self) -> bool:
        """Whether parts of the input are only named (the model may need `describe_tool` for them)."""
        return any(step.startswith(("depth", "required_only")) for step in self.steps)

    @property
    def tool(self) -> Any:
        """The catalog tool behind the view (dialects read its method for MCP annotations)."""
        return getattr(self.source, "tool", None) or self.source


def estimate_tokens(value: Any) -> int:
    return len(orjson.dumps(value)) // CHARS_PER_TOKEN + 1


def definition_tokens(tool: ToolLike) -> int:
    """The estimated tokens of `tool`'s definition in its largest provider rendering."""
    renderings: list[Callable[[Any], dict[str, Any]]] = [
        openai_tool, lambda t: openai_tool(t, strict=True), anthropic_tool, gemini_function, mcp_tool]
    return max(estimate_tokens(render(tool)) for render in renderings)


_VIEWS: dict[tuple[int, int], tuple[Any, dict[str, Any], ToolView]] = {}


def model_view(tool: ToolLike, budget: int = DEFAULT_TOOL_BUDGET) -> ToolView:
    """The view of `tool` that fits `budget` tokens in every format (memoized per tool object and budget)."""
    key = (id(tool), budget)
    hit = _VIEWS.get(key)
    if hit is not None and hit[0] is tool and hit[1] is tool.input_schema:
        return hit[2]
    view = _reduce(tool, budget)
    if len(_VIEWS) > 65536:
        _VIEWS.clear()
    _VIEWS[key] = (tool, tool.input_schema, view)
    return view


def _reduce(tool: ToolLike, budget: int) -> ToolView:
    view = ToolView(name=tool.name, description=tool.description, input_schema=tool.input_schema,
                    output_schema=tool.output_schema, source=tool)
    cheap = (len(tool.description) + _size(tool.input_schema) + _size(tool.output_schema)) // CHARS_PER_TOKEN
    if cheap * 2 < budget:  # the strict rendering at most doubles a schema: fits without measuring
        view.tokens = cheap * 2
        return view
    steps: list[str] = []
    for name, step in _steps(tool.name, budget):
        try:
            step(view)
        except _TooBig:
            continue
        steps.append(name)
        view.steps = tuple(steps)
        plain = (len(view.description) + _size(view.input_schema) + _size(view.output_schema)) // CHARS_PER_TOKEN
        if plain > budget:
            view.tokens = plain  # every rendering carries at least this much: no need to render it
            continue
        view.tokens = definition_tokens(view)
        if view.tokens <= budget:
            return view
    return view  # `required_only` with a cut description: as small as a view gets


def _size(schema: dict[str, Any] | None) -> int:
    """Characters of a schema's JSON, its `$defs` entries measured once per definition object."""
    if schema is None:
        return 4
    defs = schema.get("$defs")
    if not isinstance(defs, dict):
        return len(orjson.dumps(schema))
    body = len(orjson.dumps({k: v for k, v in schema.items() if k != "$defs"}))
    return body + sum(len(name) + 4 + _def_facts(value)[1] for name, value in defs.items())


def _steps(name: str, budget: int) -> Iterator[tuple[str, Callable[[ToolView], None]]]:
    def read_only(view: ToolView) -> None:
        view.input_schema = _drop_flagged(view.input_schema, "readOnly")
        if view.output_schema is not None:
            view.output_schema = _drop_flagged(view.output_schema, "writeOnly")

    def defs(view: ToolView) -> None:
        view.input_schema = _inline_small_defs(view.input_schema)
        if view.output_schema is not None:
            view.output_schema = _inline_small_defs(view.output_schema)

    def annotations(view: ToolView) -> None:
        view.input_schema = _map_nodes(view.input_schema, _strip_annotations, "annotations")
        if view.output_schema is not None:
            view.output_schema = _map_nodes(view.output_schema, _strip_annotations, "annotations")

    def descriptions(view: ToolView) -> None:
        view.description = first_sentences(view.description, 400)
        view.input_schema = _map_nodes(view.input_schema, _shorten_description, "descriptions")
        if view.output_schema is not None:
            view.output_schema = _map_nodes(view.output_schema, _shorten_description, "descriptions")

    yield "read_only", read_only
    yield "defs", defs
    yield "annotations", annotations
    yield "descriptions", descriptions
    shallow: dict[str, Any] = {}
    for depth in _DEPTHS:
        def cut(view: ToolView, depth: int = depth) -> None:
            if not shallow:
                shallow.update(view.input_schema)
            view.output_schema = None
            view.input_schema = _Cutter(name, shallow, depth, budget * CHARS_PER_TOKEN * 2).root()
        yield f"depth:{depth}", cut

    def enums(view: ToolView) -> None:
        view.input_schema = _map_nodes(view.input_schema, _summarize_enum, "enums")

    def required_only(view: ToolView) -> None:
        view.description = first_sentences(view.description, 200)
        view.input_schema = _required_only(name, shallow or view.input_schema)

    yield "enums", enums
    yield "required_only", required_only


class _TooBig(Exception):
    """A depth's inlined schema outgrew the budget: try the next, shallower one."""


def first_sentences(text: str, limit: int) -> str:
    """`text` cut to its first sentence (or paragraph), at most `limit` characters."""
    text = (text or "").strip()
    if len(text) <= 120 and "\n" not in text:
        return text
    first = text.split("\n\n", 1)[0].strip()
    parts = _SENTENCE.split(first, maxsplit=1)
    short = parts[0].strip()
    if len(short) > limit:
        short = short[: limit - 1].rstrip() + "…"
    return short


# -- schema walks (every one builds new dicts: the catalog shares its schemas between tools) ----------


_DEF_MEMO: dict[tuple[int, str], tuple[Any, Any]] = {}


def _map_nodes(schema: Any, change: Callable[[dict[str, Any]], dict[str, Any]], tag: str = "") -> Any:
    """Apply `change` to every subschema (bottom-up), `$defs` included. With a `tag` (naming a change that
    gives the same answer for the same definition), each `$defs` entry is changed once per process: the
    catalog shares one entry between every tool of a spec that reaches it."""
    if isinstance(schema, list):
        return [_map_nodes(item, change) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "$defs" and isinstance(value, dict) and tag:
            out[key] = {name: _map_def(sub, change, tag) for name, sub in value.items()}
        elif key in ("properties", "$defs", "patternProperties", "dependentSchemas") and isinstance(value, dict):
            out[key] = {name: _map_nodes(sub, change) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
                     "unevaluatedProperties", "unevaluatedItems"):
            out[key] = _map_nodes(value, change)
        elif key in ("allOf", "anyOf", "oneOf", "prefixItems") and isinstance(value, list):
            out[key] = [_map_nodes(sub, change) for sub in value]
        else:
            out[key] = value
    return change(out)


def _map_def(value: Any, change: Callable[[dict[str, Any]], dict[str, Any]], tag: str) -> Any:
    key = (id(value), tag)
    hit = _DEF_MEMO.get(key)
    if hit is not None and hit[0] is value:
        return hit[1]
    if len(_DEF_MEMO) > 200_000:
        _DEF_MEMO.clear()
    changed = _map_nodes(value, change)
    _DEF_MEMO[key] = (value, changed)  # the entry keeps `value` alive, so its id is not reused
    return changed


def _strip_annotations(node: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k not in _ANNOTATIONS and not k.startswith("x-")}


def _shorten_description(node: dict[str, Any]) -> dict[str, Any]:
    description = node.get("description")
    if isinstance(description, str) and len(description) > 120:
        return {**node, "description": first_sentences(description, 160)}
    return node


def _summarize_enum(node: dict[str, Any]) -> dict[str, Any]:
    values = node.get("enum")
    if not isinstance(values, list) or len(values) <= _LARGE_ENUM:
        return node
    out = {k: v for k, v in node.items() if k != "enum"}
    if "type" not in out:
        kinds = sorted({_json_type(v) for v in values})
        out["type"] = kinds[0] if len(kinds) == 1 else kinds
    named = ", ".join(str(v) for v in values[:8])
    note = f"One of {len(values)} values, e.g. {named}."
    out["description"] = f"{out['description']} {note}" if out.get("description") else note
    return out


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _resolve(schema: Any, defs: dict[str, Any]) -> Any:
    for _ in range(16):
        if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str)):
            break
        schema = defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
    return schema


def _drop_flagged(schema: dict[str, Any], flag: str) -> dict[str, Any]:
    """Properties marked `flag` (readOnly, writeOnly) out of every object; such an object is opened, so a
    value for a dropped property is still accepted (the exact schema decides)."""
    defs = schema.get("$defs") or {}

    def change(node: dict[str, Any]) -> dict[str, Any]:
        properties = node.get("properties")
        if not isinstance(properties, dict):
            return node
        gone = {name for name, sub in properties.items() if isinstance(_resolve(sub, defs), dict)
                and _resolve(sub, defs).get(flag) is True}
        if not gone:
            return node
        out = {k: v for k, v in node.items()
               if k not in ("additionalProperties", "unevaluatedProperties", "patternProperties")}
        out["properties"] = {name: sub for name, sub in properties.items() if name not in gone}
        if "required" in node:
            out["required"] = [name for name in node["required"] if name not in gone]
        return out

    return _map_nodes(schema, change, flag)  # type: ignore[no-any-return]


def _refs(node: Any) -> Iterator[str]:
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, dict):
            ref = current.get("$ref")
            if isinstance(ref, str):
                yield ref.rsplit("/", 1)[-1]
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)


_REFS_MEMO: dict[int, tuple[Any, frozenset[str], int]] = {}


def _def_facts(value: Any) -> tuple[frozenset[str], int]:
    """The names a definition refers to and its size, once per definition object (shared between tools)."""
    hit = _REFS_MEMO.get(id(value))
    if hit is not None and hit[0] is value:
        return hit[1], hit[2]
    if len(_REFS_MEMO) > 200_000:
        _REFS_MEMO.clear()
    names, size = frozenset(_refs(value)), len(orjson.dumps(value))
    _REFS_MEMO[id(value)] = (value, names, size)
    return names, size


def _def_refs(value: Any) -> frozenset[str]:
    return _def_facts(value)[0]


def _is_small_leaf(value: Any, small: int) -> bool:
    names, size = _def_facts(value)
    return not names and size <= small


def _inline_small_defs(schema: dict[str, Any], small: int = 400) -> dict[str, Any]:
    """Leaf `$defs` (no references of their own) under `small` characters inlined; unreachable ones dropped."""
    defs = schema.get("$defs")
    if not isinstance(defs, dict) or not defs:
        return schema
    leaves = {name: value for name, value in defs.items() if _is_small_leaf(value, small)}

    def change(node: dict[str, Any]) -> dict[str, Any]:
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.rsplit("/", 1)[-1] in leaves:
            return {**leaves[ref.rsplit("/", 1)[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
        return node

    out: dict[str, Any] = _map_nodes(schema, change, "inline")
    root = {k: v for k, v in out.items() if k != "$defs"}
    reachable: set[str] = set()
    pending = list(_refs(root))
    while pending:
        name = pending.pop()
        if name in reachable or name not in out["$defs"]:
            continue
        reachable.add(name)
        pending.extend(_def_refs(out["$defs"][name]))
    if reachable:
        root["$defs"] = {name: value for name, value in out["$defs"].items() if name in reachable}
    return root


def _accepted_types(node: Any, defs: dict[str, Any], depth: int = 0) -> str | list[str] | None:
    """The JSON types a subschema accepts, when it says (None: it does not, or not simply)."""
    node = _resolve(node, defs)
    if not isinstance(node, dict) or depth > 8:
        return None
    kind = node.get("type")
    if isinstance(kind, str | list):
        return kind
    branches = node.get("anyOf") or node.get("oneOf")
    if isinstance(branches, list) and branches:
        kinds: set[str] = set()
        for branch in branches:
            sub = _accepted_types(branch, defs, depth + 1)
            if sub is None:
                return None
            kinds.update([sub] if isinstance(sub, str) else sub)
        if "integer" in kinds and "number" in kinds:
            kinds.discard("integer")
        return sorted(kinds)[0] if len(kinds) == 1 else sorted(kinds)
    return None


def _stub(tool: str, node: Any, defs: dict[str, Any], pointer: str) -> dict[str, Any]:
    """An open stand-in for a subschema: its type (so the view accepts what it did) and a description."""
    resolved = _resolve(node, defs)
    out: dict[str, Any] = {}
    kinds = _accepted_types(resolved, defs)
    if kinds is not None:
        out["type"] = kinds
    described = resolved.get("description") if isinstance(resolved, dict) else None
    if not described and isinstance(node, dict):
        described = node.get("description")
    hint = f"Its shape: call {DESCRIBE_TOOL} with name {tool!r} and pointer {pointer!r}."
    out["description"] = f"{first_sentences(described, 160)} {hint}" if described else hint
    return out


class _Cutter:
    """The input schema with references inlined down to `depth` levels and stubs below (see the module doc)."""

    def __init__(self, tool: str, schema: dict[str, Any], depth: int, limit: int) -> None:
        self.tool = tool
        self.schema = schema
        self.defs = schema.get("$defs") or {}
        self.depth = depth
        self.left = limit

    def root(self) -> dict[str, Any]:
        body = {k: v for k, v in self.schema.items() if k != "$defs"}
        return self._node(body, "", 0)  # type: ignore[no-any-return]

    def _node(self, node: Any, pointer: str, level: int) -> Any:
        resolved = _resolve(node, self.defs)
        if not isinstance(resolved, dict):
            return resolved
        if isinstance(node, dict) and "$ref" in node and len(node) > 1:
            resolved = {**resolved, **{k: v for k, v in node.items() if k != "$ref"}}
        compound = any(k in resolved for k in ("properties", "items", "anyOf", "oneOf", "allOf",
                                               "additionalProperties", "$ref", "prefixItems"))
        if compound and level >= self.depth:
            return _stub(self.tool, resolved, self.defs, pointer)
        out: dict[str, Any] = {}
        for key, value in resolved.items():
            if key == "properties" and isinstance(value, dict):
                out[key] = {name: self._node(sub, f"{pointer}/properties/{_escape(name)}", level + 1)
                            for name, sub in value.items()}
            elif key in ("items", "additionalProperties") and isinstance(value, dict):
                out[key] = self._node(value, f"{pointer}/{key}", level + 1)
            elif key in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(value, list):
                out[key] = [self._node(sub, f"{pointer}/{key}/{index}", level) for index, sub in enumerate(value)]
            elif key in ("not", "if", "then", "else", "contains", "propertyNames", "patternProperties",
                         "dependentSchemas", "unevaluatedProperties", "unevaluatedItems"):
                continue  # constraints only narrow what is accepted: out of a view
            else:
                out[key] = value
        self.left -= len(out) * 12 + sum(len(v) for v in out.values() if isinstance(v, str))
        if isinstance(out.get("enum"), list):
            self.left -= sum(len(str(v)) + 3 for v in out["enum"])
        if self.left < 0:
            raise _TooBig
        return out


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _required_only(tool: str, schema: dict[str, Any]) -> dict[str, Any]:
    defs = schema.get("$defs") or {}
    properties = schema.get("properties") or {}
    required = [name for name in schema.get("required") or () if name in properties]
    out: dict[str, Any] = {"type": "object", "properties": {
        name: _stub(tool, properties[name], defs, f"/properties/{_escape(name)}") for name in required}}
    if required:
        out["required"] = required
    others = [name for name in properties if name not in required]
    if others:
        shown = ", ".join(others[:20]) + (", ..." if len(others) > 20 else "")
        out["description"] = (f"Optional arguments not shown: {shown}. Their shapes: call {DESCRIBE_TOOL} with "
                              f"name {tool!r}.")
    return out


# -- the exact schema on demand ---------------------------------------------------------------------


def describe(tool: ToolLike, pointer: str = "", *, limit: int = 60_000) -> dict[str, Any]:
    """The exact input schema of `tool`, or its part at `pointer` (a JSON pointer that follows `$ref`s), with
    the names of the `$defs` it refers to (ask for `/$defs/<name>` next). Raises KeyError for a bad pointer."""
    schema = tool.input_schema
    defs = schema.get("$defs") or {}
    node: Any = schema
    walked = ""
    for raw in [part for part in pointer.split("/") if part] if pointer else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        node = _resolve(node, defs) if part != "$defs" or walked else node
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise KeyError(f"{tool.name} has no part {pointer!r} (stopped at {walked or '/'!r} before {part!r})")
        walked += "/" + raw
    node = _resolve(node, defs)
    if node is schema and "$defs" in schema:
        node = {k: v for k, v in schema.items() if k != "$defs"}
    answer: dict[str, Any] = {"name": tool.name, "pointer": pointer or "", "schema": node}
    referenced = sorted(set(_refs(node)))
    if referenced:
        answer["refs"] = [f"/$defs/{name}" for name in referenced]
    if len(orjson.dumps(answer)) > limit:
        answer["schema"] = _Cutter(tool.name, {**(node if isinstance(node, dict) else {}), "$defs": defs},
                                   2, 10**9).root() if isinstance(node, dict) else node
        answer["note"] = "large: deeper parts are stubs; ask for their pointers"
    return answer


DESCRIBE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "The tool's name."},
        "pointer": {"type": "string", "description": "A JSON pointer into its input schema, e.g. "
                                                     "/properties/body; empty for the whole schema."},
    },
    "required": ["name"],
}
