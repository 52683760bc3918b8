"""Tool search: an embedded full-text index of a spec's operations (SQLite FTS5, BM25), no model, no network.

`build_index(tools)` is run when a spec is compiled; the index travels as bytes (`sqlite3` serialization) in
the spec's `ApiSpec.search_index`, so it is cached with the catalog. `ToolIndex(catalog).search(query)` opens
each api's index once (in memory) and answers the best tools first.

What is indexed, one column each (weights in `COLUMN_WEIGHTS`): the name split on case, `_`, `/`, `.` and `-`; the
summary (or the description's first sentence, for specs that write no summaries: Stripe, Slack, Kubernetes); the
description's first paragraph (markup out); the tags; the path's segments (parameters included, braces out); the
argument names; the path's resource (its last segment that is not a parameter: `contributors`, `forward`). Words
are stemmed (FTS5's porter tokenizer). How a query becomes a match: `gateway.offer.query`. What a read answers (its
response's field names: `ContainersPaused`) is in a table of its own, one row an operation, whose BM25, weighted, is
added to the operation's for a request that asks for a read or names no method (`gateway.offer.answer_text`). What
the spec's `tags[]` say of each tag is a row of a table of its own, whose match lifts a few of the tag's tools among
the candidates (`gateway.offer.tag_table`).

SQLite ranks the matches by BM25 alone; the best `_CANDIDATES`, the best `_METHOD_CANDIDATES` of the method the query
asks for among the next ("delete this email" matches hundreds of mail operations), and the best `_ADDRESSED_CANDIDATES`
whose path's resource is the thing the query names or its verb (`/me/chats` for "list my chats", under hundreds of
operations on chat messages), with the operations at a path the query quotes (`gateway.offer.quoted_paths`) and the
tools a matched tag lifts, are the candidates. How the request is read first, for this api: a request about a thing
of a target asks for the target's change or read (`gateway.offer.targets`); a word in capitals the api lacks is
spelled out by the initials of its names' words (CRD), an id's prefix by the resource it abbreviates (`pi_5`: a
payment intent; `gateway.offer.abbreviations`); how many over a period adds a usage report's words where the api
reports over a period (`gateway.offer.questions`). The candidates' BM25 is then multiplied by the ranking signals
(the method asked for, a short path, what the path addresses, whose it is, ...: `gateway.offer.signals`, which says
what each rewards and why), and a family of functions called on one path (Graph's 124 usage reports under
`/reports`) takes at most two of the first five places (`gateway.offer.families`). A request that names one of the
api's services and asks whether it is up (or its version) has that service's own health (or version) check put first
(`gateway.offer.service_checks`). The facts the signals read are computed when the index is built
(`gateway.offer.index_build`)."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..catalog import Catalog, Tool
from . import answer_text, statements
from .abbreviations import Abbreviations, kinds_named, spelled_out
from .families import diversified, family_of
from .index_build import build_index, resources, summary_of
from .path_words import above, last_word, names, singulars, stem_of
from .phrase_scores import PhraseScores, added, best_rows, named_rowids, rows_among, scores_of
from .query import Request, expression_of, read, stems
from .questions import USAGE
from .quoted_paths import Quoted, QuotedRows, literal_segments, quoted, quoted_words
from .service_checks import ServiceChecks
from .signals import WEIGHTS, Facts, Weights, answerable, collapsed, weighed
from .tag_table import TagTable
from .targets import of_api

__all__ = ["SearchHit", "ToolIndex", "build_index", "index_of", "resources", "summary_of"]



@dataclass(slots=True, frozen=True)
class SearchHit:
    tool: Tool
    score: float
    """Higher is better (BM25 with field weights, times the method, depth and name signals)."""


@dataclass(slots=True)
class OpenedApi:
    connection: sqlite3.Connection
    facts: list[Facts]
    """Row i (rowid i + 1) of the index."""
    vocabulary: dict[str, int]
    """Each stem of the api's names and summaries, and its bit."""
    methods: frozenset[str]
    """The methods the api uses (Stripe's updates with POST, Slack's deletes with POST)."""
    endings: frozenset[str]
    """Every ending (3 letters or more) of the stems of the last words of what its paths address
    (`persistentvolumeclaim`, ..., `claim`, `aim`): whether a path addresses a thing is one look-up."""
    lock: threading.Lock
    """Its `ToolIndex`'s: one reader of the connection at a time."""
    pairs: frozenset[tuple[str, str]]
    """The last words of what its paths address and of the resource before it: (`issues`, `labels`)."""
    reports: bool
    """Whether some of its operations report over a period (a GET with an argument `period`: Graph's usage
    reports)."""
    abbreviations: Abbreviations
    """What the initials of its names' words and the prefixes of ids stand for (`pvc`, `cus_`)."""
    phrases: PhraseScores | None
    """Each phrase's rows and BM25 term, kept: a match of phrases joined by OR scored without FTS5 scoring its rows
    again (`gateway.offer.phrase_scores`); None, the statements alone (the tests hold the two alike)."""
    resource_phrases: PhraseScores
    """The same for the resources named (`Request.addressed`), by FTS5's rank (`bm25()` unweighted)."""
    answer_phrases: PhraseScores
    """The same for what the operations answer (`gateway.offer.answer_text`)."""
    segments: frozenset[str]
    """The literal segments of its paths, lower case (`gateway.offer.quoted_paths`)."""
    quoted_rows: QuotedRows
    """Which of its operations are at a path a request quotes."""
    tags: TagTable | None
    """The tags its spec describes and their tools (`gateway.offer.tag_table`); None where it describes none."""
    rowids: dict[int, int]
    """Each tool's rowid by the `id` of its facts, where `tags` has any (a lift is by rowid)."""
    checks: ServiceChecks
    """Its services' own health and version checks (`gateway.offer.service_checks`)."""
    rowid_of: dict[str, int]
    """Each tool's rowid by its name: which rows a ranking's first places are (`ToolIndex.held`)."""

    def addresses(self, things: frozenset[str]) -> bool:
        """Whether one of its paths addresses one of the things (a resource's last word ends with it)."""
        return any(thing in self.endings for thing in things if len(thing) >= 3)

    def addresses_under(self, things: frozenset[str], targets: frozenset[str]) -> bool:
        """Whether one of its paths addresses one of the things under one of the targets (`/issues/{n}/labels`)."""
        return any(names(resource, things) and names(parent, targets) for parent, resource in self.pairs)

    def mentions(self, word: str) -> bool:
        """Whether any of the api's indexed text (descriptions, arguments) has the word."""
        if not word.isalnum():
            return False
        with self.lock:
            found = self.connection.execute("SELECT 1 FROM tools WHERE tools MATCH ? LIMIT 1", (f'"{word}"',))
            return found.fetchone() is not None

    def knows(self, word: str) -> bool:
        """Whether the api's names or summaries have the word."""
        return bool(stems(word) & self.vocabulary.keys())

    def mask(self, stems: Iterable[str]) -> int:
        return sum(1 << bit for bit in {self.vocabulary[stem] for stem in stems if stem in self.vocabulary})


