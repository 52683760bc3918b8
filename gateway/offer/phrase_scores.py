"""BM25 of a match as the sum of its phrases' own BM25: each phrase's rows and scores computed by FTS5 once per index
and kept, so that a search adds up what it kept instead of having FTS5 score every matched row again.

FTS5's `bm25()` of a row is a sum over the phrases of the match, in the order the match names them (a phrase twice,
twice): it starts at 0 and adds, for each phrase, `idf * f * (k1 + 1) / (f + k1 * (1 - b + b * D / avgdl))`, where
`f` is the phrase's weighted count in the row (0 when the row lacks it: the phrase adds 0), `D` the row's length,
`idf` the phrase's over the whole index (SQLite's ext/fts5/fts5_aux.c, `fts5Bm25Function`). A phrase's term depends
on the phrase, the row and the index, not on the other phrases: `bm25()` of the phrase alone is its term, negated.
So a match made of quoted phrases joined by OR (what `gateway.offer.query` writes) matches the rows of any of its
phrases, and scores each by adding its phrases' terms in the same order from 0, the same double additions as FTS5's:
the same scores to the bit (bench/search_same.py compares every list of the development requests, and
tests/openapi/test_search_phrase_scores.py the scores of real matches with FTS5's own).

Why: a search over Graph's 11,422 tools matches hundreds to thousands of rows (a word such as "user" is in 3,085),
and FTS5 computed `bm25()` of every one (about a microsecond each) at every search; the phrases of requests repeat
("list", "user", "group"), so the index keeps each phrase's rows and terms (`KEPT_PHRASES`, least recently used out
first, at most `KEPT_ROWS` rows in all) and a search of phrases seen before costs a few NumPy additions. A phrase
seen for the first time costs one statement over its own rows. Any other match (a column filter, a prefix, AND, NOT)
is None here: the caller runs its statement as before. Without NumPy, likewise.
"""

from __future__ import annotations

import functools
import itertools
import re
import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

KEPT_PHRASES = 4096
"""Phrases whose rows and terms an index keeps."""
KEPT_ROWS = 1 << 18
"""Rows (a rowid and a score each: 16 bytes) kept over all of an index's phrases: 4 MiB at most (a process holds
two per api: its match's and its resources'). Graph's phrases of 2,000 development requests held 130,000."""
_NAMED_SQL = "SELECT rowid FROM tools WHERE tools MATCH ? ORDER BY rank LIMIT ?"
"""The rows whose resource is named (`Request.addressed`), the best by FTS5's rank (the statement this module's
`named_rowids` answers from kept scores)."""
_PHRASE = re.compile(r'"(?:[^"]|"")*"\*?')
_JOINS = re.compile(r"\bOR\b|[()\s]")
_COLUMN = re.compile(r"^(\w+) : \((.*)\)$", re.DOTALL)


@functools.cache
def _numpy() -> Any:
    try:
        import numpy
    except ImportError:  # pragma: no cover - exercised where NumPy is absent (the base install)
        return None
    return numpy


def phrases_of(match: str) -> list[str] | None:
    """The quoted phrases of `match` (a prefix's `*` included), in order, when it is nothing but such phrases joined
    by OR (with parentheses), or one column's (`resource : (...)`: each phrase then names the column); else None."""
    column = _COLUMN.match(match)
    inner = column.group(2) if column is not None else match
    if _JOINS.sub("", _PHRASE.sub(" ", inner)):
        return None
    found = _PHRASE.findall(inner)
    return [f"{column.group(1)} : {phrase}" for phrase in found] if column is not None else found


class PhraseScores:
    """Each phrase's matching rows and its term of BM25 in each, over one FTS5 table, kept (the caller holds the
    connection's lock around every call)."""

    def __init__(self, connection: sqlite3.Connection, bm25: str, table: str = "tools") -> None:
        """Parameters: connection: the index, in memory, never written again; bm25: the `bm25(TABLE, ...)` call with
        the weights every search ranks by; table: the FTS5 table matched (the tools', or what they answer:
        `gateway.offer.answer_text`)."""
        self._connection = connection
        self._statement = f"SELECT rowid, {bm25} FROM {table} WHERE {table} MATCH ?"
        self._size = (connection.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0] or 0) + 1
        self._kept: OrderedDict[str, tuple[Any, Any]] = OrderedDict()
        self._rows = 0

    def scored(self, match: str) -> tuple[Any, Any] | None:
        """The rows `match` matches (rowids, ascending, a NumPy array) and FTS5's `bm25()` of each (negative: lower is
        better), or None when the match is not quoted phrases joined by OR, NumPy is missing or FTS5 refuses a
        phrase (the caller's statement then answers)."""
        numpy = _numpy()
        phrases = phrases_of(match)
        if numpy is None or phrases is None or not phrases:
            return None
        total = numpy.zeros(self._size)
        matched = numpy.zeros(self._size, dtype=bool)
        for phrase in phrases:
            try:
                rows, terms = self._phrase(numpy, phrase)
            except sqlite3.Error:
                return None
            total[rows] += terms  # a phrase's rows are distinct: one addition per row, in the match's order
            matched[rows] = True
        rowids = numpy.flatnonzero(matched)
        return rowids, -total[rowids]

    def holds(self, match: str, rowids: Sequence[int]) -> bool | None:
        """Whether one of the rows `rowids` matches `match` (what `rowid IN (...) AND MATCH` answers), from the
        phrases' kept rows; None where `scored` would be None (the caller's statement then answers)."""
        numpy = _numpy()
        phrases = phrases_of(match)
        if numpy is None or phrases is None or not phrases:
            return None
        wanted = numpy.asarray(rowids, dtype=numpy.intp)[:, None]
        try:  # a few rowids against each phrase's rows: compared all at once (`isin` sorts them: ten times slower)
            return any(bool((self._phrase(numpy, phrase)[0] == wanted).any()) for phrase in phrases)
        except sqlite3.Error:
            return None

    def _phrase(self, numpy: Any, phrase: str) -> tuple[Any, Any]:
        kept = self._kept.get(phrase)
        if kept is not None:
            self._kept.move_to_end(phrase)
            return kept
        found = self._connection.execute(self._statement, (phrase,)).fetchall()
        rows = numpy.fromiter((rowid for rowid, _ in found), dtype=numpy.intp, count=len(found))
        terms = numpy.fromiter((-score for _, score in found), dtype=numpy.float64, count=len(found))
        self._kept[phrase] = (rows, terms)
        self._rows += len(found)
        while len(self._kept) > KEPT_PHRASES or (self._rows > KEPT_ROWS and len(self._kept) > 1):
            _, (dropped, _) = self._kept.popitem(last=False)
            self._rows -= len(dropped)
        return rows, terms


