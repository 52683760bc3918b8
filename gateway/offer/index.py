"""Tool search: an embedded full-text index of a spec's operations (SQLite FTS5, BM25), no model, no network.

`build_index(tools)` is run when a spec is compiled; the index travels as bytes (`sqlite3` serialization) in
the spec's `ApiSpec.search_index`, so it is cached with the catalog. `ToolIndex(catalog).search(query)` opens
each api's index once (in memory) and answers the best tools first.

What is indexed, one column each (weights in `_WEIGHTS`): the name split on case, `_`, `/`, `.` and `-`; the
summary; the description's first paragraph (markup out); the tags; the path's segments (parameters included, braces
out); the argument names; the path's resource (its last segment that is not a parameter: `contributors`,
`forward`). Words are stemmed (FTS5's porter tokenizer). How a query becomes a match: `gateway.offer.query`.

SQLite ranks the matches by BM25 alone; the best `_CANDIDATES`, and the best `_METHOD_CANDIDATES` of the method
the query asks for among the next ("delete this email" matches hundreds of mail operations), are then scored:
times `_INTENT_BOOST` for the asked method, divided by `1 + 0.1 * path depth`, halved when deprecated, times
`_PLURAL` for a GET of all items when the query names its thing in the plural ("show my to-do lists"), times
`1 + the share of the name's words the query holds` (`issues/create` for "create an issue", not
`orgs/create-issue-type`) and `1 + 2 * the share of the summary's`. Graph answers one operation under many
nested paths: of the candidates with one method, summary and resource, the shortest path takes their best score
and the others fall behind. The facts these signals read are computed once per api, when its index is opened.
The constants were chosen on the task sets in tests/openapi/search_tasks (`tasks` and `holdout`; `fresh` was
written before the last round of changes and never used to choose them).
"""

from __future__ import annotations

import collections
import html
import itertools
import re
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..catalog import Catalog, Tool
from .query import STOP, read, stems, words

_WEIGHTS = {"name": 6.0, "summary": 4.0, "description": 1.0, "tags": 2.0, "path": 2.0, "params": 0.5,
            "resource": 3.0}
_COLUMNS = tuple(_WEIGHTS)
_DEPTH_PENALTY = 0.1
_PARAMETER_DEPTH = 1.0
_TAGS = re.compile(r"<[^>]+>")


def _first_paragraph(text: str) -> str:
    plain = html.unescape(_TAGS.sub(" ", text or ""))
    return plain.strip().split("\n\n", 1)[0][:400]


_PATH_SUFFIXES = frozenset({"$ref", "$value", "$count"})
"""Graph's path endings that say how a resource is answered (a reference, raw content, a count), not which."""


def resources(path: str) -> list[str]:
    """The path's non-parameter segments, last first, Graph's endings (`$ref`, ...) and namespaces
    (`microsoft.graph.`) and function arguments out: `/me/messages/{id}/microsoft.graph.forward` ->
    `[forward, messages, me]`."""
    found = []
    for segment in reversed(path.split("/")):
        if not segment or segment.startswith("{") or segment in _PATH_SUFFIXES:
            continue
        found.append(segment.split("(", 1)[0].rsplit(".", 1)[-1])
    return found


def _row(tool: Tool) -> tuple[str, ...]:
    return (
        words(tool.operation_id or tool.name),
        words(tool.summary),
        words(_first_paragraph(tool.description)),
        words(" ".join(tool.tags)),
        words(tool.path),
        words(" ".join(argument.name for argument in tool.arguments)),
        words(next(iter(resources(tool.path)), "")),
    )


