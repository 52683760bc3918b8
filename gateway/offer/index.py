"""Tool search: an embedded full-text index of a spec's operations (SQLite FTS5, BM25), no model, no network.

`build_index(tools)` is run when a spec is compiled; the index travels as bytes (`sqlite3` serialization) in
the spec's `ApiSpec.search_index`, so it is cached with the catalog. `ToolIndex(catalog).search(query)` opens
each api's index once (in memory) and answers the best tools first.

What is indexed, one column each (weights in `_WEIGHTS`): the name split on case, `_`, `/`, `.` and `-`; the
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
operations on chat messages), with the operations at a path the query quotes, are then scored: times `_INTENT_BOOST` for
the asked method (an api without the method asked for is asked for its other update method (Jira's PUT for a PATCH) or
else for POST, such as Slack's without
DELETE or Stripe's without PATCH: `_answerable`), divided by `1 + 0.1 * path depth`, halved when deprecated, times
`_PLURAL` for a GET of all items when the query names its thing in the plural
("show my to-do lists"), times `1 + the share of the name's words the query holds` (`issues/create` for "create an
issue", not `orgs/create-issue-type`) and `1 + 2 * the share of the summary's`, times `_ACTED` when the path's resource
is the request's verb acting on what it names (`/me/events/{id}/accept` for "accept the meeting invite") or `_ADDRESSED`
when it is the thing the request names (`/sites` for "list the SharePoint sites", not Graph's usage report
`getSharePointSiteUsagePages`; only `_ADDRESSED_BY_SYNONYM` when it names it by a synonym while another path names it as
said: `/me/calendars`, not `/me/events`, for "create a new calendar"), times `_OWNER` (or divided by it) when the path
is (or is not) of the owner the request means (`/me/...` for "my", `/users/{id}/...` for "alice's"), times `_ONE_ITEM`
when the path has a parameter and the request names an item by an id (cus_42, PROJ-7, node-3), times `_QUOTED` when the
path is one the request quotes, though with a digit (`/apis/batch/v1/` for "batch/v1", whose words then match), or as
the spec writes it (`/users/tokens/{id}/` for "GET /api/users/tokens/17/": `gateway.offer.quoted_paths`). Graph answers
one operation under many nested paths: of the candidates with one method, summary and resource, the one of the owner
meant, else the shortest path, takes their best score and the others fall behind. A family of functions called on one
path (Graph's 124 usage reports under `/reports`) takes at most two of the first five places (`gateway.offer.families`).
A request about a thing of a target asks for the target's change or read (`gateway.offer.targets`); a word in
capitals the api lacks is spelled out by the initials of its names' words (CRD), an id's prefix by the resource it
abbreviates (`pi_5`: a payment intent; `gateway.offer.abbreviations`); how many over a period adds a usage report's
words where the api reports over a period (`gateway.offer.questions`).
The facts these signals read are computed when the index is built. The constants were chosen on the tuning parts of
tests/openapi/search_tasks (`tasks`, `holdout`, `fresh`, `tune`; from the third round of #30 also `heldout` and `final`,
from the fourth `round3`, from the fifth `round4`; `_QUOTED` on `round12`..`round20`), never on the part measured at
the end of a round (bench/README.md)."""

from __future__ import annotations

import dataclasses
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
from .actions import action_of, performs
from .families import diversified, family_of
from .index_build import build_index, resources, summary_of
from .path_words import above, last_word, names, prefixes, singulars, stem_of, suffixes
from .phrase_scores import PhraseScores, added, best_rows, named_rowids, rows_among, scores_of
from .query import Request, expression_of, read, stems
from .questions import USAGE
from .quoted_paths import Quoted, QuotedRows, ends_with, literal_segments, quoted, quoted_words
from .tag_table import TagTable
from .targets import UPDATES, of_api

__all__ = ["SearchHit", "ToolIndex", "build_index", "index_of", "resources", "summary_of"]

