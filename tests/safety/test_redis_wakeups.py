"""The hand-over messages on Redis pub/sub that wake the waiters for an api's slot (a real redis-server)."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from gateway.store.redis_counters import RedisCounters
from gateway.store.redis_slot_queue import CHANNEL

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("stray", [b"hello", b"ok soon abc", "\u00e9t\u00e9".encode("latin-1")])
async def test_a_stray_message_on_the_channel_does_not_deafen_the_waiters(redis_url: str, stray: bytes) -> None:
    """redteam44: a message on the channel that is not one of the scripts' ("hello": a server's channels are shared
    by every client of every database) raised in the subscription's task and ended it: a waiter was no longer woken
    by its hand-over and got its slot only by looking for itself (a third of a lease, 10 s, later), or gave up
    first. The waiter here may wait 5 s: it gets the slot handed to it after the stray message."""
    holder, waiter = RedisCounters(redis_url), RedisCounters(redis_url)
    publisher = aioredis.from_url(redis_url)
    try:
        held, _ = await holder.guards.enter("stray", reset_after=60, limit=1, wait=1)
        assert held is not None
        waiting = asyncio.create_task(waiter.guards.enter("stray", reset_after=60, limit=1, wait=5))
        while not await publisher.zcard("gateway:{guards}:queue:stray"):  # the waiter's ticket is queued
            await asyncio.sleep(0.01)
        await publisher.publish(CHANNEL, stray)
        await publisher.publish(CHANNEL, b"ok 0 " + b"0" * 16 + b"nobody")  # a hand-over to nobody here: ignored
        await holder.guards.settle("stray", held, True, failures=3, reset_after=60, limit=1)
        handed, _ = await waiting
        assert handed is not None
        await waiter.guards.settle("stray", handed, True, failures=3, reset_after=60, limit=1)
    finally:
        await holder.aclose()
        await waiter.aclose()
        await publisher.aclose()
