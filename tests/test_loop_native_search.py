"""The loop with `tool_search: native`: every tool deferred, the provider searches, the gateway runs.

On Anthropic and on OpenAI's Responses API. The scripted LLM answers as each API does (`server_tool_use` +
`tool_search_tool_result`; `tool_search_call` + `tool_search_output`) and refuses what the API would refuse: a
reference to a tool the request did not defer, a search block or item not passed back.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from loop_support import StandInInvoke, adapter_for, agent_config, agent_tool, toolset
from scripted_llm import Call, Reply, ScriptedLLM, ToolSearch

from gateway.loop import resume, run
from gateway.messages import Message
from gateway.toolsets import Toolset

pytestmark = pytest.mark.anyio

THINGS = ["order", "invoice", "customer", "refund", "shipment", "coupon", "product", "review"]


def _tools() -> Toolset:
    tools = [agent_tool(f"{verb}_{thing}", method=method, approval="writes")
             for thing in THINGS for verb, method in (("list", "GET"), ("create", "POST"))]
    return toolset(*tools, agent_tool("ask_auditor", delegate="auditor"))


def _agent(kind: str = "anthropic", mode: str = "native") -> Any:
    config = agent_config(kind)
    config.tool_search = mode
    config.pinned = ["list_order"]
    return config


NATIVE = ("anthropic", "openai-responses")
SEARCH_TOOL = {"anthropic": {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
               "openai-responses": {"type": "tool_search"}}
"""What each provider's search tool looks like in `tools`."""
SEARCHED = {"anthropic": ["server_tool_use", "tool_search_tool_result"],
            "openai-responses": ["tool_search_call", "tool_search_output"]}
"""The blocks (items) a search leaves in the assistant's turn."""
CALLED = {"anthropic": "tool_use", "openai-responses": "function_call"}
SAID = {"anthropic": "text", "openai-responses": "message"}


