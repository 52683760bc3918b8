"""Fusing BM25's ranking with an embedding model's (`gateway.offer.fusion`): by scores, each scaled by its own list.

BM25's rankings are the real index's over Slack's spec from ../shared/corpus (174 tools); the model's ranking is a
fixed stand-in (tools and cosines written here), so each test says what the fusion does with two given lists.
"""

from __future__ import annotations

import sqlite3

from gateway.catalog import Catalog, Tool
from gateway.config.embeddings_endpoint import PACKAGED_WEIGHT
from gateway.offer.fusion import HELD_PLACES, Ranked, fuse, trusted
from gateway.offer.index import index_of
from gateway.offer.query import expression_of, read
from gateway.offer.signals import WEIGHTS


def _bm25(catalog: Catalog, query: str) -> Ranked:
    """BM25's first 50, as tool search hands them to the fusion."""
    return [(hit.tool, hit.score) for hit in index_of(catalog).search(query, limit=50)]


def _tool(catalog: Catalog, name: str) -> Tool:
    return next(tool for tool in catalog if tool.name == name)


def _names(ranked: Ranked) -> list[str]:
    return [tool.name for tool, _ in ranked]


def test_a_tool_only_the_model_ranks_first_reaches_the_first_five(slack: Catalog) -> None:
    # BM25 reads "channel" and "notifications": fifty channel operations, one about as good as the next, and not the
    # snooze ("do not disturb") that the request means
    bm25 = _bm25(slack, "hush the channel notifications for an hour")
    assert len(bm25) == 50 and "dnd_setSnooze" not in _names(bm25)
    assert bm25[9][1] > 0.8 * bm25[0][1]  # flat: its tenth scores over 0.8 of its first
    # the model: the snooze first by a wide margin, then BM25's tools in BM25's order
    similar = [(_tool(slack, "dnd_setSnooze"), 0.62), *((tool, 0.40 - 0.002 * at) for at, (tool, _) in
                                                        enumerate(bm25[:49]))]
    fused = fuse(bm25, similar, PACKAGED_WEIGHT)
    assert "dnd_setSnooze" in _names(fused)[:5]  # by places (reciprocal rank) it came 50th: w/61 under 1/(60+k) +
    # w/(61+k) for every k of BM25's first 49


def test_a_bm25_sure_of_its_first_keeps_it_against_the_models_close_first(slack: Catalog) -> None:
    bm25 = _bm25(slack, "which people are in the channel")
    assert bm25[0][0].name == "conversations_members" and bm25[1][1] < 0.7 * bm25[0][1]  # far ahead of its second
    second = bm25[1][0]
    similar = [(second, 0.55), (bm25[0][0], 0.53), *((tool, 0.45 - 0.002 * at) for at, (tool, _) in
                                                     enumerate(bm25[2:50]))]
    fused = fuse(bm25, similar, PACKAGED_WEIGHT)
    assert _names(fused)[:2] == ["conversations_members", second.name]


def test_the_scores_are_bm25s_over_its_first_plus_the_weighted_scaled_cosine(slack: Catalog) -> None:
    a, b, c = (_tool(slack, name) for name in ("chat_postMessage", "chat_update", "chat_delete"))
    fused = dict((tool.name, score) for tool, score in fuse([(a, 8.0), (b, 2.0)], [(c, 0.9), (b, 0.7), (a, 0.5)], 2.0))
    assert fused == {"chat_postMessage": 1.0, "chat_update": 0.25 + 1.0, "chat_delete": 2.0}
    # the model alone, BM25 alone: each list's own order
    assert _names(fuse([], [(c, 0.9), (b, 0.7), (a, 0.5)])) == ["chat_delete", "chat_update", "chat_postMessage"]
    assert fuse([(a, 8.0), (b, 2.0)], []) == [(a, 1.0), (b, 0.25)]
    # a list of one tool (a one-tool api): it is as good as the first, not nothing
    assert fuse([], [(c, 0.2)], 1.5) == [(c, 1.5)]


def test_bm25s_order_stands_where_it_put_a_lower_score_first(slack: Catalog) -> None:
    a, b, c = (_tool(slack, name) for name in ("chat_postMessage", "chat_update", "chat_delete"))
    # the index caps one family among its first five places, so a place's score can exceed the one above it
    fused = fuse([(a, 4.0), (b, 2.0), (c, 3.0)], [])
    assert fused == [(a, 1.0), (b, 0.5), (c, 0.5)]


def _held(catalog: Catalog, query: str, bm25: Ranked) -> float:
    return index_of(catalog).held(query, [tool for tool, _ in bm25[:HELD_PLACES]])


def test_the_share_held_is_of_the_request_s_terms_bm25s_first_three_places_hold(slack: Catalog) -> None:
    hush = "hush the channel notifications for an hour"
    bm25 = _bm25(slack, hush)
    # conversations_archive, _leave, _rename: "channel" is theirs, not "hush", "notifications" nor "hour"
    assert _held(slack, hush, bm25) == 0.25
    assert _held(slack, "which people are in the channel", _bm25(slack, "which people are in the channel")) == 1.0
    first = [tool for tool, _ in bm25[:HELD_PLACES]]
    assert index_of(slack).held(hush, []) == 1.0 and index_of(slack).held("the", first) == 1.0  # nothing to read
    # the kept phrase rows answer what FTS5 answers of each term over those rows (the spec's index, opened apart)
    api = first[0].api
    connection = sqlite3.connect(":memory:")
    connection.deserialize(slack.apis[api].search_index)
    rowids = [next(at for at, tool in enumerate(slack.for_api(api), 1) if tool is held) for held in first]
    statement = f"SELECT 1 FROM tools WHERE tools MATCH ? AND rowid IN ({', '.join('?' * len(rowids))})"
    terms = read(hush).terms
    held = sum(1 for group in terms if connection.execute(statement, (expression_of([group]), *rowids)).fetchone())
    assert held / len(terms) == 0.25


def test_the_model_is_trusted_more_where_bm25s_first_places_hold_little_of_the_request(slack: Catalog) -> None:
    hush = "hush the channel notifications for an hour"
    bm25 = _bm25(slack, hush)
    # the model: the snooze first, BM25's tools close under it in BM25's order
    similar = [(_tool(slack, "dnd_setSnooze"), 0.62), *((tool, 0.50 - 0.002 * at) for at, (tool, _) in
                                                        enumerate(bm25[:49]))]
    assert "dnd_setSnooze" not in _names(fuse(bm25, similar, PACKAGED_WEIGHT))[:5]
    weight = trusted(PACKAGED_WEIGHT, _held(slack, hush, bm25), WEIGHTS.held)
    assert weight == PACKAGED_WEIGHT / 0.25 ** WEIGHTS.held
    assert _names(fuse(bm25, similar, weight))[0] == "dnd_setSnooze"
    # where BM25's first places hold every word of the request, the fusion is as it was
    people = "which people are in the channel"
    assert trusted(PACKAGED_WEIGHT, _held(slack, people, _bm25(slack, people)), WEIGHTS.held) == PACKAGED_WEIGHT
    assert trusted(PACKAGED_WEIGHT, 0.0, WEIGHTS.held) == trusted(PACKAGED_WEIGHT, 0.05, WEIGHTS.held)  # the least