def _open(connection: sqlite3.Connection, tools: Sequence[Tool], lock: threading.Lock) -> OpenedApi:
    """An api's opened index and the facts of its tools (its `facts` and `vocabulary` tables)."""
    rows = connection.execute("SELECT method, depth, prior, item, named, name_size, summarized, summary_size, kind, "
                              "resource, parent, owner FROM facts ORDER BY rowid").fetchall()
    facts = [Facts(tool, method, depth, prior / depth, bool(item), int.from_bytes(named, "little"), name_size,
                    int.from_bytes(summarized, "little"), summary_size, kind, resource, parent, owner,
                    family_of(tool.path), singulars(resource), stem_of(last_word(resource)), stem_of(parent),
                    tuple(stem_of(word) for word in above(tool.path)), "{" in tool.path)
             for tool, (method, depth, prior, item, named, name_size, summarized, summary_size, kind, resource, parent,
                        owner) in zip(tools, rows, strict=True)]
    vocabulary = dict(connection.execute("SELECT stem, bit FROM vocabulary").fetchall())
    addressed = {next(iter(stems(row.resource.split()[-1])), "") for row in facts if row.resource}
    endings = frozenset(stem[start:] for stem in addressed for start in range(len(stem) - 2))
    pairs = frozenset((row.parent, row.resource.split()[-1]) for row in facts if row.resource and row.parent)
    table = TagTable(connection)
    tags = table if table.members else None
    return OpenedApi(connection, facts, vocabulary, frozenset(tool.method for tool in tools), endings, lock, pairs,
                     any(tool.method == "GET" and any(argument.name == _PERIOD for argument in tool.arguments)
                         for tool in tools), Abbreviations(tools), PhraseScores(connection, statements.BM25),
                     PhraseScores(connection, statements.RANK),
                     PhraseScores(connection, statements.ANSWERS_BM25, "answers"),
                     literal_segments(tool.path for tool in tools),
                     QuotedRows([(tool.method, tool.path) for tool in tools]), tags,
                     {id(row): rowid for rowid, row in enumerate(facts, 1)} if tags else {}, ServiceChecks(tools),
                     {tool.name: rowid for rowid, tool in enumerate(tools, 1)})


