"""The first few errors of an instance that a schema refuses, found within a budget, for wording.

`fastschema.is_valid` (jsonschema_rs) says whether an instance holds; when it does not, the pure-Python
`jsonschema` validator finds what is wrong, because its errors carry what a good sentence needs (the keyword, its
value, the subschema, the instance). It walks the instance lazily and stops after the first few errors. What could
make that walk cost more than its size is taken away:

- every keyword check counts against `BUDGET`; once it is spent the walk stops with the errors found so far
  (`BudgetSpent` when none was), however large the instance or deep the schema;
- a regular expression (`pattern`, `patternProperties`, the patterns `additionalProperties` looks past) and a
  `format` are decided by jsonschema_rs, never by Python's backtracking `re` (`fastschema.pattern_matches`);
- the items of a long array are judged one by one by jsonschema_rs, and only those it refuses are walked (a
  wrong last message among 4,000 is found without walking the others);
- `uniqueItems` is decided by jsonschema_rs (Python compares objects pair by pair);
- messages mention a large instance briefly (Python's quote all of it);
- `anyOf`/`oneOf` keep only each branch's first error as the context (Python collects every error of every
  branch before saying anything);
- `unevaluatedProperties`/`unevaluatedItems` are checked only on small instances (Python's check compares keys
  with lists), and `unevaluatedProperties` never in a schema with `patternProperties` (it would match keys with
  `re`); elsewhere the judge's verdict stands without their sentence.

This is CPU work proportional to the budget: callers on the event loop run it in a worker thread
(`gateway.execution.arguments.run_off_the_loop`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError

from . import fastschema

BUDGET = 20_000
"""Keyword checks one search for errors may make (`python -m bench.stall` shows what the worst case costs)."""

ITEMS_PER_CHECK = 8
"""Array items jsonschema_rs judges for the price of one keyword check (a judged item costs a fraction of one)."""

NARROW_FROM = 32
"""Items from which the judge picks the ones of an array to walk (the others hold)."""

SMALL_FOR_UNEVALUATED = 256
"""Keys or items up to which `unevaluatedProperties`/`unevaluatedItems` are checked while wording."""


class BudgetSpent(Exception):
    """The search for errors ran out of its budget before it found one."""


_budget = threading.local()


def _counted(check: Any) -> Any:
    def counted(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _budget.left -= 1
        if _budget.left < 0:
            raise BudgetSpent
        return check(validator, value, instance, schema)

    return counted


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if isinstance(instance, str) and fastschema.pattern_matches(pattern, instance) is False:
        yield ValidationError(f"{_brief(instance)} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any,
                        schema: Any) -> Iterator[ValidationError]:
    if not isinstance(instance, dict):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if fastschema.pattern_matches(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


_ADDITIONAL_PROPERTIES = Draft202012Validator.VALIDATORS["additionalProperties"]


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    patterns = schema.get("patternProperties")
    if not patterns or not isinstance(instance, dict):
        yield from _ADDITIONAL_PROPERTIES(validator, additional, instance, schema)
        return
    known = schema.get("properties") or {}
    extras = [key for key in instance
              if key not in known and not any(fastschema.pattern_matches(p, key) for p in patterns)]
    if isinstance(additional, dict):
        for key in extras:
            yield from validator.descend(instance[key], additional, path=key)
    elif additional is False and extras:
        yield ValidationError(f"{', '.join(map(repr, sorted(extras)))} match none of the regexes "
                              f"{', '.join(map(repr, sorted(patterns)))}")


def _format(validator: Any, format: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if isinstance(instance, str) and fastschema.format_holds(format, instance) is False:
        yield ValidationError(f"{_brief(instance)} is not a {format!r}")


def _type(validator: Any, types: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    names = types if isinstance(types, list) else [types]
    if not any(validator.is_type(instance, name) for name in names):
        yield ValidationError(f"{_brief(instance)} is not of type {', '.join(map(repr, names))}")


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if unique is True and isinstance(instance, list) and not fastschema.unique(instance):
        yield ValidationError("the array has non-unique elements")


_ITEMS = Draft202012Validator.VALIDATORS["items"]


def _items(validator: Any, items: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not isinstance(instance, list) or len(instance) <= NARROW_FROM:
        yield from _ITEMS(validator, items, instance, schema)
        return
    judge = fastschema.judge_of_part(items, _budget.root)
    if judge is None:
        yield from _ITEMS(validator, items, instance, schema)
        return
    for index in range(len(schema.get("prefixItems") or ()), len(instance)):
        if index % ITEMS_PER_CHECK == 0:
            _budget.left -= 1
            if _budget.left < 0:
                raise BudgetSpent
        if not judge(instance[index]):
            yield from validator.descend(instance[index], items, path=index)


def _any_of(validator: Any, branches: list[Any], instance: Any, schema: Any) -> Iterator[ValidationError]:
    firsts = []
    for index, branch in enumerate(branches):
        first = next(validator.descend(instance, branch, schema_path=index), None)
        if first is None:
            return
        firsts.append(first)
    yield ValidationError(f"{_brief(instance)} is not valid under any of the given schemas", context=firsts)


def _one_of(validator: Any, branches: list[Any], instance: Any, schema: Any) -> Iterator[ValidationError]:
    firsts = [next(validator.descend(instance, branch, schema_path=index), None)
              for index, branch in enumerate(branches)]
    errors = [error for error in firsts if error is not None]
    if len(errors) == len(firsts):
        yield ValidationError(f"{_brief(instance)} is not valid under any of the given schemas", context=errors)
    elif len(firsts) - len(errors) > 1:
        yield ValidationError(f"{_brief(instance)} is valid under more than one of the given schemas")


def _small_only(check: Any) -> Any:
    def small(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        if isinstance(instance, dict | list) and len(instance) > SMALL_FOR_UNEVALUATED:
            return ()
        return check(validator, value, instance, schema)

    return small


def _mentions(node: Any, key: str) -> bool:
    if isinstance(node, dict):
        return key in node or any(_mentions(value, key) for value in node.values())
    if isinstance(node, list):
        return any(_mentions(value, key) for value in node)
    return False


_KEYWORDS = dict(Draft202012Validator.VALIDATORS)
_KEYWORDS.update({
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "format": _format,
    "type": _type,
    "uniqueItems": _unique_items,
    "items": _items,
    "anyOf": _any_of,
    "oneOf": _one_of,
    "unevaluatedProperties": _small_only(_KEYWORDS["unevaluatedProperties"]),
    "unevaluatedItems": _small_only(_KEYWORDS["unevaluatedItems"]),
})
_Validator = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator, {name: _counted(check) for name, check in _KEYWORDS.items()})
_WithoutUnevaluatedProperties = validators.extend(  # type: ignore[no-untyped-call]
    _Validator, {"unevaluatedProperties": lambda *args: ()})
"""For a schema with `patternProperties` (Python's `unevaluatedProperties` would match its keys with `re`)."""

_CACHE_SIZE = 4096
_validators: dict[int, tuple[Any, Any]] = {}
_lock = threading.Lock()


def validator_for(schema: Any) -> Any:
    """The wording validator of `schema`, compiled once."""
    entry = _validators.get(id(schema))
    if entry is not None and entry[0] is schema:  # keyed by identity, the schema kept so an id is never reused
        return entry[1]
    kind = _WithoutUnevaluatedProperties if _mentions(schema, "patternProperties") else _Validator
    validator = kind(schema)
    with _lock:
        if len(_validators) >= _CACHE_SIZE:
            _validators.pop(next(iter(_validators)))
        _validators[id(schema)] = (schema, validator)
    return validator


def first_errors(schema: Any, instance: Any, count: int) -> list[ValidationError]:
    """The first `count` errors of `instance` against `schema`, in the order the walk found them.

    Raises `BudgetSpent` when the budget ran out before the first error. A schema the validator cannot use (a
    `$ref` to nowhere) gives no errors."""
    _budget.left = BUDGET
    _budget.root = schema
    found: list[ValidationError] = []
    try:
        for error in validator_for(schema).iter_errors(instance):
            found.append(error)
            if len(found) >= count:
                break
    except BudgetSpent:
        if not found:
            raise
    except RecursionError:
        raise BudgetSpent from None
    except Exception:  # noqa: BLE001 - a broken schema words nothing; the judge's verdict stands
        return found
    return found


def _brief(value: Any, limit: int = 80) -> str:
    """A short mention of `value` for a message (Python's messages quote the whole instance, however large)."""
    if isinstance(value, dict):
        return f"an object of {len(value)} field(s)"
    if isinstance(value, list):
        return f"an array of {len(value)} item(s)"
    text = repr(value[:limit]) if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"
