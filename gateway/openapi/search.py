"""Tool search: an embedded full-text index of a spec's operations (SQLite FTS5, BM25), no model, no network.

`build_index(tools)` is run when a spec is compiled; the index travels as bytes (`sqlite3` serialization) in
the spec's `ApiSpec.search_index`, so it is cached with the catalog. `ToolIndex(catalog).search(query)` opens
each api's index once (in memory) and answers the best tools first.

What is indexed, one column each (weights in `_WEIGHTS`): the name split on case, `_`, `/`, `.` and `-`; the
summary; the description's first paragraph (markup out); the tags; the path's segments (parameters included, braces
out); the argument names. Words are stemmed (FTS5's porter tokenizer). A query's words are joined with OR, each
widened by API-aware synonyms (close -> update state, email -> mail message, file -> drive item, ...) and by the
compound of two neighbours ("pay out" -> payout); generic verbs (create, list, update, ...) pick the method instead
of matching (each would match thousands of operations). SQLite ranks the matches by BM25 alone; the best 100 are
then scored: times 1.6 when the method is the one the query's first verb asks for (create -> POST, close -> PATCH,
...), divided by `1 + 0.1 * path depth` (of near-equal candidates the shorter path wins: Graph repeats each
operation under many nested paths), times `1 + the share of the name's words the query holds` (`issues/create` for
"create an issue", not `orgs/create-issue-type`). The constants were chosen on the task sets in
tests/openapi/search_tasks (their `tasks`; the `holdout` lists were written afterwards to check them).
"""

from __future__ import annotations

import html
import re
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..catalog import Catalog, Tool

_WEIGHTS = {"name": 6.0, "summary": 4.0, "description": 1.0, "tags": 2.0, "path": 2.0, "params": 0.5,
            "resource": 3.0}
_COLUMNS = tuple(_WEIGHTS)
_DEPTH_PENALTY = 0.1
_PARAMETER_DEPTH = 1.0
SYNONYMS: dict[str, tuple[str, ...]] = {
    "create": ("add", "new", "post", "make"), "add": ("create", "new", "post"), "new": ("create", "add"),
    "make": ("create",), "open": ("create",), "inbox": ("messages", "mail"), "start": ("create", "run"),
    "delete": ("remove", "destroy"), "remove": ("delete",), "destroy": ("delete",), "drop": ("delete",),
    "show": ("list", "get"), "all": ("list",), "find": ("search", "list"),
    "search": ("find", "list", "query"), "get": ("retrieve", "read", "show"), "fetch": ("get", "retrieve"),
    "read": ("get",), "view": ("get",), "see": ("get", "list"), "which": ("list",),
    "i": ("me", "authenticated user"), "me": ("authenticated user",), "my": ("me", "authenticated user"),
    "mine": ("me", "authenticated user"), "logged": ("authenticated user",),
    "account": ("user", "authenticated user"), "paid": ("pay",), "deploy": ("dispatch",),
    "trigger": ("dispatch", "run"), "link": ("createlink",),
    "share": ("link", "invite"), "approve": ("review",),
    "update": ("edit", "change", "modify", "patch"), "edit": ("update",), "change": ("update",),
    "rename": ("update", "name"), "set": ("update",), "modify": ("update",),
    "close": ("update", "state"), "reopen": ("update", "state"),
    "email": ("mail", "message"), "mail": ("message", "email"),
    "file": ("drive", "item", "content"), "folder": ("drive", "item", "children"),
    "upload": ("content", "put", "create"), "download": ("content", "get"),
    "pay": ("payment", "intent"), "payment": ("intent",),
    "subscribe": ("subscription",), "cancel": ("delete",),
    "meeting": ("event", "calendar"), "schedule": ("event", "calendar", "create"), "calendar": ("event",),
    "teammate": ("member",), "colleague": ("user", "member"), "people": ("user", "member"), "person": ("user",),
    "pr": ("pull",), "repo": ("repository",), "repository": ("repo",),
    "star": ("starred", "starring"),
    "assign": ("assignees", "add"),
    "chat": ("message",), "task": ("todo",), "todo": ("task",), "note": ("onenote", "page"),
    "invite": ("invitation", "add"),
    "branch": ("ref",),
    "workflow": ("actions", "run"), "rerun": ("run",), "webhook": ("hook",),
}
"""Other words for a user's word, API-generic: words (plural forms are stemmed by the index, not listed here) and
phrases ("authenticated user": GitHub's me)."""
_STOP = frozenset("a an the of to for in on at by with from and or is are be am our this that it its as we "
                  "you your please can could would should want need all some any into up out do does did".split())
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SPLIT = re.compile(r"[^A-Za-z0-9]+")
_TAGS = re.compile(r"<[^>]+>")