def _facts_rows(tools: list[Tool]) -> tuple[dict[str, int], list[tuple[object, ...]]]:
    """What the ranking signals read of each tool, computed when its index is built: its method, path depth,
    prior (`_DEPRECATED` when deprecated), the stems of its name and of its summary as bit masks over the api's
    vocabulary (the most frequent stems take the lowest bits, so that most masks stay small), and its kind."""
    stemmed = [(_content_stems(tool.operation_id or tool.name), _content_stems(tool.summary)) for tool in tools]
    counts = collections.Counter(stem for named, summarized in stemmed for stem in named | summarized)
    vocabulary = {stem: bit for bit, (stem, _) in enumerate(counts.most_common())}
    kinds: dict[tuple[str, ...], int] = {}
    rows: list[tuple[object, ...]] = []
    for index, (tool, (named, summarized)) in enumerate(zip(tools, stemmed, strict=True), 1):
        segments = [segment for segment in tool.path.split("/") if segment]
        parameters = sum(segment.startswith("{") for segment in segments)
        depth = 1 + _DEPTH_PENALTY * (len(segments) - parameters + _PARAMETER_DEPTH * parameters)
        addressed = [segment for segment in segments if segment not in _PATH_SUFFIXES][-1:] or [""]
        acted = 2 if "." in addressed[0] else 1  # an action (microsoft.graph.forward) with what it acts on
        kind = (tool.method, "item" if addressed[0].startswith("{") else "all", *resources(tool.path)[:acted],
                tool.summary.lower() or tool.name)
        rows.append((index, tool.method, depth, _DEPRECATED if tool.deprecated else 1.0, addressed[0].startswith("{"),
                     _bytes(sum(1 << vocabulary[stem] for stem in named)), len(named),
                     _bytes(sum(1 << vocabulary[stem] for stem in summarized)), len(summarized),
                     kinds.setdefault(kind, len(kinds))))
    return vocabulary, rows


