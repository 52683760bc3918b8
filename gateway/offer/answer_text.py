"""What an operation answers, for the search index: the property names of its 2xx JSON response (`Tool.output_schema`),
nested to `DEPTH` ("how many containers are paused": Docker's SystemInfo answers `ContainersPaused`, and no other
word of the operation says so; "why is the node down: its Status.Message": NodeInspect's `Status` holds `Message`).

Read from a read's (GET's) output schema: each property's name, through a local `$ref` (`#/$defs/...`), an array's
`items`, a map's `additionalProperties` and the alternatives of `allOf`/`anyOf`/`oneOf`, none of which is a level of
its own (a list of users answers the users' fields at the depth of the list's own); each name once. The index reads
the text in a table of its own, one row an operation, its BM25 times `WEIGHT` added to the operation's
(`gateway.offer.index`), so that a long response weighs the other columns' matches no less; a request is matched
against it when it asks for a read or names no method (`read_for`). What was measured, and what was not kept (a
column of the tool's row, the properties' descriptions read too, a write's answer read, every request matched: the
switches that chose them are gone from here, their code at commit 7b441a7), is in bench/README.md ("What an
operation answers, read by the search").
"""

from __future__ import annotations

import functools
from typing import Any

from ..catalog import Tool
from .query import words

WEIGHT = 0.35
"""The answer's BM25 weight against the row's (the summary's column weighs 4, the name's 6)."""
DEPTH = 2
"""The levels of properties read: 1, the response's own; 2, also theirs (`Status.Message`)."""
_LEVELS_THROUGH = ("allOf", "anyOf", "oneOf")


def read_for(asked: frozenset[str]) -> bool:
    """Whether a request asking for `asked` (the methods it means; none: it names none) is matched against what the
    operations answer: one that asks for a read or names no method ("how many containers are paused", "the MAC
    address of each container on network backend"), not one that asks for a write ("give SUP-881 to Ingrid": a write
    is named by its operation's words, and the reads' answers, matched, would rank reads above it)."""
    return "GET" in asked or not asked


def answer_text(tool: Tool) -> str:
    """The names of the properties `tool` answers, to `DEPTH` levels, each name once, as the index's words
    (`query.words`: `ContainersPaused` -> "containers paused"); "" for a write (its answer, the created or changed
    thing whole, would make every write of a resource match each of its fields) or an operation without a JSON
    response schema."""
    schema = tool.output_schema
    if not isinstance(schema, dict) or tool.method != "GET":
        return ""
    found: dict[str, None] = {}
    _read(schema, schema.get("$defs") or {}, 1, found, set())
    return " ".join(map(_words, found))


@functools.lru_cache(maxsize=1 << 14)
def _words(name: str) -> str:
    """A property name's words, kept: an api's names repeat across its operations (Graph's entities' fields under
    every copy of a path), and splitting them was most of reading the answers."""
    return words(name)


def _read(schema: dict[str, Any], definitions: dict[str, Any], level: int, found: dict[str, None],
          expanding: set[str]) -> None:
    reference = schema.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/$defs/"):
        name = reference.removeprefix("#/$defs/")
        target = definitions.get(name)
        if isinstance(target, dict) and name not in expanding:  # a recursive schema is read once on its path
            _read(target, definitions, level, found, expanding | {name})
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, value in properties.items():
            if not isinstance(value, dict):
                continue
            found.setdefault(name)
            if level < DEPTH:
                _read(value, definitions, level + 1, found, expanding)
    for keyword in ("items", "additionalProperties"):
        inner = schema.get(keyword)
        if isinstance(inner, dict):
            _read(inner, definitions, level, found, expanding)
    for keyword in _LEVELS_THROUGH:
        for option in schema.get(keyword) or ():
            if isinstance(option, dict):
                _read(option, definitions, level, found, expanding)
