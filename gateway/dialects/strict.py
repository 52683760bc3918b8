"""OpenAI strict mode: the strict-mode form of an exact input schema, and the plan that maps arguments back.

Strict mode constrains the model's arguments to the schema, but accepts only a subset of JSON Schema:
every object closed (`additionalProperties: false`) with every property required (optional ones become
nullable: a null then means "not given"), no `allOf`/`not`/`if`, arrays with `items`, a `$ref` without
other keywords, and size limits (see `strict_limits.py`). Real specs need more, so the rendering:

- folds `allOf`: parts that only annotate (`allOf: [{$ref: X}, {description: ...}]`) move into their parent;
  parts that are objects are merged into one object where they do not conflict (same property with
  incompatible schemas, a closed part beside properties it does not declare, different types);
- gives a schema without a `type` the type its keywords imply (`properties` → object, `items` → array,
  `pattern` → string, `minimum` → number); one without any such keyword accepts any value;
- closes an object that declares properties but leaves others open (the declared ones are what the model
  can use); carries a map (`additionalProperties: <schema>`, no properties) as a list of `{key, value}`
  pairs; carries a free-form object, or a value of any type, as a string holding its JSON text;
- drops keywords strict mode does not support (`minLength`, `default`, `not`, most `format`s, ...): the
  executor still validates the mapped-back arguments against the exact schema.

What it still cannot express raises `NotStrict` with a short reason (counted by `gateway validate`,
printed by `gateway tools --strict`); the tool is then sent with `strict: false` and its exact schema.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..kernel.nullable import make_nullable
from .strict_allof import ANNOTATIONS, Budget, NotStrict, fold_all_of, ref_as_all_of
from .strict_decode import (
    JSON_TEXT,
    AnyOfPlan,
    ArrayPlan,
    JsonTextPlan,
    ObjectPlan,
    PairsPlan,
    Plan,
    RefPlan,
    apply_plan,
)
from .strict_limits import Counts, check_totals, count

FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"})
_KEEP = frozenset({"description", "enum", "const", "pattern", "multipleOf", "minimum", "maximum",
                   "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems"})
_OBJECT_KEYS = frozenset({"properties", "additionalProperties", "patternProperties", "required", "minProperties",
                          "maxProperties", "propertyNames", "dependentRequired", "unevaluatedProperties"})
_ARRAY_KEYS = frozenset({"items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains"})
_STRING_KEYS = frozenset({"minLength", "maxLength", "pattern", "format", "contentMediaType", "contentEncoding"})
_NUMBER_KEYS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})
_JSON_OBJECT_HINT = "A JSON object, sent as a string holding its JSON text."
_JSON_VALUE_HINT = "Any JSON value, sent as a string holding its JSON text."
_PAIRS_HINT = "A map, sent as a list of key/value pairs."


@dataclass(frozen=True, slots=True)
class StrictForm:
    """The strict-mode rendering of one input schema."""

    schema: dict[str, Any]
    """What is sent as the function's `parameters`."""
    plan: Plan
    """How the model's arguments map back to the exact schema (see `strict_decode.py`)."""
    defs: Mapping[str, Plan]
    """The plans of the `$defs`, for `RefPlan`s."""


def strict_form(schema: dict[str, Any]) -> StrictForm:
    """The strict form of an input schema; raises `NotStrict` (reason: "root: ..." or "$defs: ...")."""
    hit = _FORMS.get(id(schema))
    if hit is not None and hit[0] is schema:
        if isinstance(hit[1], NotStrict):
            raise hit[1]
        return hit[1]
    result: StrictForm | NotStrict
    try:
        result = _render(schema)
    except NotStrict as exc:
        result = exc
    except RecursionError:  # merged recursive definitions can unfold without end: not worth a crash
        result = NotStrict("root: allOf of recursive definitions nested too deeply")
    if len(_FORMS) > 8192:
        _FORMS.clear()
    _FORMS[id(schema)] = (schema, result)  # the entry keeps the schema alive, so its id is not reused
    if isinstance(result, NotStrict):
        raise result
    return result


