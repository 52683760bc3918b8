"""The way back from OpenAI strict mode: the model's arguments as the tool's exact schema means them.

The strict rendering (`strict.py`) changes the shape of a schema in three ways, and records each change
in a *plan* built beside the strict schema, so the way back follows the rendering exactly:

- every optional property became required-but-nullable: a null for an optional property means "not
  given" and is dropped (even where the spec allows null: otherwise a strict PATCH would clear every
  optional field it did not mean to touch); a null for a required property is the model's value;
- a free-form object (or a value of any type) became a string holding its JSON text: it is decoded;
- a map (`additionalProperties: <schema>`) became a list of `{"key", "value"}` pairs: it becomes an object.

The result is then validated against the exact schema as before, with the same corrective errors. What
cannot be mapped back (JSON text that does not parse, a key given twice) raises `StrictArgumentsError`,
whose message names the field, so the model can correct itself. Values that do not have the shape the
plan expects are left alone for validation to report; so applying a plan twice changes nothing more.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_DEPTH = 64


class StrictArgumentsError(ValueError):
    """The model's strict-mode arguments do not map back (the message names the field and what was expected)."""


@dataclass(frozen=True, slots=True)
class ObjectPlan:
    properties: Mapping[str, Plan]
    optional: frozenset[str]


@dataclass(frozen=True, slots=True)
class ArrayPlan:
    items: Plan


@dataclass(frozen=True, slots=True)
class JsonTextPlan:
    """The value travels as a string holding its JSON text."""


@dataclass(frozen=True, slots=True)
class PairsPlan:
    """The object travels as a list of `{"key": ..., "value": ...}` pairs."""

    value: Plan


@dataclass(frozen=True, slots=True)
class AnyOfPlan:
    branches: tuple[Plan, ...]


@dataclass(frozen=True, slots=True)
class RefPlan:
    name: str


Plan = ObjectPlan | ArrayPlan | JsonTextPlan | PairsPlan | AnyOfPlan | RefPlan | None
"""How to map one value back; None: keep it as it is."""

JSON_TEXT = JsonTextPlan()


def apply_plan(plan: Plan, value: Any, defs: Mapping[str, Plan], path: str = "") -> Any:
    """`value` (the model's strict-mode arguments) mapped back to the exact schema's form."""
    return _apply(plan, value, defs, path, 0)


def _apply(plan: Plan, value: Any, defs: Mapping[str, Plan], path: str, depth: int) -> Any:
    for _ in range(16):  # a chain of aliases; recursion proper goes through properties
        if not isinstance(plan, RefPlan):
            break
        plan = defs.get(plan.name)
    if plan is None or depth > MAX_DEPTH:
        return value
    if isinstance(plan, ObjectPlan):
        if not isinstance(value, dict):
            return value
        out = {}
        for key, item in value.items():
            if key not in plan.properties:
                out[key] = item  # not in the schema: left for validation to report
            elif item is None and key in plan.optional:
                continue
            else:
                out[key] = _apply(plan.properties[key], item, defs, _join(path, key), depth + 1)
        return out
    if isinstance(plan, ArrayPlan):
        if not isinstance(value, list):
            return value
        return [_apply(plan.items, item, defs, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]
    if isinstance(plan, JsonTextPlan):
        return _decode(value, path)
    if isinstance(plan, PairsPlan):
        return _pairs_to_object(plan, value, defs, path, depth)
    if isinstance(plan, AnyOfPlan):
        return _apply(_branch_for(plan, value, defs), value, defs, path, depth)
    return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _decode(value: Any, path: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError as exc:
        raise StrictArgumentsError(f"`{path or 'arguments'}` must be a string holding JSON text (for example "
                                   f"'{{\"key\": \"value\"}}'), and its text does not parse: {exc}") from None


def _pairs_to_object(plan: PairsPlan, value: Any, defs: Mapping[str, Plan], path: str, depth: int) -> Any:
    if not isinstance(value, list) or not all(isinstance(p, dict) and isinstance(p.get("key"), str) for p in value):
        return value
    out: dict[str, Any] = {}
    for pair in value:
        key = pair["key"]
        if key in out:
            raise StrictArgumentsError(f"`{path or 'arguments'}` has the key {key!r} twice: give each key once")
        out[key] = _apply(plan.value, pair.get("value"), defs, _join(path, key), depth + 1)
    return out


def _branch_for(plan: AnyOfPlan, value: Any, defs: Mapping[str, Plan]) -> Plan:
    """The branch of an `anyOf` the model's value took: by its shape, and for objects by their keys (strict
    mode makes the model send every property of the branch it chose)."""
    best: Plan = None
    best_score = -1
    for branch in plan.branches:
        resolved = branch
        for _ in range(16):
            if not isinstance(resolved, RefPlan):
                break
            resolved = defs.get(resolved.name)
        if isinstance(value, dict) and isinstance(resolved, ObjectPlan):
            score = len(set(value) & set(resolved.properties)) - len(set(value) - set(resolved.properties))
            if set(value) == set(resolved.properties):
                return branch
        elif isinstance(value, list) and isinstance(resolved, ArrayPlan | PairsPlan):
            return branch
        elif isinstance(value, str) and isinstance(resolved, JsonTextPlan):
            return branch
        else:
            continue
        if score > best_score:
            best, best_score = branch, score
    return best
