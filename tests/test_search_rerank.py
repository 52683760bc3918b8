"""bench/search_rerank.py: the reranker's order over the fused first places, its training groups and sample, and the
parts it may read (bench/README.md, "A second stage over the fused first places")."""

from __future__ import annotations

from bench import search_rerank
from bench.search_rerank import READ, TEST, TRAIN, groups, reordered, sampled


def test_the_parts_stop_at_round35_and_the_test_sets_are_never_trained_on() -> None:
    assert READ[-1] == "round35" and not {"round36", "round37"} & set(READ)
    assert TRAIN[-1] == "round32" and TEST == ("round33", "round34", "round35")
    assert not set(TEST) & set(TRAIN)


def test_the_sum_of_places_moves_an_entry_the_reranker_puts_first_up_and_keeps_ties_to_the_fused_place() -> None:
    scores = [0.5, 0.4, 0.3, 0.2, 0.9, 0.1]  # the 5th by fused place is the reranker's first
    # fused place + reranker place: 0: 0+1, 1: 1+2, 4: 4+0, 2: 2+3, 3: 3+4, 5: 5+5
    assert reordered(6, scores, by_sum=True) == [0, 1, 4, 2, 3, 5]
    assert reordered(6, scores, by_sum=False) == [4, 0, 1, 2, 3, 5]
    # only the first `count` places move; the rest stay where the fusion put them
    assert reordered(3, scores, by_sum=False) == [0, 1, 2, 3, 4, 5]
    assert reordered(3, [0.1, 0.2, 0.3, 0.9, 0.9], by_sum=True) == [0, 1, 2, 3, 4]  # 0+2, 1+1, 2+0: ties to fused


def _row(api: str, right: list[bool]) -> dict[str, object]:
    return {"api": api, "part": "round20", "q": f"{api} {len(right)}",
            "entries": [{"name": f"t{i}", "text": f"tool {i}", "right": r} for i, r in enumerate(right)]}


def test_a_request_trains_with_its_highest_right_entry_and_four_wrong_ones_or_not_at_all() -> None:
    rows = [_row("github", [False, True, False, True, False, False, False]),
            _row("stripe", [False] * 20),  # no right entry among the 20
            _row("graph", [True, False, False, False])]  # three wrong only
    [(api, texts)] = groups(rows)
    assert api == "github" and len(texts) == 5
    assert texts[0] == "github 7 [SEP] tool 1"
    assert texts[1:3] == ["github 7 [SEP] tool 0", "github 7 [SEP] tool 2"]
    assert set(texts[3:]) <= {f"github 7 [SEP] tool {i}" for i in (4, 5, 6)}


def test_the_sample_takes_the_same_share_of_each_api() -> None:
    found = [("github", ["g"])] * 40 + [("here", ["h"])] * 10
    kept = sampled(found, 25)
    assert sum(api == "github" for api, _ in kept) == 20 and sum(api == "here" for api, _ in kept) == 5
    assert search_rerank.K == 20