_INTENT_BOOST = 1.8
_NAME_COVERAGE = 1.0
_SUMMARY_COVERAGE = 2.0
_PLURAL = 1.3
_DUPLICATE = 0.7
_ADDRESSED = 1.5
_ADDRESSED_BY_SYNONYM = 1.2
_ACTED = 3.0
_OWNER = 1.6
_ONE_ITEM = 1.2
_QUOTED = 10.0


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
    resource: str
    """The words of what the path addresses, lower case: `messages`, `accept` (an action), `get share point site
    usage pages`, `persistentvolumeclaims`, `post message` (Slack's `/chat.postMessage`)."""
    parent: str
    """The last word of the resource before it (`messages` for `/me/messages/{id}/microsoft.graph.forward`)."""
    owner: str
    """Whose things the path answers (`_owner_of`): "self", "other" or ""."""
    family: str
    """For a function (`/reports/microsoft.graph.getSharePointSiteUsagePages(period='{period}')`), the path it is
    called on: Graph's 124 usage reports are one family, which takes at most two of the first places."""
    words: tuple[str, ...]
    """The resource's words, each singular (`gateway.offer.path_words.singulars`)."""
    last_stem: str
    """The stem of the resource's last word: whether it is one of the things a request names is one `endswith`."""
    parent_stem: str
    """The stem of `parent`."""
    above_stems: tuple[str, ...]
    """The stems of the resources the path addresses its own under (`/sites/{id}/drives`: `site`)."""
    parameterized: bool
    """Whether the path has a parameter (`/users/{id}/...`)."""


@dataclass(slots=True)
class _Opened:
    connection: sqlite3.Connection
    facts: list[_Facts]
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
    pairs: frozenset[tuple[str, str]] = frozenset()
    """The last words of what its paths address and of the resource before it: (`issues`, `labels`)."""
    reports: bool = False
    """Whether some of its operations report over a period (a GET with an argument `period`: Graph's usage
    reports)."""
    abbreviations: Abbreviations | None = None
    """What the initials of its names' words and the prefixes of ids stand for (`pvc`, `cus_`)."""
    phrases: PhraseScores | None = None
    """Each phrase's rows and BM25 term, kept: a match of phrases joined by OR scored without FTS5 scoring its rows
    again (`gateway.offer.phrase_scores`)."""
    resource_phrases: PhraseScores | None = None
    """The same for the resources named (`Request.addressed`), by FTS5's rank (`bm25()` unweighted)."""
    answer_phrases: PhraseScores | None = None
    """The same for what the operations answer (`gateway.offer.answer_text`), where the index has their table."""
    segments: frozenset[str] = frozenset()
    """The literal segments of its paths, lower case (`gateway.offer.quoted_paths`)."""
    quoted_rows: QuotedRows | None = None
    """Which of its operations are at a path a request quotes."""
    tags: TagTable | None = None
    """The tags its spec describes and their tools (`gateway.offer.tag_table`); None where it describes none."""
    rowids: dict[int, int] = dataclasses.field(default_factory=dict)
    """Each tool's rowid by the `id` of its facts, where `tags` has any (a lift is by rowid)."""

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


