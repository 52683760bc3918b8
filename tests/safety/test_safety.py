"""The glue: what follows a hot reload of agents.yaml, and what refuses to start."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gateway.catalog import AgentTool, Tool
from gateway.config.model import ClientConfig, Manifest
from gateway.config.settings import GatewaySettings
from gateway.execution.pipeline import Pipeline
from gateway.execution.stages import Execute
from gateway.kernel.calls import Invocation
from gateway.messages import ToolCall, ToolResult
from gateway.server.supervision import Safety
from gateway.store import MemoryStore

pytestmark = pytest.mark.anyio


class Failing:
    manifest = Manifest()

    async def execute(self, tool: Tool, arguments: dict, *, timeout: float | None = None,
                      max_result_bytes: int | None = None, validated: bool = False) -> ToolResult:
        return ToolResult.failure("upstream_error", "down", status=503)

    async def aclose(self) -> None:
        pass


def _guarded(safety: Safety, manifest: Manifest) -> Pipeline:
    """What a generation builds from the safety layer: its guard stages around an executor."""
    return Pipeline(safety.guard_stages(manifest), Execute(Failing()))  # type: ignore[arg-type]


def _invocation(tool: Tool) -> Invocation:
    agent_tool = AgentTool(name=tool.name, description="", input_schema={}, tool=tool)
    return Invocation(agent="a", agent_tool=agent_tool, tool=tool, call=ToolCall(id="1", name=tool.name),
                      arguments={})


def _manifest(**settings: object) -> Manifest:
    return Manifest(clients={"ci": ClientConfig(name="ci", key="ck-first-key-123", agents=["a"])},
                    gateway=GatewaySettings.model_validate(settings))


def test_reload_swaps_keys_and_limits() -> None:
    # A reload with a bad value never gets here: the loader refuses it and the last runtime keeps serving.
    safety = Safety(MemoryStore(), _manifest(rate_limits={"client": "5/min"}))
    assert safety.keys.identify("ck-first-key-123") is not None
    limiter = safety.limiter
    reloaded = Manifest(clients={"ci": ClientConfig(name="ci", key="ck-second-key-456", agents=["a"])},
                        gateway=GatewaySettings.model_validate({"rate_limits": {"client": "1/min"}}))
    safety.sync(reloaded)
    assert safety.keys.identify("ck-first-key-123") is None
    assert safety.keys.identify("ck-second-key-456") is not None
    assert safety.limiter is not limiter and safety.limiter.limits.client is not None
    assert safety.limiter.limits.client.burst == 1


async def test_breakers_survive_a_reload() -> None:
    manifest = _manifest(breaker={"failures": 1})
    safety = Safety(MemoryStore(), manifest)
    runtime = SimpleNamespace(manifest=manifest)
    tool = Tool(name="op", api="down", operation_id="op", method="GET", path="/", description="", input_schema={})
    first = _guarded(safety, runtime.manifest)
    assert (await first(_invocation(tool))).status == 503
    second = _guarded(safety, runtime.manifest)  # the next generation's
    refused = await second(_invocation(tool))
    assert refused.status is None and "paused" in (refused.error or "")