def added(scored: tuple[Any, Any], other: tuple[Any, Any] | None, weight: float) -> tuple[Any, Any]:
    """The rows of either of two tables' `PhraseScores.scored`, each scored as the first's plus `weight` times the
    other's (0 where a table lacks the row): what `bm25(tools, ...) + weight * bm25(other)` gives a row."""
    if other is None:
        return scored
    numpy = _numpy()
    size = int(max(scored[0][-1] if len(scored[0]) else 0, other[0][-1] if len(other[0]) else 0)) + 1
    first, second = numpy.zeros(size), numpy.zeros(size)
    first[scored[0]] = scored[1]
    second[other[0]] = other[1]
    rowids = numpy.union1d(scored[0], other[0])
    return rowids, first[rowids] + weight * second[rowids]


def first_places(numpy: Any, scores: Any, first: int) -> Any:
    """The places of the `first` lowest `scores`, lowest first, ties in place order: the beginning of
    `argsort(kind="stable")`, without sorting more than those (the places equal to the value at the cut that still
    count are the first of them)."""
    if first >= len(scores):
        return numpy.argsort(scores, kind="stable")
    cut = numpy.partition(scores, first)[first]
    below = numpy.flatnonzero(scores < cut)
    return numpy.concatenate((below[numpy.argsort(scores[below], kind="stable")],
                              numpy.flatnonzero(scores == cut)[:first - len(below)]))


Rows = list[tuple[int, float]]
"""Rows of the index: (rowid, BM25 score), as its statements give them."""


def best_rows(scored: tuple[Any, Any], wanted: int, passes: Callable[[int], bool] | None) -> Rows:
    """The best `wanted` of the rows `scored` (`PhraseScores.scored`) by score, ties by rowid (what `ORDER BY score
    LIMIT` answers), of those `passes` (a rowid's test; None: all)."""
    numpy = _numpy()
    rowids, scores = scored
    if passes is None:
        order = first_places(numpy, scores, wanted)
        return list(zip(rowids[order].tolist(), scores[order].tolist(), strict=True))
    order = numpy.argsort(scores, kind="stable")
    return list(itertools.islice(((rowid, score) for rowid, score in zip(rowids[order].tolist(),
                                                                         scores[order].tolist(), strict=True)
                                  if passes(rowid)), wanted))


def named_rowids(kept: PhraseScores | None, connection: sqlite3.Connection, addressed: str, limit: int) -> Any:
    """The rowids of `_NAMED_SQL`'s rows (the best `limit` by rank; all for -1), ascending: from the phrases' kept
    scores where they answer (the best by score, ties by rowid: the statement's rows, for every development request),
    else by the statement."""
    numpy = _numpy()
    scored = kept.scored(addressed) if kept is not None else None
    if scored is not None:
        rowids, scores = scored
        return numpy.sort(rowids[first_places(numpy, scores, limit if limit >= 0 else len(scores))])
    named = connection.execute(_NAMED_SQL, (addressed, limit)).fetchall()
    return numpy.sort(numpy.fromiter((rowid for rowid, in named), dtype=numpy.intp, count=len(named)))


def rows_among(scored: tuple[Any, Any], named: Any, passes: Callable[[int], bool] | None, limit: int) -> Rows:
    """The rows of `scored` among the rowids `named` (ascending): by score (ties by rowid) when `passes` is None,
    else by rowid and only those `passes`, at most `limit` (as the addressed rows' statement gives them)."""
    numpy = _numpy()
    rowids, scores = scored
    among = numpy.minimum(numpy.searchsorted(rowids, named), max(len(rowids) - 1, 0))
    among = among[rowids[among] == named] if len(rowids) else among[:0]  # the named rows matched, by rowid
    if passes is None:
        among = among[numpy.argsort(scores[among], kind="stable")]
        return list(zip(rowids[among].tolist(), scores[among].tolist(), strict=True))
    return [(rowid, score) for rowid, score in zip(rowids[among].tolist(), scores[among].tolist(), strict=True)
            if passes(rowid)][:limit]


def scores_of(scored: tuple[Any, Any], rowids: Sequence[int]) -> dict[int, float]:
    """The scores of those of `rowids` (ascending) that `scored` (`PhraseScores.scored`) matched, by rowid: what the
    match's statement answers for `rowid IN (...)`, from the kept scores."""
    return dict(rows_among(scored, _numpy().asarray(rowids, dtype=_numpy().intp), None, len(rowids)))
