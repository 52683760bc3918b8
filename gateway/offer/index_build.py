"""Building a spec's search index (`build_index`): one FTS5 row per operation, and the facts the ranking signals
read (gateway/offer/index.py says what each column and fact is for)."""

from __future__ import annotations

import collections
import html
import re
import sqlite3
from collections.abc import Iterable, Mapping

from ..catalog import Tool
from .answer_text import answer_text
from .parameter_text import parameter_texts
from .query import STOP, stems, words
from .tag_table import build_tags
from .views import first_sentences

COLUMN_WEIGHTS = {"name": 6.0, "summary": 4.0, "description": 2.0, "tags": 2.0, "path": 2.0, "params": 0.5,
            "resource": 3.0, "described": 1.0, "enums": 0.5}
COLUMNS = tuple(COLUMN_WEIGHTS)
_DEPTH_PENALTY = 0.1
_DEPRECATED = 0.5
"""The prior of a deprecated operation."""
_PARAMETER_DEPTH = 1.0
_TAGS = re.compile(r"<[^>]+>")


def _first_paragraph(text: str) -> str:
    """The first paragraph of a tool's description, markup out: for a tool with a summary, the summary again (the
    compiler writes it first), which weighs the summary's words twice; the rules were written so, and reading the
    spec's own description in its place or beside it did not find more (bench/README.md, "What BM25 reads of a
    tool's description")."""
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


def summary_of(tool: Tool) -> str:
    """The tool's summary, or the first sentence of its description when it has none (Stripe, Slack and Kubernetes
    write none)."""
    return tool.summary or first_sentences(_first_paragraph(tool.description), 200)


def _row(tool: Tool, arguments: tuple[str, str]) -> tuple[str, ...]:
    return (
        words(tool.operation_id or tool.name),
        words(summary_of(tool)),
        words(_first_paragraph(tool.description)),
        words(" ".join(tool.tags)),
        words(tool.path),
        words(" ".join(argument.name for argument in tool.arguments)),
        words(next(iter(resources(tool.path)), "")),
        *(words(text) for text in arguments),
    )


def _facts_rows(tools: list[Tool]) -> tuple[dict[str, int], list[tuple[object, ...]]]:
    """What the ranking signals read of each tool, computed when its index is built: its method, path depth,
    prior (`_DEPRECATED` when deprecated), the stems of its name and of its summary as bit masks over the api's
    vocabulary (the most frequent stems take the lowest bits, so that most masks stay small), and its kind."""
    stemmed = [(_content_stems(tool.operation_id or tool.name), _content_stems(summary_of(tool))) for tool in tools]
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
        named_by = resources(tool.path)
        resource = words(named_by[0]) if named_by else ""
        parent = (words(named_by[1]).split() or [""])[-1] if len(named_by) > 1 else ""
        rows.append((index, tool.method, depth, _DEPRECATED if tool.deprecated else 1.0, addressed[0].startswith("{"),
                     _bytes(sum(1 << vocabulary[stem] for stem in named)), len(named),
                     _bytes(sum(1 << vocabulary[stem] for stem in summarized)), len(summarized),
                     kinds.setdefault(kind, len(kinds)), resource, parent,
                     _owner_of(segments, [argument.name for argument in tool.arguments])))
    return vocabulary, rows


_NAMING_A_USER = frozenset("accountId account_id username userId user_id user".split())
"""Arguments that name whose things a `/user/...` path answers (it is then anyone's, not the caller's)."""


def _owner_of(segments: list[str], arguments: list[str]) -> str:
    """Whose things a path answers: "other" (a user named by a parameter: `/users/{user-id}/...`,
    `/users/{username}/repos`, or by an argument: Jira's `/user/groups?accountId=`), "self" (`/me/...`, GitHub's
    `/user/...`, Jira's `/myself`), else ""."""
    if any(segment.startswith("{") and "user" in segment.lower() for segment in segments):
        return "other"
    if "user" in segments and any(name in _NAMING_A_USER for name in arguments):
        return "other"
    return "self" if any(segment in ("me", "user", "myself") for segment in segments) else ""