_FORMS: dict[int, tuple[dict[str, Any], StrictForm | NotStrict]] = {}


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The OpenAI strict-mode form of an input schema, or None when strict mode cannot express it."""
    try:
        return strict_form(schema).schema
    except NotStrict:
        return None


def strict_reason(schema: dict[str, Any]) -> str | None:
    """Why an input schema cannot be sent strict; None when it can."""
    try:
        strict_form(schema)
    except NotStrict as exc:
        return str(exc)
    return None


def strict_arguments(schema: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """A strict-mode call's arguments as the exact schema means them (unchanged when the tool is not strict).

    Raises `StrictArgumentsError` when they cannot be mapped back (JSON text that does not parse, ...)."""
    try:
        form = strict_form(schema)
    except NotStrict:
        return arguments
    mapped = apply_plan(form.plan, arguments, form.defs)
    return mapped if isinstance(mapped, dict) else arguments


def _render(schema: dict[str, Any]) -> StrictForm:
    found = schema.get("$defs")
    defs: dict[str, Any] = found if isinstance(found, dict) else {}
    converter = _Converter(defs)
    try:
        root, plan = converter.convert({k: v for k, v in schema.items() if k != "$defs"}, False)
    except NotStrict as exc:
        raise NotStrict(f"root: {exc}") from None
    if root.get("type") != "object" or isinstance(plan, JsonTextPlan | PairsPlan):
        raise NotStrict("root: not an object with properties")
    def_plans: dict[str, Plan] = {}
    counts = count([root])
    if defs:
        strict_defs, def_plans, def_counts = _strict_defs(defs)
        root["$defs"] = strict_defs
        counts = counts + def_counts
    check_totals(counts)
    return StrictForm(schema=root, plan=plan, defs=def_plans)


_Defs = tuple[dict[str, Any], dict[str, Plan], Counts]
_DEFS: dict[int, tuple[dict[str, Any], _Defs | NotStrict]] = {}
_DEF: dict[int, tuple[Any, tuple[dict[str, Any], Plan, Counts] | NotStrict]] = {}


def _strict_defs(defs: dict[str, Any]) -> _Defs:
    """Strict forms of a `$defs` mapping, memoized by identity: the catalog shares one mapping between the
    tools that reach the same definitions, and one definition between the mappings of one spec (an entry
    keeps its key alive, so the id is not reused). Tools share the converted mapping too, read-only."""
    hit = _DEFS.get(id(defs))
    if hit is None or hit[0] is not defs:
        result: _Defs | NotStrict
        try:
            converted: dict[str, Any] = {}
            plans: dict[str, Plan] = {}
            counts = Counts(characters=sum(len(name) for name in defs))
            for name, value in defs.items():
                converted[name], plans[name], def_counts = _strict_def(value, defs)
                counts = counts + def_counts
            result = (converted, plans, counts)
        except NotStrict as exc:
            result = NotStrict(f"$defs: {exc}")
        except RecursionError:
            result = NotStrict("$defs: allOf of recursive definitions nested too deeply")
        if len(_DEFS) > 4096:
            _DEFS.clear()
        hit = _DEFS[id(defs)] = (defs, result)
    if isinstance(hit[1], NotStrict):
        raise hit[1]
    return hit[1]


def _strict_def(value: Any, defs: dict[str, Any]) -> tuple[dict[str, Any], Plan, Counts]:
    """One definition's strict form, its plan and its counts; the names it refers to mean the same in every
    mapping it is part of (they are the spec's own)."""
    hit = _DEF.get(id(value))
    if hit is None or hit[0] is not value:
        result: tuple[dict[str, Any], Plan, Counts] | NotStrict
        try:
            converted, plan = _Converter(defs).convert(value, False)
            result = (converted, plan, count([converted]))
        except NotStrict as exc:
            result = exc
        if len(_DEF) > 65536:
            _DEF.clear()
        hit = _DEF[id(value)] = (value, result)
    if isinstance(hit[1], NotStrict):
        raise hit[1]
    return hit[1]


class _Converter:
    """Converts the schemas of one tool (or one `$defs` mapping) to strict form, with their plans."""

    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs
        self.budget = Budget()

    def convert(self, node: Any, optional: bool) -> tuple[dict[str, Any], Plan]:
        out, plan = self._convert(node)
        if optional:
            return make_nullable(out, lift_description=True), plan
        if "$ref" in out:
            out = {"$ref": out["$ref"]}  # strict mode refuses keywords beside `$ref`
        return out, plan

    def _convert(self, node: Any) -> tuple[dict[str, Any], Plan]:
        self.budget.spend()
        if node is True or node == {}:
            return _json_text(node if isinstance(node, dict) else {}, _JSON_VALUE_HINT)
        if not isinstance(node, dict):
            raise NotStrict("a schema that accepts nothing")
        if "$ref" in node and set(node) - {"$ref"} - ANNOTATIONS:
            node = ref_as_all_of(node)
        if "allOf" in node:
            node = fold_all_of(node, self.defs, self.budget)
        if "$ref" in node:
            return self._ref(node)
        if "anyOf" in node or "oneOf" in node:
            return self._any_of(node)
        kinds = _types(node)
        if kinds is None:
            if "enum" in node or "const" in node:
                return _copy_kept(node), None
            return _json_text(node, _JSON_VALUE_HINT)
        if "object" in kinds:
            return self._object(node, kinds)
        out = _copy_kept(node)
        out["type"] = kinds[0] if len(kinds) == 1 else kinds
        if "enum" in out:
            out["enum"] = [v for v in out["enum"] if _of_types(v, kinds)]
            if not out["enum"]:
                raise NotStrict("an enum without a value of its type")
        if node.get("format") in FORMATS and "string" in kinds:
            out["format"] = node["format"]
        if "array" in kinds:
            items, plan = self.convert(node.get("items", True), False)
            out["items"] = items
            return out, (ArrayPlan(plan) if plan is not None else None)
        return out, None

    def _ref(self, node: dict[str, Any]) -> tuple[dict[str, Any], Plan]:
        ref = node["$ref"]
        name = ref.rsplit("/", 1)[-1] if isinstance(ref, str) and ref.startswith("#/$defs/") else None
        if name is None or name not in self.defs:
            raise NotStrict("a $ref outside $defs")
        out: dict[str, Any] = {"$ref": f"#/$defs/{name}"}
        target = self.defs[name]
        # Strict mode refuses keywords beside `$ref`: a scalar target is inlined with the local description
        # (as OpenAI's SDK does); an object keeps the bare `$ref` (the definition carries its own description,
        # and an optional one gets the local description beside the nullable `anyOf`).
        if isinstance(node.get("description"), str) and _is_scalar(target, self.defs):
            inlined, _ = self._convert(target)
            return {**inlined, "description": node["description"]}, RefPlan(name)
        if isinstance(node.get("description"), str):
            out["description"] = node["description"]  # kept beside the nullable anyOf if optional
        return out, RefPlan(name)

    def _any_of(self, node: dict[str, Any]) -> tuple[dict[str, Any], Plan]:
        branches = [*node.get("anyOf", ()), *node.get("oneOf", ())]
        if "anyOf" in node and "oneOf" in node:
            raise NotStrict("anyOf beside oneOf")
        rest = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
        if set(rest) - ANNOTATIONS - {"type", "discriminator"}:
            # shared keywords beside the branches: push them into each branch
            shared = {k: v for k, v in rest.items() if k not in ANNOTATIONS and k not in ("type", "discriminator")}
            branches = [fold_all_of({"allOf": [branch, shared]}, self.defs, self.budget) for branch in branches]
        converted = [self.convert(branch, False) for branch in branches]
        kept = _distinct_branches(branches, converted, self.defs, self.budget)
        out: dict[str, Any] = {"anyOf": [schema for schema, _ in kept]}
        if isinstance(node.get("description"), str):
            out["description"] = node["description"]
        plans = tuple(plan for _, plan in kept)
        return out, (AnyOfPlan(plans) if any(p is not None for p in plans) else None)

    def _object(self, node: dict[str, Any], kinds: list[str]) -> tuple[dict[str, Any], Plan]:
        properties = node.get("properties") or {}
        extra = node.get("additionalProperties", node.get("unevaluatedProperties"))
        patterns = node.get("patternProperties") or {}
        if len(kinds) > 1 and not (properties or (extra is False and not patterns)) and kinds != ["object", "null"]:
            raise NotStrict("an object or another type, free-form")
        out: dict[str, Any] = {k: v for k, v in node.items() if k == "description"}
        out["type"] = kinds[0] if len(kinds) == 1 else kinds
        if properties or (extra is False and not patterns):
            required = set(node.get("required", ()))
            if extra is not False:
                # a required property the object does not declare (specs do that) is one of its open ones
                undeclared = [name for name in node.get("required", ()) if name not in properties]
                properties = {**properties, **{name: extra if isinstance(extra, dict) else {} for name in undeclared}}
            plans: dict[str, Plan] = {}
            out["properties"] = {}
            for name, sub in properties.items():
                out["properties"][name], plans[name] = self.convert(sub, name not in required)
            out["required"] = list(properties)
            out["additionalProperties"] = False
            optional = frozenset(properties) - required
            return out, ObjectPlan(plans, optional)
        values = extra if isinstance(extra, dict) and extra else None
        if values is None and len(patterns) == 1:
            values = next(iter(patterns.values()))
        if isinstance(values, dict) and _types(values) is not None or isinstance(values, dict) and "$ref" in values:
            try:
                value, value_plan = self.convert(values, False)
            except NotStrict:
                value, value_plan = None, None
            if value is not None:
                pair = {"type": "object", "properties": {"key": {"type": "string"}, "value": value},
                        "required": ["key", "value"], "additionalProperties": False}
                rendered = {"type": "array" if out["type"] == "object" else ["array", "null"], "items": pair,
                            "description": _hint(node, _PAIRS_HINT)}
                return rendered, PairsPlan(value_plan)
        return _json_text(node, _JSON_OBJECT_HINT, nullable="null" in kinds)


def _types(node: dict[str, Any]) -> list[str] | None:
    """The node's types: its `type`, or those its keywords imply; None when it could be anything."""
    kind = node.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list) and kind:
        return [k for k in kind if isinstance(k, str)]
    keys = set(node)
    implied = [name for name, words in (("object", _OBJECT_KEYS), ("array", _ARRAY_KEYS),
                                          ("string", _STRING_KEYS), ("number", _NUMBER_KEYS)) if keys & words]
    if len(implied) > 1:
        raise NotStrict("a schema without a type, with keywords of several types")
    return implied or None


