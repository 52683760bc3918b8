"""What a tool's arguments say of it, for the search index: each parameter's description (its first sentence; the path
parameters' and the body's aside) and the values of its arguments' enums ("rain" is one of the weather forecast's
`hourly` variables, and no other word of its operation says rain). The path parameters' descriptions say what the
path says already (Graph's "The unique identifier of user" on thousands of paths) and the body's properties' cost
BM25 alone 8 development requests: neither is read. What was read and left out, and on which requests, is in
bench/README.md ("The rankers themselves": the path parameters', the body's, descriptions many tools share, the
first words only).

Read from the tool's exact input schema: each top-level property's own schema, through a local `$ref` (`#/$defs/...`),
an array's `items` and the alternatives of `anyOf`/`oneOf`/`allOf`, one level deep (an object body's nested
properties are its own business). Only string enums of at most `MAX_VALUES` values count: a longer list is a catalog
of field names that would make every operation of a resource match every word of its schema. OData's system query
options (`$select`, `$expand`, `$orderby`) are not read at all: Graph lists a resource's fields in their enums (30 or
fewer on a small resource) and describes them alike on every read ("Select properties to be returned"), which cost
12 of Graph's 268 tuning requests when read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..catalog import Tool
from .views import first_sentences

MAX_VALUES = 30
"""The longest enum read (Open-Meteo's hourly variables are 21); longer ones are lists of field names."""
_DESCRIPTION = 160
"""The characters of an argument's description kept: its first sentence says what it is."""
_UNREAD = frozenset({"path", "body"})
"""The arguments whose descriptions are not read."""


def parameter_texts(tools: Sequence[Tool]) -> list[tuple[str, str]]:
    """Of each tool, the first sentences of its arguments' descriptions (the path parameters' and the body's out) and
    its arguments' enum values, each as one text."""
    return [_read(tool) for tool in tools]


def _read(tool: Tool) -> tuple[str, str]:
    schema = tool.input_schema
    definitions = schema.get("$defs") or {}
    located = {argument.name: argument for argument in tool.arguments}
    described: list[str] = []
    values: list[str] = []
    for name, value in (schema.get("properties") or {}).items():
        argument = located.get(name)
        if not isinstance(value, dict) or argument is not None and argument.wire_name.startswith("$"):  # $select
            continue
        if isinstance(value.get("description"), str) and (argument is None or argument.location not in _UNREAD):
            described.append(first_sentences(value["description"], _DESCRIPTION))
        for enum in _enums(value, definitions, 3):
            if len(enum) <= MAX_VALUES:
                values.extend(str(item) for item in enum if isinstance(item, str))
    return " ".join(described), " ".join(values)


def _enums(schema: dict[str, Any], definitions: dict[str, Any], depth: int) -> list[list[Any]]:
    """The enums of `schema`, through a local `$ref`, `items` and the alternatives of a composition."""
    if depth < 0:
        return []
    found: list[list[Any]] = []
    if isinstance(schema.get("enum"), list):
        found.append(schema["enum"])
    reference = schema.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/$defs/"):
        target = definitions.get(reference.removeprefix("#/$defs/"))
        if isinstance(target, dict):
            found += _enums(target, definitions, depth - 1)
    items = schema.get("items")
    if isinstance(items, dict):
        found += _enums(items, definitions, depth - 1)
    for keyword in ("anyOf", "oneOf", "allOf"):
        for option in schema.get(keyword) or ():
            if isinstance(option, dict):
                found += _enums(option, definitions, depth - 1)
    return found
