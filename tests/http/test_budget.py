"""gateway.http.budget: retries may add at most a fifth to an api's recent calls, plus a small reserve."""

from __future__ import annotations

import pytest
from executor_helpers import executor_for, make_tool
from recording_server import Reply

from gateway.http.budget import DEFAULT_MIN_PER_SECOND, DEFAULT_RATIO, DEFAULT_WINDOW, RetryBudget


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_retries_are_earned_by_calls_on_top_of_the_reserve() -> None:
    clock = _Clock()
    budget = RetryBudget(ratio=0.2, min_per_second=1.0, window=10.0, clock=clock)  # reserve: 10 retries
    for _ in range(50):
        budget.record_call()
    granted = 0
    while budget.try_retry():
        granted += 1
    assert granted == 10 + 10  # the reserve plus a fifth of 50 calls
    budget.record_call()
    assert not budget.try_retry()  # one call earns a fifth of a retry, not a whole one
    for _ in range(4):
        budget.record_call()
    assert budget.try_retry()


def test_the_window_forgets_old_calls_and_retries() -> None:
    clock = _Clock()
    budget = RetryBudget(ratio=0.5, min_per_second=0.0, window=10.0, clock=clock)
    for _ in range(10):
        budget.record_call()
    assert sum(budget.try_retry() for _ in range(10)) == 5
    clock.now += 5
    assert not budget.try_retry()  # still inside the window: spent
    clock.now += 6
    assert not budget.try_retry()  # the calls that earned retries are forgotten too
    budget.record_call()
    budget.record_call()
    assert budget.try_retry()


@pytest.mark.anyio
async def test_a_failing_api_is_not_stormed_by_retries(upstream) -> None:
    # Every GET answers 503 with `Retry-After: 0`: each call alone would be sent three times. Across 300
    # calls the api's budget lets through only the reserve plus a fifth of the calls.
    upstream.route("/items", Reply(503, "down", headers={"Retry-After": "0"}))
    tool = make_tool()
    executor = executor_for(upstream.url, tool)
    calls = 300
    try:
        results = [await executor.execute(tool, {}) for _ in range(calls)]
    finally:
        await executor.aclose()
    assert all(r.status == 503 and r.error_type == "upstream_error" for r in results)  # each told to the model
    allowed = DEFAULT_MIN_PER_SECOND * DEFAULT_WINDOW + DEFAULT_RATIO * calls
    assert len(upstream.requests) == calls + int(allowed)  # 460; without the budget: 3 × 300 = 900