def _functions(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every tool definition, those inside a namespace (Responses) included."""
    return [f for t in tools for f in (t["tools"] if t.get("type") == "namespace" else [t])]


def _deferred(body: dict[str, Any]) -> list[str]:
    return [t["name"] for t in _functions(body["tools"]) if t.get("defer_loading")]


def _kept(body: dict[str, Any]) -> list[str]:
    return [t.get("name") or t["type"] for t in body["tools"]
            if not t.get("defer_loading") and t.get("type") != "namespace"]


def _assistant_blocks(body: dict[str, Any], kind: str = "anthropic") -> list[list[dict[str, Any]]]:
    """The assistant turns of a request: Anthropic's content blocks; for Responses, the items between inputs."""
    if kind == "anthropic":
        return [m["content"] for m in body["messages"] if m["role"] == "assistant"]
    turns: list[list[dict[str, Any]]] = []
    for item in body["input"]:
        if item.get("type") == "function_call_output" or item.get("role") in ("user", "developer"):
            if turns and turns[-1]:
                turns.append([])
            continue
        if not turns:
            turns.append([])
        turns[-1].append(item)
    return [t for t in turns if t]


@pytest.mark.parametrize("kind", NATIVE)
@pytest.mark.parametrize("stream", [False, True])
async def test_the_provider_searches_and_the_found_tool_runs_through_invoke(llm: ScriptedLLM, stream: bool,
                                                                            kind: str) -> None:
    search = ToolSearch("list refunds", found=["list_refund", "create_refund"])
    llm.script(Reply(text="Looking.", tool_search=search, calls=[Call("list_refund", {"city": "Oslo"})]),
               Reply(text="Two refunds."))
    invoke = StandInInvoke()
    result = await run(_agent(kind), [Message(role="user", content="refunds in Oslo?")],
                       adapter=adapter_for(kind, llm.url), toolset=_tools(), invoke=invoke, stream=stream)

    assert result.message.content == "Two refunds."
    assert invoke.calls == [("list_refund", {"city": "Oslo"})]
    assert [s.tool for s in result.steps] == ["list_refund"]
    first, second = llm.bodies()
    assert _kept(first) == ["list_order", "ask_auditor", SEARCH_TOOL[kind].get("name", "tool_search")]
    assert SEARCH_TOOL[kind] in first["tools"]
    assert len(_deferred(first)) == 15 and "create_refund" in _deferred(first)
    assert "search_tools" not in _kept(first)  # the gateway's own search is not offered beside the provider's
    assert second["tools"] == first["tools"]  # nothing is loaded by the gateway: the same tools every request
    [echoed] = _assistant_blocks(second, kind)
    assert [b["type"] for b in echoed] == [SAID[kind], *SEARCHED[kind], CALLED[kind]]
    if kind == "anthropic":
        assert echoed[1] == {"type": "server_tool_use", "id": "srvtoolu_01", "name": "tool_search_tool_bm25",
                             "input": {"query": "list refunds"}}
        assert [r["tool_name"] for r in echoed[2]["content"]["tool_references"]] == ["list_refund", "create_refund"]
    else:
        [space] = [t for t in first["tools"] if t.get("type") == "namespace"]
        assert space["name"] == "test" and len(space["tools"]) == 15  # one namespace per api
        assert echoed[1]["arguments"] == {"query": "list refunds"} and "created_by" not in echoed[1]
        assert [t["name"] for t in _functions(echoed[2]["tools"])] == ["list_refund", "create_refund"]
        assert echoed[3]["namespace"] == "test"  # the call is sent back with the namespace it came with


@pytest.mark.parametrize("kind", NATIVE)
async def test_a_found_write_waits_for_approval_and_the_blocks_survive_the_pause(llm: ScriptedLLM, kind: str) -> None:
    search = ToolSearch("create a refund", found=["create_refund"])
    llm.script(Reply(tool_search=search, calls=[Call("create_refund", {"city": "x"})]), Reply(text="refunded"))
    paused = await run(_agent(kind), [Message(role="user", content="refund order 7")],
                       adapter=adapter_for(kind, llm.url), toolset=_tools(), invoke=StandInInvoke())
    assert paused.paused and paused.state["loaded"] == []
    [pending] = paused.pending_approvals
    assert pending.tool == "create_refund"
    invoke = StandInInvoke()
    done = await resume(json.loads(json.dumps(paused.state)), {pending.id: "approve"}, agent=_agent(kind),
                        adapter=adapter_for(kind, llm.url), toolset=_tools(), invoke=invoke)
    assert done.message.content == "refunded" and invoke.calls == [("create_refund", {"city": "x"})]
    [echoed] = _assistant_blocks(llm.bodies()[-1], kind)
    assert [b["type"] for b in echoed] == [*SEARCHED[kind], CALLED[kind]]


async def test_a_paused_turn_is_sent_back_and_goes_on(llm: ScriptedLLM) -> None:
    search = ToolSearch("invoices", found=["list_invoice"])
    llm.script(Reply(tool_search=search, finish="pause_turn"), Reply(calls=[Call("list_invoice", {})]),
               Reply(text="No invoices."))
    result = await run(_agent(), [Message(role="user", content="invoices?")],
                       adapter=adapter_for("anthropic", llm.url), toolset=_tools(), invoke=StandInInvoke())
    assert result.message.content == "No invoices." and result.iterations == 3
    second = llm.bodies()[1]
    assert [b["type"] for b in _assistant_blocks(second)[0]] == ["server_tool_use", "tool_search_tool_result"]


@pytest.mark.parametrize("kind", NATIVE)
async def test_an_unknown_tool_points_at_the_providers_search(llm: ScriptedLLM, kind: str) -> None:
    llm.script(Reply(calls=[Call("delete_everything", {})]), Reply(text="ok"))
    result = await run(_agent(kind), [Message(role="user", content="hi")], adapter=adapter_for(kind, llm.url),
                       toolset=_tools(), invoke=StandInInvoke())
    assert result.steps[0].error_type == "unknown_tool"
    assert "use the tool search" in (result.steps[0].error or "")
    assert "list_order" not in (result.steps[0].error or "")  # not a list of every tool


async def test_on_a_provider_without_native_search_the_gateway_searches(llm: ScriptedLLM) -> None:
    """`native` where the adapter has none (validation refuses it in agents.yaml; a door like MCP has none)."""
    llm.script(Reply(text="hi"))
    await run(_agent("openai"), [Message(role="user", content="hi")], adapter=adapter_for("openai", llm.url),
              toolset=_tools(), invoke=StandInInvoke())
    offered = [t["function"]["name"] for t in llm.bodies()[0]["tools"]]
    assert offered == ["list_order", "ask_auditor", "search_tools", "describe_tool"]


@pytest.mark.parametrize("kind", NATIVE)
async def test_the_summary_at_the_cap_carries_no_search_blocks(llm: ScriptedLLM, kind: str) -> None:
    """The last call at `max_iterations` offers no tools, so nothing may point at a search tool."""
    agent = _agent(kind)
    agent.policy.max_iterations = 1
    llm.script(Reply(tool_search=ToolSearch("invoices", found=["list_invoice"]), calls=[Call("list_invoice", {})]),
               Reply(text="Here is what I found."))
    result = await run(agent, [Message(role="user", content="invoices?")], adapter=adapter_for(kind, llm.url),
                       toolset=_tools(), invoke=StandInInvoke())
    assert result.cut and result.message.content == "Here is what I found."
    summary = llm.bodies()[-1]
    assert "tools" not in summary
    sent = json.dumps(summary)
    assert all(kind_of_block not in sent for kind_of_block in SEARCHED[kind])


async def test_a_door_without_a_native_search_treats_native_as_on() -> None:
    """MCP builds its offer without `native`: its clients get the gateway's own search_tools."""
    from gateway.offer.toolsearch import ToolOffer

    offer = ToolOffer(_agent(), _tools())
    assert offer.searching and not offer.native
    assert [v.name for v in offer.views()] == ["list_order", "ask_auditor", "search_tools", "describe_tool"]
