"""The loop with tool search on: the model starts small, loads what it finds, keeps it across an approval pause."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from loop_support import KINDS, StandInInvoke, adapter_for, agent_config, agent_tool, toolset
from scripted_llm import Call, Reply, ScriptedLLM

from gateway.catalog import AgentTool, Tool
from gateway.config.settings import GatewaySettings
from gateway.dialects.brevity import estimate_tokens
from gateway.loop import resume, run
from gateway.messages import Message
from gateway.offer.toolsearch import DEFAULT_DEFINITIONS_BUDGET, ToolOffer, search, search_enabled
from gateway.offer.views import model_view
from gateway.runtime import Runtime, load_runtime
from gateway.server.mcp import search as mcp_search
from gateway.toolsets import Toolset

pytestmark = pytest.mark.anyio

THINGS = ["order", "invoice", "customer", "refund", "shipment", "coupon", "product", "review"]


def _tools() -> Toolset:
    tools = [agent_tool(f"{verb}_{thing}", method=method, approval="writes")
             for thing in THINGS for verb, method in (("list", "GET"), ("create", "POST"))]
    return toolset(*tools)


def _agent(kind: str) -> Any:
    config = agent_config(kind)
    config.tool_search = "on"
    config.pinned = ["list_order"]
    return config


def _offered(body: dict[str, Any], kind: str) -> list[str]:
    if kind == "openai" or kind == "ollama":
        return [t["function"]["name"] for t in body.get("tools", [])]
    if kind == "anthropic":
        return [t["name"] for t in body.get("tools", [])]
    return [f["name"] for group in body.get("tools", []) for f in group.get("functionDeclarations", [])]


@pytest.mark.parametrize("kind", KINDS)
async def test_search_loads_tools_for_the_rest_of_the_run(llm: ScriptedLLM, kind: str) -> None:
    llm.script(Reply(calls=[Call("search_tools", {"query": "create a refund", "limit": 2})]),
               Reply(calls=[Call("list_refund", {"city": "x"})]), Reply(text="done"))
    invoke = StandInInvoke()
    result = await run(_agent(kind), [Message(role="user", content="refund order 7")],
                       adapter=adapter_for(kind, llm.url), toolset=_tools(), invoke=invoke)
    assert result.message.content == "done"
    first, second, third = (_offered(body, kind) for body in llm.bodies())
    assert first == ["list_order", "search_tools", "describe_tool"]
    assert second[:3] == first and "create_refund" in second and len(second) == 5
    assert third == second  # nothing new found: the same tools, in the same order
    assert [s.tool for s in result.steps] == ["search_tools", "list_refund"]


async def test_loaded_tools_survive_an_approval_pause(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("search_tools", {"query": "create a refund", "limit": 1})]),
               Reply(calls=[Call("create_refund", {"city": "x"})]), Reply(text="refunded"))
    paused = await run(_agent("openai"), [Message(role="user", content="refund order 7")],
                       adapter=adapter_for("openai", llm.url), toolset=_tools(), invoke=StandInInvoke())
    assert paused.paused and paused.state["loaded"] == ["create_refund"]
    [pending] = paused.pending_approvals
    done = await resume(json.loads(json.dumps(paused.state)), {pending.id: "approve"}, agent=_agent("openai"),
                        adapter=adapter_for("openai", llm.url), toolset=_tools(), invoke=StandInInvoke())
    assert done.message.content == "refunded"
    assert _offered(llm.bodies()[-1], "openai") == ["list_order", "search_tools", "describe_tool", "create_refund"]


async def test_a_bad_search_is_a_tool_error_the_model_can_fix(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("search_tools", {"query": ""})]), Reply(calls=[Call("nope", {})]),
               Reply(text="ok"))
    result = await run(_agent("openai"), [Message(role="user", content="hi")], adapter=adapter_for("openai", llm.url),
                       toolset=_tools(), invoke=StandInInvoke())
    assert [s.error_type for s in result.steps] == ["invalid_arguments", "unknown_tool"]
    assert "search_tools" in result.steps[1].error


async def test_a_search_whose_arguments_are_not_json_is_told_so(llm: ScriptedLLM) -> None:
    """A `search_tools` call with broken JSON is the model's to fix, as any tool's: not an unknown tool."""
    llm.script(Reply(calls=[Call("search_tools", raw='{"query": "create a ref')]),
               Reply(calls=[Call("search_tools", {"query": "create a refund", "limit": 1})]), Reply(text="ok"))
    result = await run(_agent("openai"), [Message(role="user", content="hi")], adapter=adapter_for("openai", llm.url),
                       toolset=_tools(), invoke=StandInInvoke())
    assert [s.error_type for s in result.steps] == ["invalid_arguments", None]
    assert "not valid JSON" in result.steps[0].error and "search_tools again" in result.steps[0].error
    assert result.message.content == "ok"


GITHUB_PINNED = """\
providers:
  llm: {kind: openai, api_key: unused}
