"""The SQL statements tool search runs over an opened index (`gateway.offer.index`), in two sets: `PLAIN`, each row
scored by its BM25 over the tools' columns (`index_build.COLUMN_WEIGHTS`), and `ANSWERED`, each row scored as that
plus `answer_text.WEIGHT` times the BM25 of what it answers (`gateway.offer.answer_text`), for a read request over an
index with the answers' table. Both sets bind their parameters alike, so the search picks a set once per request
(`of`) and runs the same code with either.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import answer_text
from .index_build import COLUMN_WEIGHTS

BM25 = f"bm25(tools, {', '.join(str(w) for w in COLUMN_WEIGHTS.values())})"
RANK = "bm25(tools)"
"""FTS5's rank, which `ORDER BY rank` sorts by (no rank is configured in the index)."""
ANSWERS_BM25 = "bm25(answers)"

_MATCHED = f"SELECT rowid, {BM25} AS score FROM tools WHERE tools MATCH ?"


@dataclass(frozen=True, slots=True)
class Statements:
    """One set of the search's statements."""

    first: str
    """The best matches (binds: the match, how many; -1 for all, best first)."""
    both: str
    """`first`'s rows (flagged 1) then `addressed`'s (0, best first) from one pass over the matches: their BM25 is
    computed once, kept in a table of the statement's own (`MATERIALIZED`); the first rows by a sort that keeps only
    as many as asked for, not a sort of every match (binds: the resource's match, how many of it, the match, how
    many)."""
    among: str
    """The matches among given rowids (binds: the match; then `(?, ...)` of the rowids, appended)."""
    addressed: str
    """The matches among the best matches of the request's resource (binds: the match, the resource's match, how
    many)."""


PLAIN = Statements(
    first=f"{_MATCHED} ORDER BY score LIMIT ?",
    both=("WITH named AS (SELECT rowid FROM tools WHERE tools MATCH ? ORDER BY rank LIMIT ?), "
          f"matched AS MATERIALIZED ({_MATCHED}) "
          "SELECT * FROM (SELECT rowid, score, 1 FROM matched ORDER BY score LIMIT ?) "
          "UNION ALL SELECT * FROM (SELECT rowid, score, 0 FROM matched WHERE rowid IN named ORDER BY score)"),
    among=f"{_MATCHED} AND rowid IN",
    addressed=f"{_MATCHED} AND rowid IN (SELECT rowid FROM tools WHERE tools MATCH ? ORDER BY rank LIMIT ?)")


def _answered(match: int) -> str:
    """The rows of the match bound at `?{match}`, each scored as its BM25 plus `answer_text.WEIGHT` times that of what
    it answers (0 where one table lacks the row): what `phrase_scores.added` gives."""
    return (f"SELECT rowid, sum(score) AS score FROM (SELECT rowid, {BM25} AS score FROM tools WHERE tools MATCH "
            f"?{match} UNION ALL SELECT rowid, {answer_text.WEIGHT!r} * {ANSWERS_BM25} AS score FROM answers WHERE "
            f"answers MATCH ?{match}) GROUP BY rowid")


ANSWERED = Statements(
    first=f"SELECT rowid, score FROM ({_answered(1)}) ORDER BY score LIMIT ?2",
    both=PLAIN.both.replace(_MATCHED, _answered(3)),
    among=f"SELECT rowid, score FROM ({_answered(1)}) WHERE rowid IN",
    addressed=(f"SELECT rowid, score FROM ({_answered(1)}) WHERE rowid IN "
               "(SELECT rowid FROM tools WHERE tools MATCH ?2 ORDER BY rank LIMIT ?3)"))


def of(answered: bool) -> Statements:
    """The set a request's search runs: `ANSWERED` when what the operations answer is added, else `PLAIN`."""
    return ANSWERED if answered else PLAIN