class ToolIndex:
    """Search over a catalog's tools; each api's index is opened (deserialized) on first use.

    Args:
        catalog: the tools searched.
        weights: the signals' factors (`gateway.offer.signals.Weights`): the product's, unless a bench sweeps them.
    """

    def __init__(self, catalog: Catalog, weights: Weights = WEIGHTS) -> None:
        self.catalog = catalog
        self.weights = weights
        self.apis = list(dict.fromkeys([*catalog.apis, *(tool.api for tool in catalog)]))
        self._open: dict[str, OpenedApi] = {}
        self._lock = threading.Lock()

    def opened(self, api: str) -> OpenedApi:
        """The api's index, opened at its first use and kept (its connection and its tools' facts: what the
        benches and tests read of it)."""
        opened = self._open.get(api)
        if opened is not None:
            return opened
        with self._lock:
            if api in self._open:
                return self._open[api]
            tools = self.catalog.for_api(api)
            spec = self.catalog.apis.get(api)
            data = (spec.search_index if spec is not None and spec.search_index else
                    build_index(tools, spec.tag_descriptions if spec is not None else None))
            connection = sqlite3.connect(":memory:", check_same_thread=False)
            connection.deserialize(data)
            self._open[api] = _open(connection, tools, self._lock)
            return self._open[api]

    def search(self, query: str, *, limit: int = 10, apis: Iterable[str] | None = None,
               allowed: Callable[[Tool], bool] | None = None) -> list[SearchHit]:
        """The best `limit` tools for `query` (of `apis`, default all; only those `allowed` passes).

        SQLite ranks the matches by BM25 alone (reading any other column of every match would cost more than the
        ranking); the best `max(limit, _CANDIDATES)` (that `allowed` passes), and the best of the asked method
        after them, are then scored by the signals (`gateway.offer.signals`)."""
        read_as = _read(query)
        if not read_as.terms or limit < 1:
            return []
        scored: list[tuple[Facts, float]] = []
        for api in list(apis) if apis is not None else self.apis:
            opened = self.opened(api)
            named = kinds_named(query, read_as, opened.abbreviations, opened.knows, opened.addresses)
            as_said = read_as if named == query else read(named)  # "pi_5": a payment intent, where ids say so
            methods = as_said.methods
            asked = answerable(methods, opened.methods)
            request, changes, within, displaced = of_api(spelled_out(as_said, opened.abbreviations, opened.knows),
                                                          opened)
            if request.over_period and opened.reports:  # "how many emails were sent last month": a usage report
                terms = [*request.terms, USAGE]
                request = dataclasses.replace(request, terms=terms, expression=expression_of(terms))
            runs = quoted(query, opened.segments)
            if said := [word for word in quoted_words(runs)
                        if not any(word in alternatives for alternatives in request.terms)]:
                # "which resources does networking.k8s.io/v1 serve": its path's words, not an argument's
                terms = [*request.terms, *((word,) for word in said)]
                request = dataclasses.replace(request, terms=terms, expression=expression_of(terms),
                                              stems=request.stems | stems(" ".join(said)))
            if request.named and not opened.addresses(request.named):  # no path names it as said: synonyms are all
                request = dataclasses.replace(request, named=frozenset())  # there is ("the meeting": its event)
            if changes:  # "add a label to the pod" changes the pod, it creates none
                asked = changes
            elif not asked and request.agents and opened.addresses(frozenset(request.agents)):
                asked = frozenset({"POST"})  # "autoscale the deployment": set up its autoscaler
            answered = answer_text.read_for(asked)
            candidates = self._candidates(opened, request, allowed, asked, max(limit, _CANDIDATES), answered)
            if runs:  # the operations at a path it quotes are candidates, however many others its words match more
                candidates += self._quoted(opened, request.expression, runs, candidates, allowed, answered)
            if opened.tags is not None:  # what the spec's tags say: a matched tag's best tools lifted
                candidates = self._lifted(opened, request.expression, candidates, allowed, answered)
            owner = request.owner_in(opened.knows)
            ranked = collapsed(weighed(candidates, asked, opened.mask(request.stems), request, owner, changes, within,
                                       displaced, runs, self.weights), owner, as_said.target, self.weights)
            check = opened.checks.asked(query)
            if check is not None and (allowed is None or allowed(opened.facts[check].tool)):
                # "is the shipments service up": its own health check, which no word of the request names
                ranked = _checked(ranked, opened.facts[check], self.weights.service_check)
            scored.extend(ranked)
        scored.sort(key=lambda pair: -pair[1])
        scored = diversified(scored, lambda facts: facts.family)
        # 4 significant digits, not decimals: in a small api a word in most operations weighs ~1e-6 (FTS5's floor)
        return [SearchHit(facts.tool, float(f"{score:.4g}")) for facts, score in scored[:limit] if score > 0]

    def held(self, query: str, first: Sequence[Tool]) -> float:
        """The share of `query`'s match terms (each with its alternatives, as the index matches them) that the rows of
        the tools `first` hold together, in any column: how much of the request a ranking's first places answer (the
        fusion trusts BM25's less where they hold little of it: `gateway.offer.fusion.trusted`); 1 where the request
        has no term or `first` no tool. From each phrase's kept rows, where they answer (a search has just kept
        them); else a statement per term."""
        terms = _read(query).terms  # read by the search just before
        rows: dict[str, list[int]] = {}
        for tool in first:
            rows.setdefault(tool.api, []).append(self.opened(tool.api).rowid_of[tool.name])
        if not terms or not rows:
            return 1.0
        opened = [(self.opened(api), rowids) for api, rowids in rows.items()]  # opened above: no lock taken here
        with self._lock:
            held = sum(1 for group in terms if any(_holds(api, expression_of([group]), rowids)
                                                   for api, rowids in opened))
        return held / len(terms)

    def _candidates(self, opened: OpenedApi, request: Request, allowed: Callable[[Tool], bool] | None,
                    asked: frozenset[str], first: int, answered: bool) -> list[tuple[Facts, float]]:
        """The best `first` matches by BM25 alone, then the best `_METHOD_CANDIDATES` of the asked methods
        among the next (lest the others crowd them out: "delete this email" matches hundreds of mail operations);
        of those `allowed` passes (then every match is ranked)."""
        facts = opened.facts
        wanted = first + _POOL - _CANDIDATES if asked else first
        run = statements.of(answered)
        with self._lock:
            scored = phrase_scored(opened, request.expression, answered)
            if scored is not None:  # the statements' rows, from each phrase's kept scores
                rows, addressed = self._from_phrases(opened, scored, request, allowed, wanted)
                return self._chosen(facts, rows, addressed, asked, first)
            if allowed is None and request.addressed and _ADDRESSED_CANDIDATES:  # one pass of the match for both
                both = opened.connection.execute(run.both,
                                                 (request.addressed, _ADDRESSED_CANDIDATES, request.expression,
                                                  wanted)).fetchall()
                rows = [(rowid, score) for rowid, score, best in both if best]
                addressed = [(rowid, score) for rowid, score, best in both if not best]
                return self._chosen(facts, rows, addressed, asked, first)
            cursor = opened.connection.execute(run.first,
                                               (request.expression, wanted if allowed is None else -1))
            if allowed is None:
                rows = cursor.fetchall()
            else:
                rows = list(itertools.islice((row for row in cursor if allowed(facts[row[0] - 1].tool)), wanted))
            addressed = []
            if request.addressed and _ADDRESSED_CANDIDATES:
                cursor = opened.connection.execute(run.addressed,
                                                   (request.expression, request.addressed,
                                                    _ADDRESSED_CANDIDATES if allowed is None else -1))
                addressed = list(itertools.islice((row for row in cursor if allowed is None or
                                                   allowed(facts[row[0] - 1].tool)), _ADDRESSED_CANDIDATES))
        return self._chosen(facts, rows, addressed, asked, first)

    def _quoted(self, opened: OpenedApi, expression: str, runs: tuple[Quoted, ...],
                candidates: list[tuple[Facts, float]],
                allowed: Callable[[Tool], bool] | None, answered: bool) -> list[tuple[Facts, float]]:
        """The operations at the quoted paths that are not among the candidates yet, with their BM25."""
        held = {id(facts) for facts, _ in candidates}
        rowids = [at + 1 for at in opened.quoted_rows.rows(runs) if id(opened.facts[at]) not in held
                  and (allowed is None or allowed(opened.facts[at].tool))]
        if not rowids:
            return []
        with self._lock:
            found = _among(opened, expression, rowids, answered)
        return [(opened.facts[rowid - 1], score) for rowid, score in found]

    def _lifted(self, opened: OpenedApi, expression: str, candidates: list[tuple[Facts, float]],
                allowed: Callable[[Tool], bool] | None, answered: bool) -> list[tuple[Facts, float]]:
        """The candidates with the lifts of the tags the request matches (`gateway.offer.tag_table.TagTable`) added to
        their BM25, and the tools lifted that were not among them, with theirs: scored as a candidate is (what they
        answer added when `answered`), so a lifted tool ranks where it would have had it been a candidate."""
        facts = opened.facts

        def own(rowids: Sequence[int]) -> dict[int, float]:
            if not rowids:
                return {}
            scored = phrase_scored(opened, expression, answered)
            if scored is not None:  # from each phrase's kept scores, not FTS5 matching every row again
                return scores_of(scored, rowids)
            return dict(_among(opened, expression, rowids, answered))

        assert opened.tags is not None
        with self._lock:
            matched = opened.tags.matched(expression)
            if not matched:  # most requests: no word of theirs that hardly any tool says matches a tag
                return candidates
            passes = None if allowed is None else (lambda rowid: allowed(facts[rowid - 1].tool))
            scores = {opened.rowids[id(row)]: score for row, score in candidates}
            lifts = opened.tags.lifted(matched, scores, own, passes)
        if not lifts:
            return candidates
        kept = [(row, lifts.pop(opened.rowids[id(row)], score)) for row, score in candidates]
        return kept + [(facts[rowid - 1], score) for rowid, score in lifts.items()]

    @staticmethod
    def _from_phrases(opened: OpenedApi, scored: tuple[Any, Any], request: Request,
                      allowed: Callable[[Tool], bool] | None,
                      wanted: int) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """What the statements answer (`Statements.both`; else `first` and `addressed`), from the phrases' scores of
        the rows matched (`PhraseScores.scored`; `gateway.offer.phrase_scores` says how each list is ordered)."""
        facts = opened.facts
        passes = None if allowed is None else (lambda rowid: allowed(facts[rowid - 1].tool))
        rows = best_rows(scored, wanted, passes)
        if not request.addressed or not _ADDRESSED_CANDIDATES:
            return rows, []
        named = named_rowids(opened.resource_phrases, opened.connection, request.addressed,
                             _ADDRESSED_CANDIDATES if allowed is None else -1)
        return rows, rows_among(scored, named, passes, _ADDRESSED_CANDIDATES)

    @staticmethod
    def _chosen(facts: list[Facts], rows: list[tuple[int, float]], addressed: list[tuple[int, float]],
                asked: frozenset[str], first: int) -> list[tuple[Facts, float]]:
        chosen = [(facts[rowid - 1], score) for rowid, score in rows[:first]]
        following = ((facts[rowid - 1], score) for rowid, score in rows[first:]
                     if facts[rowid - 1].method in asked)
        chosen += itertools.islice(following, _METHOD_CANDIDATES)
        seen = {id(pair[0]) for pair in chosen}
        return chosen + [(facts[rowid - 1], score) for rowid, score in addressed if id(facts[rowid - 1]) not in seen]