def words(text: str) -> str:
    """`text` as plain lower-case words: camelCase, `_`, `/`, `.`, `-` and braces all split."""
    return " ".join(part.lower() for chunk in _SPLIT.split(text or "") for part in _CAMEL.split(chunk) if part)


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


def _connect() -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    connection.execute(f"CREATE VIRTUAL TABLE tools USING fts5({', '.join(_COLUMNS)}, tokenize = 'porter unicode61')")
    return connection


def build_index(tools: Iterable[Tool]) -> bytes:
    """The index of `tools` as bytes; row i (1-based rowid) is the i-th tool in the order given."""
    connection = _connect()
    with connection:
        connection.executemany(f"INSERT INTO tools(rowid, {', '.join(_COLUMNS)}) VALUES "
                               f"(?, {', '.join('?' for _ in _COLUMNS)})",
                               ((index, *_row(tool)) for index, tool in enumerate(tools, 1)))
        connection.execute("INSERT INTO tools(tools) VALUES ('optimize')")
    data = connection.serialize()
    connection.close()
    return data


_GENERIC_VERBS = frozenset("create add new make get list show fetch read view retrieve find see update edit change "
                           "modify set delete remove destroy post put what who which when where how".split())
"""Verbs (and question words) that name a method rather than a thing: they pick the method (`intended_methods`)
and count for the name's coverage, but are left out of the full-text match, where each would match thousands of
operations."""


def query_words(query: str) -> list[tuple[str, tuple[str, ...]]]:
    """A query's words, each with its parts when it is a compound: "OneNote" -> `("onenote", ("one", "note"))`,
    "to-do" -> `("todo", ("to", "do"))`, "issue" -> `("issue", ())`. A compound is one word to match (a product,
    "todo"), not its parts, each of which (and their synonyms) would match something else."""
    found: list[tuple[str, tuple[str, ...]]] = []
    kept = " ".join(token for token in query.split() if not _ARGUMENT.search(token))
    for chunk in _QUERY_SPLIT.split(_CONTRACTION.sub("", kept)):
        pieces = [part.lower() for piece in chunk.split("-") for part in _CAMEL.split(piece) if part]
        if len(pieces) > 1 and all(piece.isalpha() for piece in pieces):
            found.append(("".join(pieces), tuple(pieces)))
        else:
            found.extend((piece, ()) for piece in pieces)
    return found


_QUERY_SPLIT = re.compile(r"[^A-Za-z0-9-]+")
_CONTRACTION = re.compile(r"['’](?:s|t|re|ve|ll|d|m)\b", re.IGNORECASE)
"""The customer's, don't, what's: the word without its ending."""
_ARGUMENT = re.compile(r"[0-9]")
"""A query's token with a digit is an argument (an id, a version, an amount: 482, cus_123, v1.2.0, $5, 3pm),
not a word of the operation."""
_PARTICLES = frozenset("out up in off on back".split())
"""Words that make one word with the verb before them: pay out (payout), set up (setup), log in, check out."""


def match_expression(query: str) -> str:
    """The FTS5 query for a user's words: each word or one of its alternatives (`match_terms`), any of them."""
    return _expression(match_terms(query))


def _expression(terms: Iterable[tuple[str, ...]]) -> str:
    return " OR ".join(f"({' OR '.join(chr(34) + a + chr(34) for a in alternatives)})" for alternatives in terms)


def match_terms(query: str) -> list[tuple[str, ...]]:
    """Each word of the query to match with its alternatives: its synonyms; generic verbs are left out unless
    nothing else is left. A compound matches as one word, as the phrase of its parts, or as its last part (the
    head: OneDrive -> drive); two neighbours also as one word ("pay out" -> payout). The verb (the first word)
    takes its senses as a verb: to email is to send mail."""
    given = query_words(query)
    content = [w for w, _ in given if w not in _STOP and w not in _GENERIC_VERBS]
    skip = _STOP | _GENERIC_VERBS if content else _STOP
    verb = _verb(given)
    terms: list[tuple[str, ...]] = []
    for position, (word, parts) in enumerate(given):
        if word in skip:
            continue
        following, following_parts = given[position + 1] if position + 1 < len(given) else ("", ())
        joined = (word + following,) if (not parts and not following_parts and following.isalpha()
                                         and (following not in _STOP or following in _PARTICLES)) else ()
        spelled = (" ".join(parts), *(parts[-1:] if parts[-1] not in _STOP else ())) if parts else ()
        senses = VERB_SENSES.get(word, ()) if position == verb else ()
        own = (word,) if word not in _PRONOUNS else ()
        others = (a for a in (*senses, *SYNONYMS.get(word, ()), *spelled, *joined) if a not in skip | _PRONOUNS)
        if alternatives := tuple(dict.fromkeys((*own, *others))):
            terms.append(alternatives)
    return terms


