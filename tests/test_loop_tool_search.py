"""The loop with tool search on: the model starts small, loads what it finds, keeps it across an approval pause."""

from __future__ import annotations

import json
from typing import Any

import pytest
from loop_support import KINDS, StandInInvoke, adapter_for, agent_config, agent_tool, toolset
from scripted_llm import Call, Reply, ScriptedLLM

from gateway.loop import resume, run
from gateway.messages import Message
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
