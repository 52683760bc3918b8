"""Stages left out of a tool's chain when the build can prove they would do nothing for it: the hooks stage for a
tool no hook acts on, the rate-limit stage for a tool no limit names. A tool a hook or a limit names still gets the
stage, with the same verdicts as ever. Real executor, real upstream."""

from __future__ import annotations

from typing import Any

import pytest
from executor_helpers import arg, executor_for, make_tool
from recording_server import RecordingServer, Reply

from gateway.assembly import build_pipeline
from gateway.catalog import AgentTool, Tool
from gateway.config.loader import parse_manifest
from gateway.config.settings import RateLimits
from gateway.execution.pipeline import Pipeline
from gateway.execution.stages import Execute
from gateway.hooks import ConfiguredHooks
from gateway.kernel.calls import Invocation
from gateway.messages import ToolCall, ToolResult
from gateway.safety.ratelimit import ChargeToolBucket, RateLimiter
from gateway.store.memory import MemoryStore

pytestmark = pytest.mark.anyio

TOOL = make_tool(arg("n", "query", {"type": "integer"}, required=True))
HOOKS_YAML = """\
providers: {openai: {kind: openai, base_url: "http://127.0.0.1:9/v1", api_key: unused}}
agents:
  clerk:
    model: openai/none
    hooks:
      - {on: after_tool_call, call: "test_pipeline_left_out:allow", tools: ["audited*"]}
hooks:
  - {on: before_tool_call, call: "test_pipeline_left_out:refuse", tools: ["guarded*"]}
  - {on: before_model_call, call: "test_pipeline_left_out:allow"}
"""


def refuse(step: dict[str, Any]) -> dict[str, Any]:
    return {"deny": f"{step['tool']} is guarded"}


def allow(step: dict[str, Any]) -> None:
    return None


def _tool(name: str, tool: Tool = TOOL) -> AgentTool:
    return AgentTool(name=name, description="", input_schema=tool.input_schema, tool=tool)


def _invocation(agent_tool: AgentTool) -> Invocation:
    assert agent_tool.tool is not None
    return Invocation(agent="clerk", agent_tool=agent_tool, tool=agent_tool.tool,
                      call=ToolCall(id="1", name=agent_tool.name), arguments={"n": 1})


class Watching:
    """A `ToolHooks` given in code that acts on the tools it names (`acts_on`) and notes every call it sees."""

    def __init__(self, *names: str) -> None:
        self.names = names
        self.seen: list[str] = []

    def acts_on(self, tool: str) -> bool:
        return tool in self.names

    async def before_tool_call(self, invocation: Invocation) -> ToolResult | None:
        self.seen.append(invocation.call.name)
        return None

    async def after_tool_call(self, invocation: Invocation, result: ToolResult) -> ToolResult:
        return result


class Everywhere:
    """A `ToolHooks` that cannot say which tools it acts on: it runs for every tool."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def before_tool_call(self, invocation: Invocation) -> ToolResult | None:
        self.seen.append(invocation.call.name)
        return None

    async def after_tool_call(self, invocation: Invocation, result: ToolResult) -> ToolResult:
        return result


@pytest.fixture
def upstream() -> Any:
    with RecordingServer() as server:
        server.route("/items", lambda r: Reply(200, {"ok": True}))
        yield server


def test_the_configured_hooks_say_which_tools_they_act_on() -> None:
    manifest, diagnostics = parse_manifest(HOOKS_YAML)
    assert not [d for d in diagnostics if d.level == "error"], diagnostics
    hooks = ConfiguredHooks(manifest)
    assert hooks.acts_on("guardedItems") and hooks.acts_on("auditedItems")  # a global hook, an agent's own
    assert not hooks.acts_on("plainItems")  # a model-call hook does not count for tools


async def test_a_tool_a_hook_acts_on_gets_the_hooks_stage_and_one_it_does_not_runs_without_it(
        upstream: RecordingServer) -> None:
    manifest, _ = parse_manifest(HOOKS_YAML)
    watching, everywhere = Watching("watchedItems"), Everywhere()
    async with executor_for(upstream.url, TOOL) as executor:
        configured = build_pipeline(executor, hooks=[ConfiguredHooks(manifest)])
        refused = await configured(_invocation(_tool("guardedItems")))
        ran = await configured(_invocation(_tool("plainItems")))
        in_code = build_pipeline(executor, hooks=[watching])
        for name in ("watchedItems", "plainItems", "watchedItems"):
            assert (await in_code(_invocation(_tool(name)))).ok
        both = build_pipeline(executor, hooks=[watching, everywhere])
        for name in ("watchedItems", "plainItems"):
            assert (await both(_invocation(_tool(name)))).ok
    assert refused.error_type == "hook_denied" and "guardedItems is guarded" in (refused.error or "") and ran.ok
    # The hook that said it does not act on plainItems never saw its calls; the one that could not say saw all.
    assert watching.seen == ["watchedItems", "watchedItems", "watchedItems"]
    assert everywhere.seen == ["watchedItems", "plainItems"]
    assert len(upstream.requests) == 6


async def test_a_tool_no_rate_limit_names_is_charged_nothing_and_one_it_names_is_limited(
        upstream: RecordingServer) -> None:
    store = MemoryStore()
    limiter = RateLimiter(store, RateLimits.model_validate({"tools": {"limitedItems": "1/min"}}))
    stage = ChargeToolBucket(limiter)
    # The limit names the catalog tool (its name or operationId), whatever an agent calls it.
    limited = _tool("items", make_tool(arg("n", "query", {"type": "integer"}), name="limitedItems"))
    free = _tool("items", make_tool(arg("n", "query", {"type": "integer"}), name="freeItems"))
    assert stage.for_tool(free) is None and stage.for_tool(limited) is stage
    assert limited.tool is not None and free.tool is not None
    async with executor_for(upstream.url, limited.tool, free.tool) as executor:
        pipeline = Pipeline([stage], Execute(executor))
        free_results = [await pipeline(_invocation(free)) for _ in range(3)]
        limited_results = [await pipeline(_invocation(limited)) for _ in range(2)]
    assert all(r.ok for r in free_results)
    assert limited_results[0].ok and limited_results[1].error_type == "rate_limited"
    assert len(upstream.requests) == 4
