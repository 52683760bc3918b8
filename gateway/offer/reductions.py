"""The schema edits a model view applies (`gateway.offer.views`): annotations and readOnly parts out,
descriptions to their first sentence, small `$defs` inlined, large enums summarized, deep parts cut to stubs, only
the required properties. Every walk builds new dicts: the catalog shares its schemas between tools.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson

from ..dialects.brevity import first_sentences

DESCRIBE_TOOL = "describe_tool"
"""The tool a model asks for the exact schema of a tool or a part of it (`gateway.offer.views.describe`)."""
_ANNOTATIONS = frozenset({"examples", "example", "$comment", "title"})
_LARGE_ENUM = 16



class TooBig(Exception):
    """A depth's inlined schema outgrew the budget: try the next, shallower one."""





# -- schema walks (every one builds new dicts: the catalog shares its schemas between tools) ----------


_DEF_MEMO: dict[tuple[int, str], tuple[Any, Any]] = {}


def map_nodes(schema: Any, change: Callable[[dict[str, Any]], dict[str, Any]], tag: str = "") -> Any:
    """Apply `change` to every subschema (bottom-up), `$defs` included. With a `tag` (naming a change that
    gives the same answer for the same definition), each `$defs` entry is changed once per process: the
    catalog shares one entry between every tool of a spec that reaches it."""
    if isinstance(schema, list):
        return [map_nodes(item, change) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "$defs" and isinstance(value, dict) and tag:
            out[key] = {name: _map_def(sub, change, tag) for name, sub in value.items()}
        elif key in ("properties", "$defs", "patternProperties", "dependentSchemas") and isinstance(value, dict):
            out[key] = {name: map_nodes(sub, change) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
                     "unevaluatedProperties", "unevaluatedItems"):
            out[key] = map_nodes(value, change)
        elif key in ("allOf", "anyOf", "oneOf", "prefixItems") and isinstance(value, list):
            out[key] = [map_nodes(sub, change) for sub in value]
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
    changed = map_nodes(value, change)
    _DEF_MEMO[key] = (value, changed)  # the entry keeps `value` alive, so its id is not reused
    return changed


def strip_annotations(node: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k not in _ANNOTATIONS and not k.startswith("x-")}


def shorten_description(node: dict[str, Any]) -> dict[str, Any]:
    description = node.get("description")
    if isinstance(description, str) and len(description) > 120:
        return {**node, "description": first_sentences(description, 160)}
    return node


def summarize_enum(node: dict[str, Any]) -> dict[str, Any]:
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


def resolve(schema: Any, defs: dict[str, Any]) -> Any:
    for _ in range(16):
        if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str)):
            break
        schema = defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
    return schema


def drop_flagged(schema: dict[str, Any], flag: str) -> dict[str, Any]:
    """Properties marked `flag` (readOnly, writeOnly) out of every object; such an object is opened, so a
    value for a dropped property is still accepted (the exact schema decides)."""
    defs = schema.get("$defs") or {}

    def change(node: dict[str, Any]) -> dict[str, Any]:
        properties = node.get("properties")
        if not isinstance(properties, dict):
            return node
        gone = {name for name, sub in properties.items() if isinstance(resolve(sub, defs), dict)
                and resolve(sub, defs).get(flag) is True}
        if not gone:
            return node
        out = {k: v for k, v in node.items()
               if k not in ("additionalProperties", "unevaluatedProperties", "patternProperties")}
        out["properties"] = {name: sub for name, sub in properties.items() if name not in gone}
        if "required" in node:
            out["required"] = [name for name in node["required"] if name not in gone]
        return out

    return map_nodes(schema, change, flag)  # type: ignore[no-any-return]


def refs(node: Any) -> Iterator[str]:
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


def def_facts(value: Any) -> tuple[frozenset[str], int]:
    """The names a definition refers to and its size, once per definition object (shared between tools)."""
    hit = _REFS_MEMO.get(id(value))
    if hit is not None and hit[0] is value:
        return hit[1], hit[2]
    if len(_REFS_MEMO) > 200_000:
        _REFS_MEMO.clear()
    names, size = frozenset(refs(value)), len(orjson.dumps(value))
    _REFS_MEMO[id(value)] = (value, names, size)
    return names, size


def _def_refs(value: Any) -> frozenset[str]:
    return def_facts(value)[0]


def _is_small_leaf(value: Any, small: int) -> bool:
    names, size = def_facts(value)
    return not names and size <= small


def inline_small_defs(schema: dict[str, Any], small: int = 400) -> dict[str, Any]:
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

    out: dict[str, Any] = map_nodes(schema, change, "inline")
    root = {k: v for k, v in out.items() if k != "$defs"}
    reachable: set[str] = set()
    pending = list(refs(root))
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
    node = resolve(node, defs)
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
    resolved = resolve(node, defs)
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


class Cutter:
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
        resolved = resolve(node, self.defs)
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
            raise TooBig
        return out


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def keep_required(tool: str, schema: dict[str, Any]) -> dict[str, Any]:
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