def _bytes(mask: int) -> bytes:
    return mask.to_bytes((mask.bit_length() + 7) // 8, "little")


def _connect() -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    connection.execute(f"CREATE VIRTUAL TABLE tools USING fts5({', '.join(COLUMNS)}, tokenize = 'porter unicode61')")
    connection.execute("CREATE TABLE facts (rowid INTEGER PRIMARY KEY, method TEXT, depth REAL, prior REAL, "
                       "item INTEGER, named BLOB, name_size INTEGER, summarized BLOB, summary_size INTEGER, "
                       "kind INTEGER, resource TEXT, parent TEXT, owner TEXT)")
    connection.execute("CREATE TABLE vocabulary (stem TEXT PRIMARY KEY, bit INTEGER)")
    # what the operations answer (`gateway.offer.answer_text`); contentless: BM25 reads the words' counts, never the
    # text itself
    connection.execute("CREATE VIRTUAL TABLE answers USING fts5(fields, content = '', tokenize = 'porter unicode61')")
    return connection


_MIN_ROWS = 64
"""An index of fewer tools is padded to this many rows that no request matches, each as long as its tools' average.
FTS5 weighs a word by how few rows hold it, and by 1e-6 (its floor) when half of them or more do: in an api of one
or two tools every word weighed 1e-6 and its tools scored ~1e-05, under any match of a bigger api searched beside it
(an agent of GitHub and the one-tool weather api: "weather forecast" put a GitHub tool first). Padded, a small api's
word weighs as a word held by as few of 64 operations would. An api of 64 tools or more is indexed as before."""
_NOTHING = "\ue000"
"""A private-use character: one token to FTS5's tokenizer (whose token characters are letters, digits and private
use), never a request's word (`gateway.offer.query.words` keeps ASCII letters and digits)."""


def build_index(tools: Iterable[Tool], tags: Mapping[str, str] | None = None) -> bytes:
    """The index of `tools` as bytes; row i (1-based rowid) is the i-th tool in the order given (then, in an api of
    fewer than `_MIN_ROWS` tools, rows of no tool). `tags`, the descriptions of the spec's tags by name
    (`ApiSpec.tag_descriptions`), are read once each, in a table of their own (`gateway.offer.tag_table`)."""
    connection = _connect()
    listed = list(tools)
    vocabulary, facts = _facts_rows(listed)
    rows = [_row(tool, arguments) for tool, arguments in zip(listed, parameter_texts(listed), strict=True)]
    if rows and len(rows) < _MIN_ROWS:
        length = round(sum(len(" ".join(row).split()) for row in rows) / len(rows))
        padding = tuple(" ".join([_NOTHING] * length) if column == "params" else "" for column in COLUMNS)
        rows += [padding] * (_MIN_ROWS - len(rows))
    answered = [answer_text(tool) for tool in listed]
    if answered and len(answered) < _MIN_ROWS:  # as the tools' rows are, for the same reason
        length = round(sum(len(text.split()) for text in answered) / len(answered))
        answered += [" ".join([_NOTHING] * length)] * (_MIN_ROWS - len(answered))
    with connection:
        connection.executemany(f"INSERT INTO tools(rowid, {', '.join(COLUMNS)}) VALUES "
                               f"(?, {', '.join('?' for _ in COLUMNS)})",
                               ((index, *row) for index, row in enumerate(rows, 1)))
        connection.execute("INSERT INTO tools(tools) VALUES ('optimize')")
        connection.executemany("INSERT INTO facts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", facts)
        connection.executemany("INSERT INTO vocabulary VALUES (?, ?)", vocabulary.items())
        if answered:
            connection.executemany("INSERT INTO answers(rowid, fields) VALUES (?, ?)", enumerate(answered, 1))
            connection.execute("INSERT INTO answers(answers) VALUES ('optimize')")
        build_tags(connection, listed, tags or {})
    data = connection.serialize()
    connection.close()
    return data



def _content_stems(text: str) -> frozenset[str]:
    return frozenset(stems(" ".join(word for word in words(text).split() if word not in STOP)))


