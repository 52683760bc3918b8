"""`allOf` for OpenAI strict mode, which has none: folded into one schema where the parts do not conflict.

Parts that only annotate (`{"description": ...}`) move into their parent; a single remaining part
becomes the schema itself; several parts (following `$defs` references) are merged keyword by keyword:
properties united (the same property in two parts becomes the `allOf` of both, folded in turn),
`required` united, types intersected, bounds tightened, enums intersected, annotations taken from the
later part and the parent last. Conflicts that have no merged form raise `NotStrict`.
"""

from __future__ import annotations

from typing import Any

ANNOTATIONS = frozenset({"description", "title", "examples", "example", "default", "deprecated", "readOnly",
                         "writeOnly", "$comment", "xml", "externalDocs"})
_LOWER_BOUNDS = frozenset({"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains"})
_UPPER_BOUNDS = frozenset({"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains"})


class NotStrict(Exception):
    """Why a schema cannot be sent in strict mode (a short, stable reason: `gateway validate` counts them)."""


class Budget:
    """How many more subschemas one rendering may visit: recursive definitions merged with each other can
    unfold without end (each level doubling the work), and a rendering must end all the same."""

    def __init__(self, steps: int = 50_000) -> None:
        self.steps = steps

    def spend(self) -> None:
        self.steps -= 1
        if self.steps < 0:
            raise NotStrict("allOf of recursive definitions that unfold without end")


def fold_all_of(node: dict[str, Any], defs: dict[str, Any], budget: Budget,
                seen: frozenset[str] = frozenset()) -> dict[str, Any]:
    """`node` without its top-level `allOf` (raises `NotStrict` when the parts conflict)."""
    budget.spend()
    parts = node["allOf"]
    if not isinstance(parts, list):
        raise NotStrict("allOf that is not a list")
    rest = {k: v for k, v in node.items() if k != "allOf"}
    structural = [p for p in parts if not (isinstance(p, dict) and set(p) <= ANNOTATIONS) and p is not True]
    annotations: dict[str, Any] = {}
    for part in parts:
        if isinstance(part, dict) and set(part) <= ANNOTATIONS:
            annotations.update(part)
    annotations.update({k: v for k, v in rest.items() if k in ANNOTATIONS})
    rest_struct = {k: v for k, v in rest.items() if k not in ANNOTATIONS}
    if not structural:
        result = {**rest_struct, **annotations}
    elif len(structural) == 1 and not rest_struct:
        single = structural[0]
        if not isinstance(single, dict):
            raise NotStrict("allOf of a schema that accepts nothing")
        result = {**single, **annotations}
    else:
        merged: dict[str, Any] = {}
        for part in [*structural, rest_struct]:
            merged = _merge(merged, _resolve(part, defs, budget, seen))
        result = {**merged, **annotations}
    if "allOf" in result:
        result = fold_all_of(result, defs, budget, seen)
    return result


def ref_as_all_of(node: dict[str, Any]) -> dict[str, Any]:
    """A `$ref` beside other keywords means both apply (JSON Schema 2020-12): the `allOf` of the two."""
    others = {k: v for k, v in node.items() if k != "$ref" and k not in ANNOTATIONS}
    return {"allOf": [{"$ref": node["$ref"]}, others], **{k: v for k, v in node.items() if k in ANNOTATIONS}}


def _resolve(part: Any, defs: dict[str, Any], budget: Budget, seen: frozenset[str]) -> dict[str, Any]:
    """One part to merge: its `$ref` chain followed (keeping the part's own annotations), `allOf` folded."""
    while isinstance(part, dict) and "$ref" in part:
        if set(part) - {"$ref"} - ANNOTATIONS:
            return fold_all_of(ref_as_all_of(part), defs, budget, seen)
        ref = part["$ref"]
        name = ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None
        if name is None or name in seen or name not in defs:
            raise NotStrict("allOf through a recursive reference")
        seen = seen | {name}
        target = defs[name]
        local = {k: v for k, v in part.items() if k != "$ref"}
        part = {**target, **local} if isinstance(target, dict) else target
    if part is True:
        return {}
    if not isinstance(part, dict):
        raise NotStrict("allOf of a schema that accepts nothing")
    return fold_all_of(part, defs, budget, seen) if "allOf" in part else part


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    for closed, other in ((a, b), (b, a)):
        if closed.get("additionalProperties") is False and set(other.get("properties") or {}) - set(
                closed.get("properties") or {}):
            raise NotStrict("allOf of a closed object and properties it does not declare")
    out = dict(a)
    for key, value in b.items():
        if key not in out or out[key] == value:
            out[key] = value
            continue
        mine = out[key]
        if key in ANNOTATIONS:
            out[key] = value
        elif key == "type":
            out[key] = _intersect_types(mine, value)
        elif key == "properties" and isinstance(mine, dict) and isinstance(value, dict):
            out[key] = {**mine, **{name: sub if name not in mine or mine[name] == sub else {"allOf": [mine[name], sub]}
                                   for name, sub in value.items()}}
        elif key == "required" and isinstance(mine, list) and isinstance(value, list):
            out[key] = [*mine, *(name for name in value if name not in mine)]
        elif key == "enum" and isinstance(mine, list) and isinstance(value, list):
            out[key] = [v for v in mine if v in value]
            if not out[key]:
                raise NotStrict("allOf of enums without a common value")
        elif key in ("items", "additionalProperties"):
            out[key] = _merge_subschemas(mine, value)
        elif key in _LOWER_BOUNDS | _UPPER_BOUNDS and _numbers(mine, value):
            out[key] = max(mine, value) if key in _LOWER_BOUNDS else min(mine, value)
        else:
            raise NotStrict(f"allOf of parts with different {key}")
    return out


def _merge_subschemas(mine: Any, value: Any) -> Any:
    if mine is False or value is False:
        return False
    if mine is True or mine == {}:
        return value
    if value is True or value == {}:
        return mine
    return {"allOf": [mine, value]}


def _numbers(*values: Any) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def _intersect_types(a: Any, b: Any) -> str | list[str]:
    left = {a} if isinstance(a, str) else set(a)
    right = {b} if isinstance(b, str) else set(b)
    common = left & right
    if "integer" in left and "number" in right or "number" in left and "integer" in right:
        common.add("integer")
    if not common:
        raise NotStrict("allOf of different types")
    ordered = [t for t in (a if isinstance(a, list) else [a, "integer"]) if t in common]
    ordered += sorted(common - set(ordered))
    return ordered[0] if len(ordered) == 1 else ordered
