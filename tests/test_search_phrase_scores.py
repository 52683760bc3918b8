"""BM25 by phrase (`gateway.offer.phrase_scores`): each phrase's rows and scores kept, a match scored by adding them.

The index is the real one over Slack's spec from ../shared/corpus (174 tools); FTS5's own `bm25()` of the whole
match is what every score is compared with, to the bit.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from gateway.catalog import Catalog
from gateway.offer import phrase_scores, statements
from gateway.offer.index import index_of
from gateway.offer.phrase_scores import PhraseScores, first_places, phrases_of
from gateway.offer.query import read

numpy = pytest.importorskip("numpy")
REQUESTS = ("post a message to the general channel", "invite bob to the channel", "list my reminders",
            "delete the file I uploaded", "who is in this user group", "set my status to away", "pin it's message",
            "archive the channel", "search messages about the launch", "add a star to the message")


class _Counted:
    """The index's connection, its statements counted."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        self.statements: list[Any] = []

    def execute(self, *args: Any) -> Any:
        self.statements.append(args)
        return self.connection.execute(*args)


def _connection(catalog: Catalog) -> sqlite3.Connection:
    api = next(iter(catalog.apis))
    index_of(catalog).search("warm up", apis=[api])
    return index_of(catalog).opened(api).connection


def test_a_match_scores_as_fts5_scores_it_to_the_bit(slack: Catalog) -> None:
    connection = _connection(slack)
    scores = PhraseScores(connection, statements.BM25)
    for request in REQUESTS:
        match = read(request).expression
        expected = connection.execute(f"SELECT rowid, {statements.BM25} FROM tools WHERE tools MATCH ? "
                                      "ORDER BY rowid", (match,)).fetchall()
        scored = scores.scored(match)
        assert scored is not None and len(expected) > 1, request
        rowids, values = scored
        assert list(zip(rowids.tolist(), values.tolist(), strict=True)) == expected, request  # == on floats
    ranks = PhraseScores(connection, statements.RANK)  # the resources named, by FTS5's rank: a column, prefixes
    found = 0
    for request in REQUESTS:
        named = read(request).addressed
        expected = connection.execute("SELECT rowid, rank FROM tools WHERE tools MATCH ? ORDER BY rowid",
                                      (named,)).fetchall()
        scored = ranks.scored(named)
        assert scored is not None, request
        assert list(zip(*(array.tolist() for array in scored), strict=True)) == expected, request
        found += len(expected)
    assert found > 10


def test_each_phrase_is_scored_by_fts5_once_and_the_kept_ones_are_bounded(slack: Catalog,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    counted = _Counted(_connection(slack))
    scores = PhraseScores(counted, statements.BM25)  # type: ignore[arg-type]
    counted.statements.clear()
    assert scores.scored('("channel" OR "conversation") OR ("archive")') is not None
    assert [args[1] for args in counted.statements] == [('"channel"',), ('"conversation"',), ('"archive"',)]
    assert scores.scored('("archive") OR ("channel")') is not None
    assert len(counted.statements) == 3  # both phrases kept
    monkeypatch.setattr(phrase_scores, "KEPT_PHRASES", 2)
    assert scores.scored('("message")') is not None  # three kept would pass two: the least recently used goes
    assert scores.scored('("conversation")') is not None
    assert [args[1] for args in counted.statements[3:]] == [('"message"',), ('"conversation"',)]


def test_only_phrases_joined_by_or_are_scored_here() -> None:
    assert phrases_of('("close" OR "state") OR ("issue")') == ['"close"', '"state"', '"issue"']
    assert phrases_of('"say ""hi"""') == ['"say ""hi"""']
    assert phrases_of('resource : ("issue" OR "close"*)') == ['resource : "issue"', 'resource : "close"*']
    for match in ('"a" AND "b"', '"a" NOT "b"', "close", 'NEAR("a" "b")', 'resource : ("a") AND "b"',
                  '"a" OR resource : ("b")', '"a" OR "b" *'):
        assert phrases_of(match) is None, match


def test_the_search_ranks_as_the_statements_did(slack: Catalog) -> None:
    """`ToolIndex.search` from the phrases' scores, and with them taken away (its statements), for every caller and
    for one allowed only some tools: the same tools, the same scores, in the same order."""
    index = index_of(slack)
    api = next(iter(slack.apis))
    refused = {tool.name for tool in slack.for_api(api)[::3]}
    opened = index.opened(api)
    for request in REQUESTS:
        for allowed in (None, lambda tool: tool.name not in refused):
            found = [(hit.tool.name, hit.score) for hit in index.search(request, limit=50, allowed=allowed)]
            kept, opened.phrases = opened.phrases, None
            try:
                stated = [(hit.tool.name, hit.score) for hit in index.search(request, limit=50, allowed=allowed)]
            finally:
                opened.phrases = kept
            assert found == stated and found, request


def test_the_first_places_are_a_stable_sorts_first() -> None:
    scores = numpy.array([3.0, -1.0, 2.0, -1.0, 0.5, -1.0, 2.0, 7.0])
    for first in range(1, 10):
        assert first_places(numpy, scores, first).tolist() == numpy.argsort(scores, kind="stable")[:first].tolist()