def _open(connection: sqlite3.Connection, tools: Sequence[Tool], lock: threading.Lock) -> _Opened:
    """An api's opened index and the facts of its tools (its `facts` and `vocabulary` tables)."""
    rows = connection.execute("SELECT method, depth, prior, item, named, name_size, summarized, summary_size, kind, "
                              "resource, parent, owner FROM facts ORDER BY rowid").fetchall()
    facts = [_Facts(tool, method, depth, prior / depth, bool(item), int.from_bytes(named, "little"), name_size,
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
    return _Opened(connection, facts, vocabulary, frozenset(tool.method for tool in tools), endings, lock, pairs,
                   any(tool.method == "GET" and any(argument.name == _PERIOD for argument in tool.arguments)
                       for tool in tools), Abbreviations(tools), PhraseScores(connection, statements.BM25),
                   PhraseScores(connection, statements.RANK),
                   PhraseScores(connection, statements.ANSWERS_BM25, "answers")
                   if _has_answers(connection) else None, literal_segments(tool.path for tool in tools),
                   QuotedRows([(tool.method, tool.path) for tool in tools]), tags,
                   {id(row): rowid for rowid, row in enumerate(facts, 1)} if tags else {})


def _has_answers(connection: sqlite3.Connection) -> bool:
    return connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'answers'").fetchone() is not None


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
        after them, are then scored with the signals here."""
        read_as = read(query)
        if not read_as.terms or limit < 1:
            return []
        scored: list[tuple[_Facts, float]] = []
        for api in list(apis) if apis is not None else self.apis:
            opened = self._api(api)
            assert opened.abbreviations is not None
            named = kinds_named(query, read_as, opened.abbreviations, opened.knows, opened.addresses)
            as_said = read_as if named == query else read(named)  # "pi_5": a payment intent, where ids say so
            methods = as_said.methods
            asked = _answerable(methods, opened.methods)
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
            answered = opened.answer_phrases is not None and answer_text.read_for(asked)
            candidates = self._candidates(opened, request, allowed, asked, max(limit, _CANDIDATES), answered)
            if runs:  # the operations at a path it quotes are candidates, however many others its words match more
                candidates += self._quoted(opened, request.expression, runs, candidates, allowed, answered)
            if opened.tags is not None:  # what the spec's tags say: a matched tag's best tools lifted
                candidates = self._lifted(opened, request.expression, candidates, allowed, answered)
            owner = request.owner_in(opened.knows)
            scored.extend(_collapse(_signals(candidates, asked, opened.mask(request.stems), request, owner, changes,
                                                    within, displaced, runs), owner, as_said.target))
        scored.sort(key=lambda pair: -pair[1])
        scored = diversified(scored, lambda facts: facts.family)
        # 4 significant digits, not decimals: in a small api a word in most operations weighs ~1e-6 (FTS5's floor)
        return [SearchHit(facts.tool, float(f"{score:.4g}")) for facts, score in scored[:limit] if score > 0]

    def _candidates(self, opened: _Opened, request: Request, allowed: Callable[[Tool], bool] | None,
                    asked: frozenset[str], first: int, answered: bool) -> list[tuple[_Facts, float]]:
        """The best `first` matches by BM25 alone, then the best `_METHOD_CANDIDATES` of the asked methods
        among the next (lest the others crowd them out: "delete this email" matches hundreds of mail operations);
        of those `allowed` passes (then every match is ranked)."""
        facts = opened.facts
        wanted = first + _POOL - _CANDIDATES if asked else first
        run = statements.of(answered)
        with self._lock:
            scored = _scored(opened, request.expression, answered)
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

    def _quoted(self, opened: _Opened, expression: str, runs: tuple[Quoted, ...],
                candidates: list[tuple[_Facts, float]],
                allowed: Callable[[Tool], bool] | None, answered: bool) -> list[tuple[_Facts, float]]:
        """The operations at the quoted paths that are not among the candidates yet, with their BM25."""
        assert opened.quoted_rows is not None
        held = {id(facts) for facts, _ in candidates}
        rowids = [at + 1 for at in opened.quoted_rows.rows(runs) if id(opened.facts[at]) not in held
                  and (allowed is None or allowed(opened.facts[at].tool))]
        if not rowids:
            return []
        with self._lock:
            found = _among(opened, expression, rowids, answered)
        return [(opened.facts[rowid - 1], score) for rowid, score in found]

    def _lifted(self, opened: _Opened, expression: str, candidates: list[tuple[_Facts, float]],
                allowed: Callable[[Tool], bool] | None, answered: bool) -> list[tuple[_Facts, float]]:
        """The candidates with the lifts of the tags the request matches (`gateway.offer.tag_table.TagTable`) added to
        their BM25, and the tools lifted that were not among them, with theirs: scored as a candidate is (what they
        answer added when `answered`), so a lifted tool ranks where it would have had it been a candidate."""
        facts = opened.facts

        def own(rowids: Sequence[int]) -> dict[int, float]:
            if not rowids:
                return {}
            scored = _scored(opened, expression, answered)
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
    def _from_phrases(opened: _Opened, scored: tuple[Any, Any], request: Request,
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
    def _chosen(facts: list[_Facts], rows: list[tuple[int, float]], addressed: list[tuple[int, float]],
                asked: frozenset[str], first: int) -> list[tuple[_Facts, float]]:
        chosen = [(facts[rowid - 1], score) for rowid, score in rows[:first]]
        following = ((facts[rowid - 1], score) for rowid, score in rows[first:]
                     if facts[rowid - 1].method in asked)
        chosen += itertools.islice(following, _METHOD_CANDIDATES)
        seen = {id(pair[0]) for pair in chosen}
        return chosen + [(facts[rowid - 1], score) for rowid, score in addressed if id(facts[rowid - 1]) not in seen]


def _among(opened: _Opened, expression: str, rowids: Sequence[int], answered: bool) -> list[tuple[int, float]]:
    """The rows among `rowids` the match matches, with the BM25 `statements.of(answered)` gives them (the statement
    run; the caller holds the lock)."""
    return opened.connection.execute(f"{statements.of(answered).among} ({', '.join('?' * len(rowids))})",
                                     (expression, *rowids)).fetchall()


def _scored(opened: _Opened, expression: str, answered: bool) -> tuple[Any, Any] | None:
    """The rows the match matches and their BM25 from each phrase's kept scores, what they answer added when
    `answered` (what `statements.of(answered)` computes); None where the kept scores cannot answer (the caller runs
    the statement). The caller holds the lock."""
    scored = opened.phrases.scored(expression) if opened.phrases is not None else None
    if scored is not None and answered and opened.answer_phrases is not None:  # what they answer, added
        scored = added(scored, opened.answer_phrases.scored(expression), answer_text.WEIGHT)
    return scored


_CANDIDATES = 50
_METHOD_CANDIDATES = 50
_POOL = 400
_ADDRESSED_CANDIDATES = 60


def _collapse(scored: list[tuple[_Facts, float]], owner: str | None,
              target: frozenset[str]) -> list[tuple[_Facts, float]]:
    """Of the candidates of one kind (one operation under several paths), the one of the owner the query means
    (`/users/{id}/manager` for "alice's manager"), else under the thing the query names after a preposition
    (`/sites/{id}/drives` for "the document libraries of the site"), else with the shortest path (and not
    deprecated), takes the best score of them all; the others fall behind it, times `_DUPLICATE`."""
    best: dict[int, tuple[_Facts, float]] = {}
    for facts, score in scored:
        held = best.get(facts.kind)
        if held is None:
            best[facts.kind] = (facts, score)
        else:
            mine = (facts.owner == owner, _under(facts, target), facts.weight, score)
            theirs = (held[0].owner == owner, _under(held[0], target), held[0].weight, held[1])
            preferred = facts if mine > theirs else held[0]
            best[facts.kind] = (preferred, max(score, held[1]))
    return [(facts, best[facts.kind][1] if best[facts.kind][0] is facts else score * _DUPLICATE)
            for facts, score in scored]


def _answerable(methods: frozenset[str], used: frozenset[str]) -> frozenset[str]:
    """The methods asked for as an api that uses `used` answers them: an update it makes by the other update method
    (Jira, Asana, Box and Apacta change their things by PUT alone, Adyen's Management API by PATCH alone), anything
    else by POST (Stripe updates with POST, Slack deletes with POST)."""
    if not methods or methods & used:
        return methods
    if methods & UPDATES and UPDATES & used:
        return methods | (UPDATES & used)
    return methods | {"POST"}


_PERIOD = "period"
_PROPERTY = 2.0
_PROPERTY_ELSEWHERE = 20.0
"""The target's change, when the api has the thing named but not under the target: "set the fix version of API-77"
edits the issue (Jira's versions are the project's), far under what the thing's own operations score by BM25."""
_DISPLACED = 3.0
"""The divisor of the thing's own operations then (`updateVersion` for "set the fix version of API-77")."""


def _under(facts: _Facts, target: frozenset[str]) -> bool:
    """Whether the path addresses its resource under one of the `target` things (`/sites/{id}/drives`, a site's
    drives) and of no user: `/me/mailFolders/{id}/messages` are some of `/me/messages`, a site's drives are not some
    of `/me/drives`."""
    return bool(target) and not facts.owner and any(stem.endswith(suffixes(target)) for stem in facts.above_stems)


def _signals(candidates: list[tuple[_Facts, float]], methods: frozenset[str], terms: int,
             request: Request, owner: str | None, changes: frozenset[str],
             within: frozenset[str], displaced: frozenset[str],
             runs: tuple[Quoted, ...] = ()) -> list[tuple[_Facts, float]]:
    """Each candidate's BM25 times its signals: the method the query asks for, a short path, not deprecated, a
    name and a summary made of the query's words (`terms`, a mask: `issues/create` for "create an issue", over
    `orgs/create-issue-type`), the thing the query names or its verb as what the path addresses, whose it is."""
    scored = []
    addressing: dict[tuple[str, str], float] = {}  # of one resource under one parent: Graph's copies share them
    things, within_ends, displaced_ends = suffixes(request.things), suffixes(within), suffixes(displaced)
    plural, identified = request.plural, request.identified
    action = action_of(request.verb, methods)
    for facts, score in candidates:
        method = facts.method
        asked = method in methods or (action and performs(action, method, facts.item, facts.words))
        factor = -score * facts.weight * (_INTENT_BOOST if asked else 1.0)
        if plural and method == "GET" and not facts.item:
            factor *= _PLURAL
        said = (facts.resource, facts.parent)
        addressed = addressing.get(said)
        if addressed is None:
            addressed = addressing[said] = (_addresses(facts, request) if not within
                                            or facts.parent_stem.endswith(within_ends) else 1.0)
        factor *= addressed
        if changes and facts.item and method in changes and facts.last_stem.endswith(things):
            factor *= _PROPERTY * (_PROPERTY_ELSEWHERE if displaced else 1.0)
        if displaced and facts.last_stem.endswith(displaced_ends):
            factor /= _DISPLACED
        if identified and facts.parameterized:
            factor *= _ONE_ITEM
        if runs and ends_with(method, facts.tool.path, runs):
            factor *= _QUOTED
        if owner and facts.owner:
            factor *= _OWNER if owner == facts.owner else 1 / _OWNER
        if facts.name_size:
            factor *= 1 + _NAME_COVERAGE * (facts.named & terms).bit_count() / facts.name_size
        if facts.summary_size:
            factor *= 1 + _SUMMARY_COVERAGE * (facts.summarized & terms).bit_count() / facts.summary_size
        scored.append((facts, factor))
    return scored


def _addresses(facts: _Facts, request: Request) -> float:
    """`_ACTED` when a path's resource is the request's verb (`accept`, `attachments` for "attach", `reviews` for
    "who reviewed") and acts on what it names (`/me/events/{id}/accept` for "accept the meeting invite", not
    `/me/messages/{id}/move` for "move the meeting"); `_ADDRESSED` when the resource is the thing the request names
    (`messages` for "read my latest emails", `persistentvolumeclaims` for a claim) or the verb's doer (a
    `horizontalpodautoscaler` for "autoscale"); else 1."""
    named = facts.words
    if not named:
        return 1.0
    beginnings = prefixes(request.acts)
    acted = bool(beginnings) and any(word.startswith(beginnings) for word in named)
    if acted and (not facts.parent or not request.phrase or facts.parent_stem.endswith(suffixes(request.phrase))):
        return _ACTED
    if request.agents and named[-1].endswith(request.agents):  # autoscale -> horizontalpodautoscalers
        return _ACTED
    if request.act_nouns and named[-1].endswith(request.act_nouns):  # bind -> clusterrolebindings
        return _ACTED
    if facts.last_stem.endswith(suffixes(request.things)):
        return (_ADDRESSED if not request.named or facts.last_stem.endswith(suffixes(request.named))
                else _ADDRESSED_BY_SYNONYM)
    return 1.0


_INDEXES: weakref.WeakKeyDictionary[Catalog, ToolIndex] = weakref.WeakKeyDictionary()


def index_of(catalog: Catalog) -> ToolIndex:
    """The one `ToolIndex` of a catalog."""
    index = _INDEXES.get(catalog)
    if index is None:
        index = _INDEXES.setdefault(catalog, ToolIndex(catalog))
    return index