def _verb(given: list[tuple[str, tuple[str, ...]]]) -> int | None:
    """The position of a request's verb: its first word after "please", "I want to", ..."""
    for position, (word, _) in enumerate(given):
        if word not in _STOP and word not in _PRONOUNS:
            return position
    return None


VERB_SENSES: dict[str, tuple[str, ...]] = {
    "email": ("send", "mail"), "mail": ("send",), "message": ("send",), "text": ("send", "message"),
    "ping": ("send", "message"),
}
"""What a noun means as a request's verb: to email is to send mail."""
_QUESTIONS = frozenset("what who which when where how".split())


_INTENTS = {
    "POST": {"create", "add", "new", "open", "make", "send", "post", "start", "trigger", "run", "rerun", "invite",
             "upload", "email", "reply", "forward", "move", "merge", "approve", "fork", "schedule", "subscribe",
             "register", "issue", "refund", "capture", "confirm", "pay", "transfer", "attach", "submit", "request",
             "assign", "comment", "charge", "void", "share"},
    "DELETE": {"delete", "remove", "destroy", "drop", "unstar", "unassign"},
    "GET": {"list", "show", "get", "find", "search", "fetch", "read", "view", "see", "which", "what", "who",
            "download", "preview", "check"},
    "PATCH": {"update", "edit", "change", "modify", "rename", "set", "close", "reopen", "mark"},
    "PUT": {"update", "replace", "set", "star", "lock", "protect", "upload", "add", "commit", "follow"},
}
_INTENT_BOOST = 1.6


def intended_methods(query: str) -> list[str]:
    """The HTTP methods the query's verb suggests (a request is an imperative: "issue", "comment" or "charge"
    later in it are things, not the verb), or its question word."""
    given = query_words(query)
    verb = _verb(given)
    return [] if verb is None else [method for method, verbs in _INTENTS.items() if given[verb][0] in verbs]


_PRONOUNS = frozenset("i me my mine".split())


_NAME_COVERAGE = 1.0
_SUMMARY_COVERAGE = 2.0
_DEPRECATED = 0.5
_DUPLICATE = 0.7


def _stems(text: str) -> set[str]:
    """Crude stems of the words of `text` (quotes and OR out; plural s off), to compare names with a query."""
    return {word[:-1] if word.endswith("s") and len(word) > 3 else word
            for word in re.findall(r"[a-z0-9]+", text.lower()) if word not in ("or", "and")}


def _content_stems(text: str) -> frozenset[str]:
    return frozenset(_stems(" ".join(word for word in words(text).split() if word not in _STOP)))


@dataclass(slots=True, frozen=True)
class SearchHit:
    tool: Tool
    score: float
    """Higher is better (BM25 with field weights, times the method, depth and name signals)."""


@dataclass(slots=True, frozen=True, eq=False)
class _Facts:
    """What the signals read of one tool, computed once per api when its index is opened."""

    tool: Tool
    depth: float
    """`1 + _DEPTH_PENALTY * (segments + _PARAMETER_DEPTH * parameters)`: the divisor of a long path."""
    named: frozenset[str]
    """The stems of the name's words, stop words out."""
    summarized: frozenset[str]
    """The stems of the summary's words, stop words out."""
    kind: tuple[str | bool, ...]
    """The method, whether the path ends with a parameter (one item or all), the summary and the last resource:
    Graph answers one operation under many nested paths, with one summary (`/me/messages/{id}/forward`,
    `/me/mailFolders/{id}/messages/{id}/forward`, `/users/{id}/messages/...`: "Invoke action forward")."""
    prior: float
    """`_DEPRECATED` for a deprecated operation, else 1."""


def _facts(tool: Tool) -> _Facts:
    segments = [segment for segment in tool.path.split("/") if segment]
    parameters = sum(segment.startswith("{") for segment in segments)
    depth = 1 + _DEPTH_PENALTY * (len(segments) - parameters + _PARAMETER_DEPTH * parameters)
    addressed = [segment for segment in segments if segment not in _PATH_SUFFIXES][-1:] or [""]
    kind: tuple[str | bool, ...] = (tool.method, addressed[0].startswith("{"), words(tool.summary) or tool.name,
                                    *resources(tool.path)[:1])
    return _Facts(tool, depth, _content_stems(tool.operation_id or tool.name), _content_stems(tool.summary), kind,
                  _DEPRECATED if tool.deprecated else 1.0)


