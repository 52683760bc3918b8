"""OpenAI's documented size limits of a strict-mode schema, checked on the rendered form.

At most 5000 object properties in all and 10 levels of nesting; at most 1000 enum values in all, and a
string enum of more than 250 values at most 15,000 characters; at most 120,000 characters of property
names, definition names, enum values and const values together.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .strict_allof import NotStrict

MAX_PROPERTIES = 5000
MAX_DEPTH = 10
MAX_ENUM_VALUES = 1000
LARGE_ENUM = 250
MAX_LARGE_ENUM_CHARACTERS = 15_000
MAX_CHARACTERS = 120_000


@dataclass(frozen=True, slots=True)
class Counts:
    """What the limits count in one part of a schema (a tool's own schema, or a shared `$defs` mapping)."""

    properties: int = 0
    enums: int = 0
    characters: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.properties + other.properties, self.enums + other.enums,
                      self.characters + other.characters)


def count(roots: Iterable[Any], characters: int = 0) -> Counts:
    """The counts of rendered schemas; raises `NotStrict` for a limit that holds per node (nesting, enums)."""
    properties = enums = 0
    stack: list[tuple[Any, int]] = [(root, 1) for root in roots]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, dict):
            continue
        props = node.get("properties") or {}
        if props and depth > MAX_DEPTH:
            raise NotStrict(f"beyond OpenAI's limits: more than {MAX_DEPTH} levels of nesting")
        properties += len(props)
        characters += sum(len(name) for name in props)
        values = node.get("enum") or ()
        enums += len(values)
        enum_characters = sum(len(v) for v in values if isinstance(v, str))
        if len(values) > LARGE_ENUM and enum_characters > MAX_LARGE_ENUM_CHARACTERS:
            raise NotStrict(f"beyond OpenAI's limits: an enum of more than {LARGE_ENUM} values and "
                            f"{MAX_LARGE_ENUM_CHARACTERS} characters")
        characters += enum_characters
        if isinstance(node.get("const"), str):
            characters += len(node["const"])
        stack.extend((value, depth + 1) for value in props.values())
        if "items" in node:
            stack.append((node["items"], depth + 1))
        stack.extend((value, depth) for value in node.get("anyOf", ()))
    return Counts(properties, enums, characters)


def check_totals(counts: Counts) -> None:
    """Raise `NotStrict` when the whole schema's counts are beyond a limit."""
    if counts.properties > MAX_PROPERTIES:
        raise NotStrict(f"beyond OpenAI's limits: more than {MAX_PROPERTIES} properties")
    if counts.enums > MAX_ENUM_VALUES:
        raise NotStrict(f"beyond OpenAI's limits: more than {MAX_ENUM_VALUES} enum values")
    if counts.characters > MAX_CHARACTERS:
        raise NotStrict(f"beyond OpenAI's limits: more than {MAX_CHARACTERS} characters of names and values")
