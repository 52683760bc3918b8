"""The breaker-and-concurrency stage on Redis (`gateway.safety.shared_breaker`): two stages on one real
redis-server stand for two gateway instances, and a `Safeguards` with `gateway.redis` builds its pipeline with it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from executor_helpers import make_tool

from gateway.catalog import AgentTool
from gateway.config.model import ApiConfig, Manifest
from gateway.config.settings import GuardSettings
from gateway.kernel.calls import Invocation
from gateway.messages import ToolCall, ToolResult
from gateway.safety.guards import Safeguards
from gateway.safety.shared_breaker import SharedGuardApi
from gateway.store import open_store
from gateway.store.redis_counters import RedisCounters

pytestmark = pytest.mark.anyio

TOOL = make_tool(method="POST")
SETTINGS = GuardSettings(failures=2, reset_after=60, max_concurrency=1)


def _manifest() -> Manifest:
    manifest = Manifest(file="agents.yaml")
    manifest.apis[TOOL.api] = ApiConfig(name=TOOL.api, timeout=0.5)
    return manifest


def _invocation() -> Invocation:
    agent_tool = AgentTool(name=TOOL.name, description="", input_schema=TOOL.input_schema, tool=TOOL)
    return Invocation(agent="clerk", agent_tool=agent_tool, tool=TOOL, call=ToolCall(id="1", name=TOOL.name),
                      arguments={})


async def _failing(_: Invocation) -> ToolResult:
    return ToolResult.failure("upstream_error", "HTTP 503", status=503)


async def test_failures_through_one_instance_pause_the_api_on_the_other(redis_url: str) -> None:
    a, b = RedisCounters(redis_url), RedisCounters(redis_url)
    try:
        first = SharedGuardApi(_manifest(), a.guards, SETTINGS)
        second = SharedGuardApi(_manifest(), b.guards, SETTINGS)
        for _ in range(SETTINGS.failures):
            assert (await first(_invocation(), _failing)).error_type == "upstream_error"
        ran: list[Any] = []

        async def proceed(invocation: Invocation) -> ToolResult:
            ran.append(invocation)
            return ToolResult(ok=True, status=200)

        paused = await second(_invocation(), proceed)
    finally:
        await a.aclose()
        await b.aclose()
    assert not ran  # nothing was sent
    assert paused.error_type == "circuit_open" and "paused" in (paused.error or "")


async def test_max_concurrency_counts_the_calls_in_flight_on_every_instance(redis_url: str) -> None:
    a, b = RedisCounters(redis_url), RedisCounters(redis_url)
    release = asyncio.Event()

    async def held(_: Invocation) -> ToolResult:
        await release.wait()
        return ToolResult(ok=True, status=200)

    try:
        first = SharedGuardApi(_manifest(), a.guards, SETTINGS)
        second = SharedGuardApi(_manifest(), b.guards, SETTINGS)
        running = asyncio.create_task(first(_invocation(), held))
        await asyncio.sleep(0.1)  # the first call holds the only slot
        busy = await second(_invocation(), held)  # waits the api's 0.5 s timeout for a slot, then gives up
        release.set()
        assert (await running).ok
        after = await second(_invocation(), held)  # the slot came back
    finally:
        await a.aclose()
        await b.aclose()
    assert busy.error_type == "timeout" and "across the gateway's instances" in (busy.error or "")
    assert after.ok


async def test_a_store_with_redis_builds_the_pipeline_on_the_shared_stage(redis_url: str, tmp_path: Path) -> None:
    manifest = _manifest()
    safeguards = Safeguards(open_store(str(tmp_path / "state.db"), redis=redis_url), manifest)
    try:
        stages = safeguards.guard_stages(manifest)
    finally:
        await safeguards.store.aclose()
    assert any(isinstance(stage, SharedGuardApi) for stage in stages)
    plain = Safeguards(open_store("memory:"), manifest)
    assert not any(isinstance(stage, SharedGuardApi) for stage in plain.guard_stages(manifest))
