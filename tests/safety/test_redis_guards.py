"""Breakers and concurrency slots counted in one Redis for several instances (a real redis-server).

These tests drive `SharedGuards` directly, with two clients standing for two instances; its pipeline stage is
tested in test_shared_breaker.py.
"""

from __future__ import annotations

import asyncio

import pytest

from gateway.store.redis_counters import RedisCounters

pytestmark = pytest.mark.anyio


async def test_failures_seen_by_one_instance_open_the_breaker_for_all(redis_url: str) -> None:
    a, b = RedisCounters(redis_url), RedisCounters(redis_url)
    try:
        for _ in range(3):
            lease, _ = await a.guards.enter("shop", reset_after=60, limit=4, wait=1)
            assert lease is not None
            await a.guards.settle("shop", lease, False, failures=3, reset_after=60, limit=4)
        lease, retry_in = await b.guards.enter("shop", reset_after=60, limit=4, wait=1)
    finally:
        await a.aclose()
        await b.aclose()
    assert lease is None and 55 < retry_in <= 60


async def test_a_half_open_breaker_lets_one_probe_through_and_its_success_closes_it(redis_url: str) -> None:
    a, b = RedisCounters(redis_url), RedisCounters(redis_url)
    try:
        lease, _ = await a.guards.enter("shop", reset_after=0.2, limit=4, wait=1)
        await a.guards.settle("shop", lease, False, failures=1, reset_after=0.2, limit=4)
        await asyncio.sleep(0.3)
        entered = await asyncio.gather(*(g.guards.enter("shop", reset_after=0.2, limit=4, wait=0)
                                         for g in (a, b, a, b)))
        probes = [lease for lease, _ in entered if lease is not None]
        assert len(probes) == 1 and all(left > 0 for lease, left in entered if lease is None)
        await a.guards.settle("shop", probes[0], True, failures=1, reset_after=0.2, limit=4)
        after, _ = await b.guards.enter("shop", reset_after=0.2, limit=4, wait=0)
    finally:
        await a.aclose()
        await b.aclose()
    assert after is not None


async def test_concurrency_slots_are_counted_across_instances(redis_url: str) -> None:
    a, b = RedisCounters(redis_url), RedisCounters(redis_url)
    in_flight = most = 0

    async def call(guards: RedisCounters) -> None:
        nonlocal in_flight, most
        lease, _ = await guards.guards.enter("shop", reset_after=60, limit=3, wait=10)
        assert lease is not None
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.05)
        in_flight -= 1
        await guards.guards.settle("shop", lease, True, failures=5, reset_after=60, limit=3)

    try:
        await asyncio.gather(*(call((a, b)[i % 2]) for i in range(12)))
        free, _ = await a.guards.enter("shop", reset_after=60, limit=3, wait=0)
    finally:
        await a.aclose()
        await b.aclose()
    assert most == 3 and free is not None


async def test_a_slot_of_a_vanished_instance_comes_back_when_its_lease_ends(redis_url: str) -> None:
    counters = RedisCounters(redis_url)
    counters.keeper.lease = 0.2
    try:
        held, _ = await counters.guards.enter("shop", reset_after=60, limit=1, wait=0)
        assert held is not None
        counters.keeper.drop(held)  # as a vanished instance: nobody renews its slot
        refused, _ = await counters.guards.enter("shop", reset_after=60, limit=1, wait=0)
        later, _ = await counters.guards.enter("shop", reset_after=60, limit=1, wait=2)
    finally:
        await counters.aclose()
    assert refused is None and later is not None
