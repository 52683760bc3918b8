"""What a tool's arguments say of it, for the search index: each argument's description (its first sentence) and the
values of its enums ("rain" is one of the weather forecast's `hourly` variables, and no other word of its operation
says rain). The path parameters' descriptions are left out (`PATHS`).

Read from the tool's exact input schema: each top-level property's own schema, through a local `$ref` (`#/$defs/...`),
an array's `items` and the alternatives of `anyOf`/`oneOf`/`allOf`, one level deep (an object body's nested
properties are its own business). Only string enums of at most `MAX_VALUES` values count: a longer list is a catalog
of field names (Graph's `$select` and `$orderby` list every property of the resource, "id desc", "displayName") that
would make every operation of a resource match every word of its schema. A description that more than `COMMON` of the
api's tools share may be left out as boilerplate (Graph's "Select properties to be returned" on every read).
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

from ..catalog import Tool
from .views import first_sentences

COMMON: float | None = None
"""The share of an api's tools above which an argument's description is boilerplate, or None: none is. Leaving out
those of more than 1 % or 5 % of the tools found fewer requests than keeping them (bench/README.md, "The rankers
themselves"), so none is left out; the option stays for that benchmark."""
PATHS = False
"""Whether the path parameters' descriptions are read: they say what the path says already (Graph's "The unique
identifier of user" on thousands of paths), and reading them made Graph's index 12 % larger and its searches slower
for no request more (bench/README.md, "The rankers themselves")."""
MAX_VALUES = 30
"""The longest enum read (Open-Meteo's hourly variables are 21); longer ones are lists of field names."""
_DESCRIPTION = 160
"""The characters of an argument's description kept: its first sentence says what it is."""


def parameter_texts(tools: Sequence[Tool], common: float | None = COMMON,
                    paths: bool = PATHS) -> list[tuple[str, str]]:
    """Of each tool, the first sentences of its arguments' descriptions (those more than `common` of `tools` share
    out; with `paths`, the path parameters' too) and its enum values, each as one text."""
    read = [_read(tool, paths) for tool in tools]
    counts = collections.Counter(text for described, _ in read for text in set(described))
    most = max(1.0, common * len(tools)) if common is not None else float("inf")
    return [(" ".join(text for text in described if counts[text] <= most), " ".join(values))
            for described, values in read]


def _read(tool: Tool, paths: bool) -> tuple[list[str], list[str]]:
    """The first sentences of the arguments' descriptions, and their enum values."""
    schema = tool.input_schema
    definitions = schema.get("$defs") or {}
    in_path = set() if paths else {argument.name for argument in tool.arguments if argument.location == "path"}
    described: list[str] = []
    values: list[str] = []
    for name, value in (schema.get("properties") or {}).items():
        if not isinstance(value, dict):
            continue
        if isinstance(value.get("description"), str) and name not in in_path:
            described.append(first_sentences(value["description"], _DESCRIPTION))
        for enum in _enums(value, definitions, 3):
            if len(enum) <= MAX_VALUES:
                values.extend(str(item) for item in enum if isinstance(item, str))
    return described, values


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