_PY_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "number": (int, float),
                                          "boolean": (bool,), "null": (type(None),), "object": (dict,),
                                          "array": (list,)}


def _of_types(value: Any, kinds: list[str]) -> bool:
    return any(isinstance(value, _PY_TYPES.get(k, ())) and not (isinstance(value, bool) and k in ("integer", "number"))
               for k in kinds)


def _copy_kept(node: dict[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(v) if k in ("enum", "const") else v for k, v in node.items() if k in _KEEP}


def _hint(node: dict[str, Any], hint: str) -> str:
    description = node.get("description")
    return f"{description.rstrip()} ({hint})" if isinstance(description, str) and description.strip() else hint


def _json_text(node: dict[str, Any], hint: str, nullable: bool = False) -> tuple[dict[str, Any], Plan]:
    rendered: dict[str, Any] = {"type": ["string", "null"] if nullable else "string",
                                "description": _hint(node, hint)}
    return rendered, JSON_TEXT


def _is_scalar(target: Any, defs: dict[str, Any]) -> bool:
    """Whether a definition renders without properties of its own (so inlining it copies little)."""
    if not isinstance(target, dict) or "allOf" in target or "$ref" in target:
        return False
    try:
        kinds = _types(target)
    except NotStrict:
        return False
    return kinds is not None and "object" not in kinds and "array" not in kinds and not (
        "anyOf" in target or "oneOf" in target)


def _distinct_branches(branches: list[Any], converted: list[tuple[dict[str, Any], Plan]],
                       defs: dict[str, Any], budget: Budget) -> list[tuple[dict[str, Any], Plan]]:
    """The branches to send, such that a value tells which branch it took. An encoded branch (JSON text,
    pairs) that a string (or list) of another branch could be mistaken for is left out, keeping its null:
    typically `anyOf: [{$ref: X}, {type: [object, null]}]`, a free-form object beside a real type."""
    kept: list[tuple[dict[str, Any], Plan]] = []
    for index, (schema, plan) in enumerate(converted):
        if isinstance(plan, JsonTextPlan | PairsPlan):
            kind = "string" if isinstance(plan, JsonTextPlan) else "array"
            others = [b for i, b in enumerate(branches) if i != index]
            if any(_admits(b, kind, defs, budget, 0) for b in others) or any(
                    type(p) is type(plan) for _, p in kept):
                if "null" in (schema.get("type") or ()):
                    kept.append(({"type": "null"}, None))
                continue
        kept.append((schema, plan))
    return kept


def _admits(node: Any, kind: str, defs: dict[str, Any], budget: Budget, depth: int) -> bool:
    """Whether values of JSON type `kind` may match `node` (True when unsure)."""
    if depth > 16 or not isinstance(node, dict):
        return node is not False
    if "$ref" in node:
        name = str(node["$ref"]).rsplit("/", 1)[-1]
        return name not in defs or _admits(defs[name], kind, defs, budget, depth + 1)
    if "allOf" in node:
        try:
            node = fold_all_of(node, defs, budget)
        except NotStrict:
            return True
        return _admits(node, kind, defs, budget, depth + 1)
    branches = [*node.get("anyOf", ()), *node.get("oneOf", ())]
    if branches:
        return any(_admits(b, kind, defs, budget, depth + 1) for b in branches)
    try:
        kinds = _types(node)
    except NotStrict:
        return True
    if kinds is not None:
        return kind in kinds
    if "enum" in node or "const" in node:
        values = node.get("enum", [node.get("const")])
        return any(isinstance(v, str) if kind == "string" else isinstance(v, list) for v in values)
    return True
