"""Breakers and concurrency slots counted in one Redis for several instances (a real redis-server)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.catalog import Tool
from gateway.config.model import Manifest
from gateway.messages import ToolResult
from gateway.safety.breaker import GuardedExecutor, GuardSettings
from gateway.store.redis_counters import RedisCounters

pytestmark = pytest.mark.anyio


class Upstream:
    """An executor whose answers are scripted, counting the calls in flight at once."""

    def __init__(self, *, ok: bool = True, delay: float = 0.0) -> None:
        self.ok, self.delay = ok, delay
        self.calls = self.in_flight = self.most = 0

    async def execute(self, tool: Tool, arguments: dict[str, Any], **_: Any) -> ToolResult:
        self.calls += 1
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        if self.ok:
            return ToolResult(ok=True, status=200)
        return ToolResult.failure("upstream_error", "boom", status=503)

    async def aclose(self) -> None:
        pass


def _tool() -> Tool:
    return Tool(name="getThing", api="shop", operation_id="getThing", method="GET", path="/thing",
                description="", input_schema={"type": "object"})


async def test_failures_seen_by_one_instance_open_the_breaker_for_all(redis_url: str) -> None:
    counters = [RedisCounters(redis_url), RedisCounters(redis_url)]
    settings = GuardSettings(failures=3, reset_after=60)
    failing, healthy = Upstream(ok=False), Upstream()
    a = GuardedExecutor(failing, Manifest(), settings=settings, shared=counters[0].guards)
    b = GuardedExecutor(healthy, Manifest(), settings=settings, shared=counters[1].guards)
    try:
        for _ in range(3):
            assert (await a.execute(_tool(), {})).error_type == "upstream_error"
        refused = await b.execute(_tool(), {})
    finally:
        for c in counters:
            await c.aclose()
    assert refused.error_type == "transport_error" and "paused" in (refused.error or "")
    assert healthy.calls == 0 and failing.calls == 3


async def test_a_half_open_breaker_lets_one_probe_through_and_its_success_closes_it(redis_url: str) -> None:
    counters = RedisCounters(redis_url)
    settings = GuardSettings(failures=1, reset_after=0.2)
    failing, slow = Upstream(ok=False), Upstream(delay=0.2)
    try:
        await GuardedExecutor(failing, Manifest(), settings=settings, shared=counters.guards).execute(_tool(), {})
        await asyncio.sleep(0.3)
        probing = GuardedExecutor(slow, Manifest(), settings=settings, shared=counters.guards)
        results = await asyncio.gather(*(probing.execute(_tool(), {}) for _ in range(4)))
        after = await probing.execute(_tool(), {})
    finally:
        await counters.aclose()
    assert sum(r.ok for r in results) == 1 and slow.calls == 2  # one probe, then closed again
    assert all("paused" in (r.error or "") for r in results if not r.ok)
    assert after.ok


async def test_concurrency_slots_are_counted_across_instances(redis_url: str) -> None:
    counters = [RedisCounters(redis_url), RedisCounters(redis_url)]
    upstream = Upstream(delay=0.05)
    settings = GuardSettings(max_concurrency=3)
    guarded = [GuardedExecutor(upstream, Manifest(), settings=settings, shared=c.guards) for c in counters]
    try:
        results = await asyncio.gather(*(guarded[i % 2].execute(_tool(), {}, timeout=10) for i in range(12)))
        taken, _ = await counters[0].guards.enter("shop", reset_after=60, limit=3, wait=0, lease=1)  # all back
    finally:
        for c in counters:
            await c.aclose()
    assert all(r.ok for r in results) and upstream.calls == 12
    assert upstream.most == 3 and taken is not None


async def test_a_cancelled_call_gives_its_slot_back(redis_url: str) -> None:
    counters = RedisCounters(redis_url)
    guarded = GuardedExecutor(Upstream(delay=10), Manifest(), settings=GuardSettings(max_concurrency=1),
                              shared=counters.guards)
    try:
        call = asyncio.ensure_future(guarded.execute(_tool(), {}, timeout=30))
        await asyncio.sleep(0.2)
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)
        lease, _ = await counters.guards.enter("shop", reset_after=60, limit=1, wait=1, lease=1)
        assert lease is not None
    finally:
        await counters.aclose()
