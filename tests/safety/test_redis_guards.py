"""Breakers and concurrency slots counted in one Redis for several instances (a real redis-server).

These tests drive `SharedGuards` directly, with two clients standing for two instances; its pipeline stage is
tested in test_shared_breaker.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import redis

from gateway.store.redis_counters import RedisCounters
from gateway.store.redis_slot_queue import CHANNEL, PREFIX
from gateway.store.redis_slots import QueueFull

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


Waiters = list[asyncio.Task[tuple[str | None, float]]]


@asynccontextmanager
async def _one_slot_held(redis_url: str, group: str) -> AsyncIterator[tuple[RedisCounters, redis.Redis, str, Waiters]]:
    """The shop api's one slot taken by `group`: (the guards' counters, a client reading Redis, the slot's lease,
    the waiters the test starts, cancelled at the end)."""
    counters = RedisCounters(redis_url)
    peek = redis.Redis.from_url(redis_url)
    waiters: Waiters = []
    try:
        holder, _ = await counters.guards.enter("shop", reset_after=60, limit=1, wait=0, group=group)
        assert holder is not None
        yield counters, peek, holder, waiters
    finally:
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
        await counters.aclose()
        peek.close()


async def _until_queued(peek: redis.Redis, count: int) -> None:
    for _ in range(12000):  # a hang guard (60 s), not a measure
        if peek.zcard(PREFIX + "queue:shop") == count:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"never {count} waiting")


async def test_a_hand_over_takes_the_fewest_holders_first_waiter_without_walking_the_waiters(redis_url: str) -> None:
    """300 calls of 10 clients wait for one slot: giving it back hands it to the first waiter of a client holding
    none, in a bounded number of Redis commands. The hand-over walked the whole queue, a ZSCORE a waiter, once per
    slot handed over (Redis's own command counts: the scripts' commands are counted there)."""
    async with _one_slot_held(redis_url, "holder") as (counters, peek, holder, waiters):
        for n in range(300):
            waiters.append(asyncio.create_task(counters.guards.enter(
                "shop", reset_after=60, limit=1, wait=60, group=f"client-{n % 10}", waiting=None)))
            if n % 20 == 0:  # the first comes first; and the client's connections are not all taken at once
                await _until_queued(peek, n + 1)
        await _until_queued(peek, 300)
        peek.config_resetstat()
        await counters.guards.settle("shop", holder, True, failures=5, reset_after=60, limit=1)
        stats = peek.info("commandstats")
        served, _ = await waiters[0]
        assert not any(w.done() for w in waiters[1:])
        await counters.guards.settle("shop", served, True, failures=5, reset_after=60, limit=1)
    assert served is not None
    commands = {name.removeprefix("cmdstat_"): int(row["calls"]) for name, row in stats.items()}
    assert commands.get("zscore", 0) < 10, commands
    assert sum(commands.values()) < 60, commands


async def test_one_clients_waiting_calls_are_capped_and_anothers_still_queue(redis_url: str) -> None:
    counters = RedisCounters(redis_url)
    try:
        holder, _ = await counters.guards.enter("shop", reset_after=60, limit=1, wait=0, group="a")
        waiting = [asyncio.create_task(counters.guards.enter("shop", reset_after=60, limit=1, wait=60, group="a",
                                                             waiting=2)) for _ in range(2)]
        await _until_queued(redis.Redis.from_url(redis_url), 2)
        with pytest.raises(QueueFull) as full:
            await counters.guards.enter("shop", reset_after=60, limit=1, wait=60, group="a", waiting=2)
        other = asyncio.create_task(counters.guards.enter("shop", reset_after=60, limit=1, wait=60, group="b",
                                                          waiting=2))
        await _until_queued(redis.Redis.from_url(redis_url), 3)
        lease: str | None = holder
        for _ in range(3):  # each slot given back goes on to the next waiter
            await counters.guards.settle("shop", lease, True, failures=5, reset_after=60, limit=1)
            done, _ = await asyncio.wait([t for t in (*waiting, other) if not t.done()],
                                         return_when=asyncio.FIRST_COMPLETED)
            lease = done.pop().result()[0]
        await counters.guards.settle("shop", lease, True, failures=5, reset_after=60, limit=1)
        served = [t.result()[0] for t in (*waiting, other)]
    finally:
        await counters.aclose()
    assert full.value.cap == 2 and all(served)


async def test_a_waiter_taken_by_an_instance_that_knows_no_lines_is_passed_over(redis_url: str) -> None:
    """During a rolling upgrade an instance of the version before takes a waiter out of the queue as it did (the
    queue and the tickets only): the hand-over meets that ticket at the head of its client's line, drops it and
    hands the slot to the next waiter instead of failing (a Lua error is every call's 503 on that api)."""
    async with _one_slot_held(redis_url, "a") as (counters, peek, holder, waiters):
        for n in range(2):
            waiters.append(asyncio.create_task(counters.guards.enter("shop", reset_after=60, limit=1, wait=60,
                                                                     group="b")))
            await _until_queued(peek, n + 1)
        (taken, _) = peek.zrange(PREFIX + "queue:shop", 0, -1)
        peek.zrem(PREFIX + "queue:shop", taken)  # what the version before's hand-over does
        peek.zrem(PREFIX + "tickets:shop", taken)
        await counters.guards.settle("shop", holder, True, failures=5, reset_after=60, limit=1)
        served, _ = await waiters[1]
        left = peek.zcard(PREFIX + "lines:shop")
    assert served is not None and left == 0


async def test_a_waiter_queued_by_an_instance_that_knows_no_lines_is_handed_a_slot_in_its_turn(
        redis_url: str) -> None:
    """During a rolling upgrade an instance of the version before queues its waiter as it did (the queue and the
    tickets only, no line, no head: what its entry script wrote). The hand-over of an instance of this version
    finds it, hands it the freed slot before the waiter of a third instance that came after it, and publishes the
    hand-over on the channel that version's waiter listens on; it was never handed one (the slot went to the later
    waiter, and the earlier one waited until its call timed out)."""
    a, b = RedisCounters(redis_url), RedisCounters(redis_url)
    peek = redis.Redis.from_url(redis_url)
    heard = peek.pubsub()
    heard.subscribe(CHANNEL)
    later: asyncio.Task[tuple[str | None, float]] | None = None
    try:
        holder, _ = await a.guards.enter("shop", reset_after=60, limit=1, wait=0, group="a")
        seconds, micros = peek.time()
        now = seconds + micros / 1_000_000
        earlier = "00112233445566ffolder"  # 16 hex digits and its caller group, as that version made tickets
        peek.zadd(PREFIX + "queue:shop", {earlier: now})  # what the version before's entry script writes
        peek.zadd(PREFIX + "tickets:shop", {earlier: now + 30})
        later = asyncio.create_task(b.guards.enter("shop", reset_after=60, limit=1, wait=60, group="b"))
        await _until_queued(peek, 2)
        await a.guards.settle("shop", holder, True, failures=5, reset_after=60, limit=1)
        handed = peek.zscore(PREFIX + "slots:shop", earlier)
        told = [m["data"] for m in iter(lambda: heard.get_message(timeout=1), None) if m["type"] == "message"]
        waiting = not later.done()
        await a.guards.settle("shop", earlier, True, failures=5, reset_after=60, limit=1)  # its call ends
        served, _ = await later
    finally:
        if later is not None:
            later.cancel()
            await asyncio.gather(later, return_exceptions=True)
        await a.aclose()
        await b.aclose()
        heard.close()
        peek.close()
    assert handed is not None, "the earlier waiter was not handed the slot"
    assert f"ok 0 {earlier}".encode() in told
    assert waiting and served is not None
