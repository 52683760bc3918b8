"""`--oversample` of bench/search_finetune.py (train37, #30): an oversampled API's sets are drawn that many times an
epoch, each draw split anew, and without the option the batches are those the deltas before it trained on."""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

import numpy
import pytest

from bench.search_finetune import BATCH, Pairs, batch_plan, draws_of, oversampled

SIZES = [100, 70, 45]
"""Three sets of requests (rows), of sizes that do not split evenly into batches of `BATCH`."""


def _plan_before_the_option(sizes: list[int], seed: int) -> list[Any]:
    """`finetune`'s batches as the code drew them before `--oversample` (e7ef472), one epoch."""
    generator = numpy.random.default_rng(seed)
    batches = [(i, chunk) for i, size in enumerate(sizes)
               for chunk in numpy.array_split(generator.permutation(size), max(1, size // BATCH))]
    return [batches[i] for i in generator.permutation(len(batches))]


def _same(one: list[Any], other: list[Any]) -> bool:
    if len(one) != len(other):
        return False
    return all(i == j and list(a) == list(b) for (i, a), (j, b) in zip(one, other, strict=True))


def test_without_the_option_the_batches_are_those_before_it() -> None:
    before = _plan_before_the_option(SIZES, 30)
    assert _same(batch_plan(SIZES, 30), before)
    assert _same(batch_plan(SIZES, 30, draws=[1, 1, 1]), before)


def test_an_oversampled_set_is_drawn_that_many_times_an_epoch() -> None:
    plan = batch_plan(SIZES, 30, draws=[1, 2, 1])
    batches = Counter(i for i, _ in plan)
    assert batches == {0: 100 // BATCH, 1: 2 * (70 // BATCH), 2: 45 // BATCH}
    for i, draws in enumerate([1, 2, 1]):
        rows = Counter(int(row) for j, chunk in plan if j == i for row in chunk)
        assert rows == dict.fromkeys(range(SIZES[i]), draws)  # every request of the set, `draws` times


def test_each_draw_is_split_anew() -> None:
    plan = batch_plan(SIZES, 30, draws=[1, 2, 1])
    chunks = [frozenset(int(row) for row in chunk) for i, chunk in plan if i == 1]
    assert len(set(chunks)) == len(chunks)  # the second draw's batches are not the first's again


def _pairs(api: str | None) -> Pairs:
    return Pairs(["a tool"], ["a request"], [[0]], [[0]], api)


def test_draws_follow_the_api_of_each_set() -> None:
    sets = [_pairs("graph"), _pairs("jira"), _pairs("graph"), _pairs(None)]  # requests, written, corpus
    assert draws_of(sets, {"graph": 2}) == [2, 1, 2, 1]
    assert draws_of(sets, {}) is None
    with pytest.raises(AssertionError, match="slack"):
        draws_of(sets, {"slack": 2})


def test_the_option_reads_api_equals_count() -> None:
    assert oversampled("graph=2") == ("graph", 2)
    for wrong in ("graph", "graph=0", "graph=x", "nowhere=2"):
        with pytest.raises(argparse.ArgumentTypeError):
            oversampled(wrong)
