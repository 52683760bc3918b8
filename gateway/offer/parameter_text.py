"""What a tool's arguments say of it, for the search index: each parameter's description (its first sentence) and the
values of its enums ("rain" is one of the weather forecast's `hourly` variables, and no other word of its operation
says rain). The path parameters' descriptions (`PATHS`) and the body's properties' (`BODY`) are left out; each
constant was chosen on requests no rule was written for (bench/README.md, "The rankers themselves").

Read from the tool's exact input schema: each top-level property's own schema, through a local `$ref` (`#/$defs/...`),
an array's `items` and the alternatives of `anyOf`/`oneOf`/`allOf`, one level deep (an object body's nested
properties are its own business). Only string enums of at most `MAX_VALUES` values count: a longer list is a catalog
of field names that would make every operation of a resource match every word of its schema. OData's system query
options (`$select`, `$expand`, `$orderby`) are not read at all: Graph lists a resource's fields in their enums (30 or
fewer on a small resource) and describes them alike on every read ("Select properties to be returned"), which cost
12 of Graph's 268 tuning requests when read. A description that more than `COMMON` of the api's tools share may be
left out as boilerplate.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

from ..catalog import Tool
from .views import first_sentences

DESCRIBED = True
"""Whether the arguments' descriptions are read (the index's `described` column; empty when not, which leaves BM25 as
if it had no such column)."""
COMMON: float | None = None
"""The share of an api's tools above which an argument's description is boilerplate, or None: none is. Leaving out
those of more than 1 % or 5 % of the tools found fewer requests than keeping them, so none is left out; the option
stays for bench/search_rankers.py."""
PATHS = False
"""Whether the path parameters' descriptions are read: they say what the path says already (Graph's "The unique
identifier of user" on thousands of paths)."""
BODY = False
"""Whether the body's properties' descriptions are read: with them, BM25 alone found 8 fewer development requests."""
WORDS: int | None = None
"""The words of the descriptions read per tool, or None: all (30 or 80 found fewer)."""
MAX_VALUES = 30
"""The longest enum read (Open-Meteo's hourly variables are 21); longer ones are lists of field names."""
_DESCRIPTION = 160
"""The characters of an argument's description kept: its first sentence says what it is."""


def parameter_texts(tools: Sequence[Tool], common: float | None = COMMON, paths: bool = PATHS,
                    body: bool = BODY, words: int | None = WORDS,
                    described: bool = DESCRIBED) -> list[tuple[str, str]]:
    """Of each tool, the first sentences of its arguments' descriptions (with `described`; those more than `common`
    of `tools` share out; with `paths`, the path parameters' too; with `body`, the body's properties' too; the first
    `words` words) and its enum values, each as one text."""
    read = [_read(tool, paths, body) for tool in tools]
    if not described:
        return [("", " ".join(values)) for _, values in read]
    counts = collections.Counter(text for described, _ in read for text in set(described))
    most = max(1.0, common * len(tools)) if common is not None else float("inf")
    said = [" ".join(text for text in described if counts[text] <= most) for described, _ in read]
    if words is not None:
        said = [" ".join(text.split()[:words]) for text in said]
    return [(text, " ".join(values)) for text, (_, values) in zip(said, read, strict=True)]


def _read(tool: Tool, paths: bool, body: bool) -> tuple[list[str], list[str]]:
    """The first sentences of the arguments' descriptions, and their enum values."""
    schema = tool.input_schema
    definitions = schema.get("$defs") or {}
    left_out = {*(() if paths else ("path",)), *(() if body else ("body",))}
    in_path = {argument.name for argument in tool.arguments if argument.location in left_out}
    system = {argument.name for argument in tool.arguments if argument.wire_name.startswith("$")}  # $select, ...
    described: list[str] = []
    values: list[str] = []
    for name, value in (schema.get("properties") or {}).items():
        if not isinstance(value, dict) or name in system:
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