agents:
  dev: {model: llm/m, tools: [{api: github}], pinned: [users/get-authenticated, "issues/list*"]}
"""
"""docs/tool-search.md's agent, pinning 20 tools: their largest renderings (MCP's, with output schemas) pass the
default definitions budget, what a chat request carries of them does not."""


@pytest.fixture
def github(tmp_path: Path, corpus: Path, spec_cache: Path) -> Runtime:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "github.json").symlink_to(corpus / "github" / "api.github.com.json")
    (tmp_path / "agents.yaml").write_text(GITHUB_PINNED)
    return load_runtime(specs, tmp_path / "agents.yaml", cache_dir=spec_cache)


def _definitions(body: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    if kind == "gemini":
        return [f for group in body.get("tools", []) for f in group.get("functionDeclarations", [])]
    return list(body.get("tools", []))


SEARCHES = ("list pull requests", "list workflow runs", "create a release")


@pytest.mark.parametrize("kind", KINDS)
async def test_the_definitions_budget_counts_what_the_provider_is_sent(llm: ScriptedLLM, github: Runtime,
                                                                       kind: str) -> None:
    """20 pinned GitHub tools: searches load as many found tools as fit the default budget, counted as the
    provider's request carries them (they loaded none while each tool was charged its largest rendering)."""
    agent, tools = github.agent("dev"), github.toolset("dev")
    llm.script(*(Reply(calls=[Call("search_tools", {"query": query, "limit": 20})]) for query in SEARCHES),
               Reply(text="ok"))
    await run(agent, [Message(role="user", content="what is new?")], adapter=adapter_for(kind, llm.url),
              toolset=tools, invoke=StandInInvoke())
    bodies = [_definitions(body, kind) for body in llm.bodies()]
    assert len(bodies[0]) == 22  # 20 pinned, search_tools, describe_tool
    pinned = {d.get("name") or d["function"]["name"] for d in bodies[0]}
    found = [name for query in SEARCHES for item in search(None, tools, query, 20)
             if (name := item["name"]) not in pinned]
    loaded = [d.get("name") or d["function"]["name"] for d in bodies[-1][22:]]
    assert 20 <= len(loaded) < len(set(found)) and set(loaded) <= set(found)
    for definitions in bodies:
        assert sum(estimate_tokens(definition) for definition in definitions) <= DEFAULT_DEFINITIONS_BUDGET
    # As many as fit: each found tool left out would pass the budget.
    offer = ToolOffer(agent, tools, loaded=loaded, measure=adapter_for(kind, llm.url).definition_tokens)
    for name in set(found) - set(loaded):
        assert offer.load(name) == f"not loaded: the definitions would pass {DEFAULT_DEFINITIONS_BUDGET} tokens"


def test_with_no_door_format_the_budget_charges_the_largest_rendering(github: Runtime) -> None:
    """`gateway tools` and any caller that names no format keep the conservative count: MCP's listing of these 20
    tools is past the budget, so they leave no room."""
    offer = ToolOffer(github.agent("dev"), github.toolset("dev"))
    assert offer.tokens() > DEFAULT_DEFINITIONS_BUDGET
    assert offer.answer("search_tools", {"query": "list pull requests"})[1]["tools"][0]["loaded"] is False