def _checked(ranked: list[tuple[Facts, float]], check: Facts, lift: float) -> list[tuple[Facts, float]]:
    """`ranked` with `check` scored `lift` times the first score (1 where nothing else matched), unless its own is
    more."""
    top = max((score for _, score in ranked), default=1.0)
    own = max((score for facts, score in ranked if facts is check), default=0.0)
    return [*((facts, score) for facts, score in ranked if facts is not check), (check, max(own, lift * top))]


def _holds(opened: OpenedApi, match: str, rowids: list[int]) -> bool:
    """Whether one of the rows `rowids` matches `match` (the caller holds the lock)."""
    kept = opened.phrases.holds(match, rowids) if opened.phrases is not None else None
    if kept is not None:
        return kept
    statement = f"SELECT 1 FROM tools WHERE tools MATCH ? AND rowid IN ({', '.join('?' * len(rowids))}) LIMIT 1"
    return opened.connection.execute(statement, (match, *rowids)).fetchone() is not None


def _among(opened: OpenedApi, expression: str, rowids: Sequence[int], answered: bool) -> list[tuple[int, float]]:
    """The rows among `rowids` the match matches, with the BM25 `statements.of(answered)` gives them (the statement
    run; the caller holds the lock)."""
    return opened.connection.execute(f"{statements.of(answered).among} ({', '.join('?' * len(rowids))})",
                                     (expression, *rowids)).fetchall()