@dataclass(slots=True)
class _Opened:
    connection: sqlite3.Connection
    facts: list[_Facts]
    """Row i (rowid i + 1) of the index."""
    updates: bool
    """Whether the api has PATCH or PUT operations (Stripe's has none: it updates with POST)."""


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
            self._open[api] = _Opened(connection, [_facts(tool) for tool in tools],
                                      any(tool.method in _UPDATES for tool in tools))
            return self._open[api]

    def search(self, query: str, *, limit: int = 10, apis: Iterable[str] | None = None,
               allowed: Callable[[Tool], bool] | None = None) -> list[SearchHit]:
        """The best `limit` tools for `query` (of `apis`, default all; only those `allowed` passes).

        SQLite ranks the matches by BM25 alone (reading any other column of every match would cost more than the
        ranking); the best `_CANDIDATES` (that `allowed` passes) are then scored with the method, depth and name
        signals here."""
        matched = match_terms(query)
        if not matched or limit < 1:
            return []
        expression = _expression(matched)
        methods = set(intended_methods(query))
        terms = _stems(" ".join(a for alternatives in matched for a in alternatives)) | _stems(
            " ".join(w for word in words(query).split() for w in (word, *SYNONYMS.get(word, ()))))
        scored: list[tuple[_Facts, float]] = []
        for api in list(apis) if apis is not None else self.apis:
            opened = self._api(api)
            asked = methods | {"POST"} if methods & _UPDATES and not opened.updates else methods
            candidates = self._candidates(opened, expression, allowed, asked)
            scored.extend(_collapse([(facts, -score * _signals(facts, asked, terms)) for facts, score in candidates]))
        scored.sort(key=lambda pair: -pair[1])
        return [SearchHit(facts.tool, round(score, 4)) for facts, score in scored[:limit]]

    def _candidates(self, opened: _Opened, expression: str, allowed: Callable[[Tool], bool] | None,
                    asked: set[str]) -> list[tuple[_Facts, float]]:
        """The best `_CANDIDATES` matches by BM25 alone, then the best `_METHOD_CANDIDATES` of the asked methods
        among the next (lest the others crowd them out: "delete this email" matches hundreds of mail operations);
        of those `allowed` passes (then every match is ranked, and read until enough are found)."""
        facts = opened.facts
        chosen: list[tuple[_Facts, float]] = []
        of_method = 0
        with self._lock:
            for rowid, score in opened.connection.execute(_SQL, (expression, _POOL if allowed is None else -1)):
                candidate = facts[rowid - 1]
                if allowed is not None and not allowed(candidate.tool):
                    continue
                if len(chosen) < _CANDIDATES:
                    chosen.append((candidate, score))
                elif of_method == _METHOD_CANDIDATES or not asked:
                    break
                elif candidate.tool.method in asked:
                    chosen.append((candidate, score))
                    of_method += 1
        return chosen


_CANDIDATES = 100
_METHOD_CANDIDATES = 50
_POOL = 400
_SQL = (f"SELECT rowid, bm25(tools, {', '.join(str(w) for w in _WEIGHTS.values())}) AS score FROM tools "
        "WHERE tools MATCH ? ORDER BY score LIMIT ?")


def _collapse(scored: list[tuple[_Facts, float]]) -> list[tuple[_Facts, float]]:
    """Of the candidates of one kind (one operation under several paths), the one with the shortest path takes
    the best score of them all; the others fall behind it, times `_DUPLICATE`."""
    best: dict[tuple[str | bool, ...], tuple[_Facts, float]] = {}
    for facts, score in scored:
        held = best.get(facts.kind)
        if held is None:
            best[facts.kind] = (facts, score)
        else:
            shortest = facts if (facts.depth, -score) < (held[0].depth, -held[1]) else held[0]
            best[facts.kind] = (shortest, max(score, held[1]))
    return [(facts, best[facts.kind][1] if best[facts.kind][0] is facts else score * _DUPLICATE)
            for facts, score in scored]


def _signals(facts: _Facts, methods: set[str], terms: set[str]) -> float:
    """The factor on a candidate's BM25: the method the query asks for, a short path, a name made of the query's
    words (`issues/create` for "create an issue", over `orgs/create-issue-type`)."""
    factor = _INTENT_BOOST if facts.tool.method in methods else 1.0
    named, summarized = facts.named, facts.summarized
    coverage = len(named & terms) / len(named) if named else 0.0
    summary = len(summarized & terms) / len(summarized) if summarized else 0.0
    return factor * facts.prior / facts.depth * (1 + _NAME_COVERAGE * coverage) * (1 + _SUMMARY_COVERAGE * summary)


_INDEXES: weakref.WeakKeyDictionary[Catalog, ToolIndex] = weakref.WeakKeyDictionary()


def index_of(catalog: Catalog) -> ToolIndex:
    """The one `ToolIndex` of a catalog."""
    index = _INDEXES.get(catalog)
    if index is None:
        index = _INDEXES.setdefault(catalog, ToolIndex(catalog))
    return index