def _reported(n: int) -> AgentTool:
    """A tool whose output schema (which MCP's listing carries, a chat request does not) is most of it."""
    output = {"type": "object", "properties": {f"field{i}": {"type": "string", "description": "A field of the "
                                                             "report, as the shop stores it."} for i in range(30)}}
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    tool = Tool(name=f"report{n}", api="shop", operation_id=f"report{n}", method="GET", path=f"/r{n}",
                description="Reads one report of the shop.", input_schema=schema, output_schema=output)
    return AgentTool(name=tool.name, description=tool.description, input_schema=schema, output_schema=output,
                     tool=tool)


@pytest.mark.parametrize("kind", KINDS)
async def test_auto_decides_with_the_doors_own_count(llm: ScriptedLLM, kind: str) -> None:
    """30 tools (under `auto`'s 64) whose MCP listing passes the definitions budget and whose chat definitions fit
    it: the loop sends every tool and no search_tools, the MCP door lists search_tools instead of them."""
    tools = [_reported(n) for n in range(30)]
    adapter = adapter_for(kind, llm.url)
    chat = sum(adapter.definition_tokens(model_view(t)) for t in tools)
    listed = sum(mcp_search.listed_tokens(model_view(t)) for t in tools)
    assert chat < listed
    settings = GatewaySettings.model_construct(tool_definitions_budget=(chat + listed) // 2)
    agent_tools = Toolset(agent="clerk", tools={t.name: t for t in tools}, settings=settings)
    agent = agent_config(kind)
    assert agent.tool_search == "auto"
    llm.script(Reply(text="ok"))
    await run(agent, [Message(role="user", content="the reports?")], adapter=adapter, toolset=agent_tools,
              invoke=StandInInvoke())
    assert _offered(llm.bodies()[0], kind) == [t.name for t in tools]
    assert mcp_search.searching(agent, agent_tools)
    assert [t.name for t in mcp_search.listing(agent, agent_tools)] == ["search_tools", "describe_tool", "call_tool"]


def test_auto_counts_every_definition_once_per_toolset_and_count() -> None:
    """A door asks whether to search at every meta-tool call: every tool's definition is measured at the first ask
    only, per count; a tool added to the toolset is counted again, and the decision follows it."""
    tools = [_reported(n) for n in range(3)]
    measured: list[str] = []

    def listed(tool: Any) -> int:
        measured.append(tool.name)
        return mcp_search.listed_tokens(tool)

    budget = sum(mcp_search.listed_tokens(model_view(t)) for t in tools) + 1
    agent_tools = Toolset(agent="clerk", tools={t.name: t for t in tools},
                          settings=GatewaySettings.model_construct(tool_definitions_budget=budget))
    agent = agent_config("openai")
    assert not search_enabled(agent, agent_tools, listed) and not search_enabled(agent, agent_tools, listed)
    assert len(measured) == 3
    more = _reported(3)
    agent_tools.tools[more.name] = more
    assert search_enabled(agent, agent_tools, listed)
    assert len(measured) == 3 + 4


async def test_searches_count_against_the_runs_tool_call_cap(llm: ScriptedLLM) -> None:
    """redteam44's left item: `search_tools` (and `describe_tool`) calls were not counted against `max_tool_calls`,
    so a model could search without end (any number a turn, every iteration). They count as any call: past the cap
    a search is refused as the cap's `rate_limited`, and the run ends with its summary (cut)."""
    searches = [Call("search_tools", {"query": f"refund {i}", "limit": 1}) for i in range(8)]
    llm.script(Reply(calls=[*searches, Call("describe_tool", {"name": "list_order"})]), Reply(text="summary"))
    agent = _agent("openai")
    agent.policy.max_tool_calls = 3
    result = await run(agent, [Message(role="user", content="refund order 7")],
                       adapter=adapter_for("openai", llm.url), toolset=_tools(), invoke=StandInInvoke())
    assert [s.ok for s in result.steps] == [True] * 3 + [False] * 6
    assert all(s.error_type == "rate_limited" and "cap of 3 tool calls" in (s.error or "")
               for s in result.steps[3:])
    assert result.cut and result.message.content == "summary"
    assert "tools" not in llm.bodies()[-1]  # the summary's request offers no tools