def phrase_scored(opened: OpenedApi, expression: str, answered: bool) -> tuple[Any, Any] | None:
    """The rows the match matches and their BM25 from each phrase's kept scores, what they answer added when
    `answered` (what `statements.of(answered)` computes); None where the kept scores cannot answer (the caller runs
    the statement). The caller holds the lock."""
    scored = opened.phrases.scored(expression) if opened.phrases is not None else None
    if scored is not None and answered:  # what they answer, added
        scored = added(scored, opened.answer_phrases.scored(expression), answer_text.WEIGHT)
    return scored


_READ_KEPT = 64
"""Requests whose reading is kept: the fusion asks how much of a request BM25's first places hold (`ToolIndex.held`)
right after its search read it (a reading costs about 0.15 ms)."""
_read = functools.lru_cache(maxsize=_READ_KEPT)(read)


_CANDIDATES = 50
_METHOD_CANDIDATES = 50
_POOL = 400
_ADDRESSED_CANDIDATES = 60


_PERIOD = "period"


_INDEXES: weakref.WeakKeyDictionary[Catalog, ToolIndex] = weakref.WeakKeyDictionary()


def index_of(catalog: Catalog) -> ToolIndex:
    """The one `ToolIndex` of a catalog."""
    index = _INDEXES.get(catalog)
    if index is None:
        index = _INDEXES.setdefault(catalog, ToolIndex(catalog))
    return index
