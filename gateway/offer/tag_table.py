"""What a spec's tags say, read once: one row a tag in a table of its own, whose BM25 lifts the tag's tools.

An OpenAPI document's `tags[]` may describe each tag, and the description often defines the API's word in the user's
words (Asana's Sections: "a header above a list of tasks in a list view or a column in a board view"), words no
operation of the tag writes itself. Read as a column of every tool of the tag (branch tags39), the description made
each of those rows longer and the same text common in the index: FTS5's BM25 normalises by the whole row, so every
other match of those tools weighed less, and BM25 alone lost more than the fusion gained (bench/README.md, "What a
spec's tags say"). Here the index keeps each described tag's text once, in the `tags` table (`build_tags`); a search
matches there the request's phrases that hardly any tool's own row holds (`RARE`: a description's worth is the word
no operation says), and a matched tag's BM25, times `WEIGHT`, is added to the BM25 of at most `LIFTED` of its tools
(the ones the request's own words match best), which join the candidates if they were not among them (`TagTable`).
No tool's row changes, so a request no tag's text matches is ranked as before.

`WEIGHT`, `LIFTED` and `RARE` are the change's switch and weights, here in one place:
`WEIGHT = 0` turns the reading off. They were chosen on the development requests (bench/README.md, "Each tag's
description once, in a table of its own", branch tagtable).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from ..catalog import Tool
from .phrase_scores import phrases_of
from .query import words
from .tag_text import read_description

WEIGHT = 0.75
"""What a matched tag's BM25 weighs beside its tools' own (columns of 0.5 to 6: `index_build.COLUMN_WEIGHTS`)."""
RARE = 0.01
"""The share of the api's tools at most whose own rows a phrase of the request matches, for the tags' match to read
it (1: every phrase): Asana's "column" (one tool's row of 167 says it), not its "goal" (16)."""
LIFTED = 10
"""How many of a tag's tools its match lifts: a tag holds up to hundreds of tools, and the request that names its
concept wants one of them, which its own words should find among the tag's; lifting every tool of the tag put them
all above the other tags' tools (HERE's rules over its users for "which trackers do I have access to")."""

_SCHEMA = ("CREATE VIRTUAL TABLE tags USING fts5(description, tokenize = 'porter unicode61')",
           "CREATE TABLE tag_tools (tag INTEGER, tool INTEGER)")
_TAGS_SQL = "SELECT rowid, bm25(tags) FROM tags WHERE tags MATCH ?"
_MEMBERS_SQL = "SELECT tag, tool FROM tag_tools ORDER BY tag, tool"
_COUNT_SQL = "SELECT count(*) FROM tools WHERE tools MATCH ?"
_KEPT = 4096
"""Phrases whose count of rows a table keeps (all dropped when full: a count is one statement again)."""


def build_tags(connection: sqlite3.Connection, tools: Sequence[Tool], descriptions: Mapping[str, str]) -> None:
    """The `tags` table (a row for each described tag that some tool has: what the index reads of its description)
    and `tag_tools` (which tools, by the tools' rowids, each tag holds); neither when no tool has a described tag."""
    held: dict[str, list[int]] = {}
    for rowid, tool in enumerate(tools, 1):
        for tag in dict.fromkeys(tool.tags):
            if tag in descriptions:
                held.setdefault(tag, []).append(rowid)
    if not held:  # no table: an api that describes no tag (Graph, Stripe) keeps its index's bytes
        return
    for statement in _SCHEMA:
        connection.execute(statement)
    texts = {tag: words(read_description(descriptions[tag])) for tag in held}
    rows = [(rowid, tag) for rowid, tag in enumerate((tag for tag in held if texts[tag]), 1)]
    connection.executemany("INSERT INTO tags(rowid, description) VALUES (?, ?)",
                           ((rowid, texts[tag]) for rowid, tag in rows))
    connection.executemany("INSERT INTO tag_tools VALUES (?, ?)",
                           ((rowid, tool) for rowid, tag in rows for tool in held[tag]))
    if rows:
        connection.execute("INSERT INTO tags(tags) VALUES ('optimize')")


class OwnScores(Protocol):
    def __call__(self, rowids: Sequence[int]) -> dict[int, float]:
        """The BM25 of those of `rowids` the request's match matches (negative: lower is better)."""


class TagTable:
    """An opened index's `tags` and `tag_tools` tables (the caller holds the connection's lock around every call)."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection
        self.members = _members(connection)
        """Each described tag's tools (rowids, ascending), by the tag's rowid; empty for an index without the table
        (its spec describes no tag)."""
        # the api's tools (its `facts`, one row a tool: `tools` has rows of no tool in a small api's index)
        self._tools = connection.execute("SELECT count(*) FROM facts").fetchone()[0] if self.members else 0
        self._rows: dict[str, int] = {}

    def matched(self, expression: str) -> list[tuple[int, float]]:
        """The tags the request's `_rare` phrases match (rowids) and their BM25 (negative: lower is better); none
        when the reading is off (`WEIGHT` or `LIFTED` 0) or the api describes no tag."""
        if not self.members or WEIGHT <= 0 or LIFTED <= 0:
            return []
        rare = self._rare(expression)
        if not rare:
            return []
        try:
            return self._connection.execute(_TAGS_SQL, (rare,)).fetchall()
        except sqlite3.Error:  # a match the tags' table cannot answer: no lift, the ranking as without the table
            return []

    def lifted(self, tags: list[tuple[int, float]], scores: Mapping[int, float], own: OwnScores,
               passes: Callable[[int], bool] | None) -> dict[int, float]:
        """The tools the `matched` tags lift, by rowid, each with its BM25: its own plus the best of its tags' lifts
        (`WEIGHT` times the tag's BM25). A matched tag lifts the `LIFTED` of its tools (of those `passes`) that the
        request's own match scores best, ties and the tools it does not match (their BM25 0) in rowid order. `scores`
        are the candidates' BM25 by rowid; `own` gives the other tools'."""
        chosen = {tag: [tool for tool in self.members.get(tag, ()) if passes is None or passes(tool)]
                  for tag, _ in tags}
        found = {**own(sorted({tool for tools in chosen.values() for tool in tools if tool not in scores})), **scores}
        lifts: dict[int, float] = {}
        for tag, score in tags:
            for tool in sorted(chosen[tag], key=lambda tool: (found.get(tool, 0.0), tool))[:LIFTED]:
                lifts[tool] = min(lifts.get(tool, 0.0), WEIGHT * score)
        return {tool: found.get(tool, 0.0) + lift for tool, lift in lifts.items()}

    def _rare(self, expression: str) -> str:
        """The request's phrases that at most `RARE` of the api's tools' own rows match, ORed: the words a tag's
        description may be alone to say. The others' matches are the tools' own, which rank them already; lifting
        a tag for them put its tools over the ones the request wanted ("update the goal's progress": Goals')."""
        phrases = phrases_of(expression)
        if phrases is None:
            return expression if RARE >= 1 else ""
        most = RARE * self._tools
        return " OR ".join(phrase for phrase in dict.fromkeys(phrases) if RARE >= 1 or self._count(phrase) <= most)

    def _count(self, phrase: str) -> int:
        count = self._rows.get(phrase)
        if count is None:
            if len(self._rows) >= _KEPT:
                self._rows.clear()
            try:
                count = self._connection.execute(_COUNT_SQL, (phrase,)).fetchone()[0]
            except sqlite3.Error:
                count = self._tools
            self._rows[phrase] = count
        return count


def _members(connection: sqlite3.Connection) -> dict[int, tuple[int, ...]]:
    try:
        found = connection.execute(_MEMBERS_SQL).fetchall()
    except sqlite3.OperationalError:  # no such table
        return {}
    held: dict[int, list[int]] = {}
    for tag, tool in found:
        held.setdefault(tag, []).append(tool)
    return {tag: tuple(tools) for tag, tools in held.items()}