def _bytes(mask: int) -> bytes:
    return mask.to_bytes((mask.bit_length() + 7) // 8, "little")


def _connect() -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    connection.execute(f"CREATE VIRTUAL TABLE tools USING fts5({', '.join(_COLUMNS)}, tokenize = 'porter unicode61')")
    connection.execute("CREATE TABLE facts (rowid INTEGER PRIMARY KEY, method TEXT, depth REAL, prior REAL, "
                       "item INTEGER, named BLOB, name_size INTEGER, summarized BLOB, summary_size INTEGER, "
                       "kind INTEGER)")
    connection.execute("CREATE TABLE vocabulary (stem TEXT PRIMARY KEY, bit INTEGER)")
    return connection


def build_index(tools: Iterable[Tool]) -> bytes:
    """The index of `tools` as bytes; row i (1-based rowid) is the i-th tool in the order given."""
    connection = _connect()
    listed = list(tools)
    vocabulary, facts = _facts_rows(listed)
    with connection:
        connection.executemany(f"INSERT INTO tools(rowid, {', '.join(_COLUMNS)}) VALUES "
                               f"(?, {', '.join('?' for _ in _COLUMNS)})",
                               ((index, *_row(tool)) for index, tool in enumerate(listed, 1)))
        connection.execute("INSERT INTO tools(tools) VALUES ('optimize')")
        connection.executemany("INSERT INTO facts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", facts)
        connection.executemany("INSERT INTO vocabulary VALUES (?, ?)", vocabulary.items())
    data = connection.serialize()
    connection.close()
    return data


_INTENT_BOOST = 1.6
_NAME_COVERAGE = 1.0
_SUMMARY_COVERAGE = 2.0
_PLURAL = 1.3
_DEPRECATED = 0.5
_DUPLICATE = 0.7


def _content_stems(text: str) -> frozenset[str]:
    return frozenset(stems(" ".join(word for word in words(text).split() if word not in STOP)))


@dataclass(slots=True, frozen=True)
class SearchHit:
    tool: Tool
    score: float
    """Higher is better (BM25 with field weights, times the method, depth and name signals)."""


@dataclass(slots=True, frozen=True, eq=False)
class _Facts:
    """What the signals read of one tool (its row of the index's `facts` table), read once per api when its index
    is opened. Word sets are bit masks over the api's vocabulary (`_Opened.vocabulary`): a query's words are
    compared with a hundred candidates' names and summaries in each search."""

    tool: Tool
    method: str
    depth: float
    """`1 + _DEPTH_PENALTY * (segments + _PARAMETER_DEPTH * parameters)`: the divisor of a long path."""
    weight: float
    """`_DEPRECATED` (for a deprecated operation, else 1) over the depth."""
    item: bool
    """Whether the path ends with a parameter: one item, not all of them."""
    named: int
    """The stems of the name's words, stop words out."""
    name_size: int
    summarized: int
    """The stems of the summary's words, stop words out."""
    summary_size: int
    kind: int
    """The method, whether the path ends with a parameter (one item or all), the last resource (an action with
    the one before it) and the summary, numbered: Graph answers one operation under many nested paths, with one
    summary (`/me/messages/{id}/forward`, `/me/mailFolders/{id}/messages/{id}/forward`, `/users/{id}/messages/...`:
    "Invoke action forward")."""


@dataclass(slots=True)
class _Opened:
    connection: sqlite3.Connection
    facts: list[_Facts]
    """Row i (rowid i + 1) of the index."""
    vocabulary: dict[str, int]
    """Each stem of the api's names and summaries, and its bit."""
    updates: bool
    """Whether the api has PATCH or PUT operations (Stripe's has none: it updates with POST)."""

    def mask(self, stems: Iterable[str]) -> int:
        return sum(1 << bit for bit in {self.vocabulary[stem] for stem in stems if stem in self.vocabulary})


def _open(connection: sqlite3.Connection, tools: list[Tool]) -> _Opened:
    """An api's opened index and the facts of its tools (its `facts` and `vocabulary` tables)."""
    rows = connection.execute("SELECT method, depth, prior, item, named, name_size, summarized, summary_size, kind "
                              "FROM facts ORDER BY rowid").fetchall()
    facts = [_Facts(tool, method, depth, prior / depth, bool(item), int.from_bytes(named, "little"), name_size,
                    int.from_bytes(summarized, "little"), summary_size, kind)
             for tool, (method, depth, prior, item, named, name_size, summarized, summary_size, kind)
             in zip(tools, rows, strict=True)]
    vocabulary = dict(connection.execute("SELECT stem, bit FROM vocabulary").fetchall())
    return _Opened(connection, facts, vocabulary, any(tool.method in _UPDATES for tool in tools))


_UPDATES = frozenset({"PATCH", "PUT"})


class ToolIndex:
    """Search over a catalog's tools; each api's index is opened (deserialized) on first use."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.apis = list(dict.fromkeys([*catalog.apis, *(tool.api for tool in catalog)]))
        self._open: dict[str, _Opened] = {}
        self._lock = threading.Lock()

    def _api(self, api: str) -> _Opened:
        opened = self._open.get(api)
        if opened is not None:
            return opened
        with self._lock:
            if api in self._open:
                return self._open[api]
            tools = self.catalog.for_api(api)
            spec = self.catalog.apis.get(api)
            data = spec.search_index if spec is not None and spec.search_index else build_index(tools)
            connection = sqlite3.connect(":memory:", check_same_thread=False)
            connection.deserialize(data)
            self._open[api] = _open(connection, tools)
            return self._open[api]

    def search(self, query: str, *, limit: int = 10, apis: Iterable[str] | None = None,
               allowed: Callable[[Tool], bool] | None = None) -> list[SearchHit]:
        """The best `limit` tools for `query` (of `apis`, default all; only those `allowed` passes).

        SQLite ranks the matches by BM25 alone (reading any other column of every match would cost more than the
        ranking); the best `max(limit, _CANDIDATES)` (that `allowed` passes), and the best of the asked method
        after them, are then scored with the signals here."""
        request = read(query)
        if not request.terms or limit < 1:
            return []
        methods = request.methods
        scored: list[tuple[_Facts, float]] = []
        for api in list(apis) if apis is not None else self.apis:
            opened = self._api(api)
            asked = methods | {"POST"} if methods & _UPDATES and not opened.updates else methods
            candidates = self._candidates(opened, request.expression, allowed, asked, max(limit, _CANDIDATES))
            scored.extend(_collapse(_signals(candidates, asked, opened.mask(request.stems), request.plural)))
        scored.sort(key=lambda pair: -pair[1])
        return [SearchHit(facts.tool, round(score, 4)) for facts, score in scored[:limit]]

    def _candidates(self, opened: _Opened, expression: str, allowed: Callable[[Tool], bool] | None,
                    asked: frozenset[str], first: int) -> list[tuple[_Facts, float]]:
        """The best `first` matches by BM25 alone, then the best `_METHOD_CANDIDATES` of the asked methods
        among the next (lest the others crowd them out: "delete this email" matches hundreds of mail operations);
        of those `allowed` passes (then every match is ranked)."""
        facts = opened.facts
        wanted = first + _POOL - _CANDIDATES if asked else first
        with self._lock:
            cursor = opened.connection.execute(_SQL, (expression, wanted if allowed is None else -1))
            if allowed is None:
                rows = cursor.fetchall()
            else:
                rows = list(itertools.islice((row for row in cursor if allowed(facts[row[0] - 1].tool)), wanted))
        chosen = [(facts[rowid - 1], score) for rowid, score in rows[:first]]
        following = ((facts[rowid - 1], score) for rowid, score in rows[first:]
                     if facts[rowid - 1].method in asked)
        return chosen + list(itertools.islice(following, _METHOD_CANDIDATES))


_CANDIDATES = 50
_METHOD_CANDIDATES = 50
_POOL = 400
_SQL = (f"SELECT rowid, bm25(tools, {', '.join(str(w) for w in _WEIGHTS.values())}) AS score FROM tools "
        "WHERE tools MATCH ? ORDER BY score LIMIT ?")


def _collapse(scored: list[tuple[_Facts, float]]) -> list[tuple[_Facts, float]]:
    """Of the candidates of one kind (one operation under several paths), the one with the shortest path (and not
    deprecated) takes the best score of them all; the others fall behind it, times `_DUPLICATE`."""
    best: dict[int, tuple[_Facts, float]] = {}
    for facts, score in scored:
        held = best.get(facts.kind)
        if held is None:
            best[facts.kind] = (facts, score)
        else:
            preferred = facts if (facts.weight, score) > (held[0].weight, held[1]) else held[0]
            best[facts.kind] = (preferred, max(score, held[1]))
    return [(facts, best[facts.kind][1] if best[facts.kind][0] is facts else score * _DUPLICATE)
            for facts, score in scored]


def _signals(candidates: list[tuple[_Facts, float]], methods: frozenset[str], terms: int,
             plural: bool) -> list[tuple[_Facts, float]]:
    """Each candidate's BM25 times its signals: the method the query asks for, a short path, not deprecated, a
    name and a summary made of the query's words (`terms`, a mask: `issues/create` for "create an issue", over
    `orgs/create-issue-type`)."""
    scored = []
    for facts, score in candidates:
        factor = -score * facts.weight * (_INTENT_BOOST if facts.method in methods else 1.0)
        if plural and facts.method == "GET" and not facts.item:
            factor *= _PLURAL
        if facts.name_size:
            factor *= 1 + _NAME_COVERAGE * (facts.named & terms).bit_count() / facts.name_size
        if facts.summary_size:
            factor *= 1 + _SUMMARY_COVERAGE * (facts.summarized & terms).bit_count() / facts.summary_size
        scored.append((facts, factor))
    return scored


_INDEXES: weakref.WeakKeyDictionary[Catalog, ToolIndex] = weakref.WeakKeyDictionary()


def index_of(catalog: Catalog) -> ToolIndex:
    """The one `ToolIndex` of a catalog."""
    index = _INDEXES.get(catalog)
    if index is None:
        index = _INDEXES.setdefault(catalog, ToolIndex(catalog))
    return index
