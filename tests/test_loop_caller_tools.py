"""The loop with the caller's own tools: offered, never run, handed back after the turn's own calls."""

from __future__ import annotations

import json

import pytest
from loop_support import StandInInvoke, adapter_for, agent_config, agent_tool, toolset
from scripted_llm import Call, Reply, ScriptedLLM

from gateway.loop import resume, run
from gateway.loop_types import CallerToolSpec
from gateway.messages import Message

pytestmark = pytest.mark.anyio

SMS = CallerToolSpec(name="send_sms", description="Text someone.",
                     input_schema={"type": "object", "properties": {"to": {"type": "string"}}})


async def _run(llm: ScriptedLLM, *, tools: list[CallerToolSpec], tool_choice: object = None,
               invoke: StandInInvoke | None = None, approval: str = "never"):  # type: ignore[no-untyped-def]
    adapter = adapter_for("openai", llm.url)
    try:
        return await run(agent_config(), [Message(role="user", content="hi")], adapter=adapter,
                         toolset=toolset(agent_tool("weather", approval=approval, method="POST")),
                         invoke=invoke or StandInInvoke(), caller_tools=tools, tool_choice=tool_choice)
    finally:
        await adapter.aclose()


async def test_a_caller_call_ends_the_run_after_the_turns_own_calls(llm: ScriptedLLM) -> None:
    llm.script(Reply(text="On it.", calls=[Call("send_sms", {"to": "ann"}, id="c_sms"),
                                           Call("weather", {"city": "Oslo"}, id="c_w")]))
    invoke = StandInInvoke()
    result = await _run(llm, tools=[SMS], invoke=invoke)
    assert invoke.calls == [("weather", {"city": "Oslo"})]
    assert result.finish_reason == "tool_calls" and result.message.content == "On it."
    assert [(c.id, c.name, c.arguments) for c in result.handed_back] == [("c_sms", "send_sms", {"to": "ann"})]
    assert [(s.tool, s.handed_back) for s in result.steps] == [("weather", False), ("send_sms", True)]
    assert result.steps[1].to_dict()["handed_back"] is True and "handed_back" not in result.steps[0].to_dict()
    assert [m.role for m in result.messages] == ["system", "user", "assistant", "tool"]  # the caller answers next
    assert [t["function"]["name"] for t in llm.bodies()[0]["tools"]] == ["weather", "send_sms"]


async def test_tool_choice_required_holds_until_a_caller_tool_is_called(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("weather", {"city": "Oslo"})]), Reply(calls=[Call("send_sms", {"to": "ann"})]))
    result = await _run(llm, tools=[SMS], tool_choice="required")
    assert result.handed_back and [b.get("tool_choice") for b in llm.bodies()] == ["required", "required"]


async def test_without_caller_tools_a_forced_choice_holds_for_the_first_turn_only(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("weather", {"city": "Oslo"})]), Reply(text="Cold."))
    choice = {"type": "function", "function": {"name": "weather"}}
    result = await _run(llm, tools=[], tool_choice=choice)
    assert result.message.content == "Cold."
    assert [b.get("tool_choice") for b in llm.bodies()] == [choice, None]


async def test_tool_choice_none_offers_no_tools(llm: ScriptedLLM) -> None:
    llm.script(Reply(text="Hello."))
    await _run(llm, tools=[SMS], tool_choice="none")
    assert "tools" not in llm.bodies()[0]


async def test_a_turn_paused_for_approval_hands_the_caller_call_back_once_resumed(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("weather", {"city": "Oslo"}, id="c_w"), Call("send_sms", {"to": "ann"}, id="c_s")]))
    invoke = StandInInvoke()
    paused = await _run(llm, tools=[SMS], invoke=invoke, approval="always")
    assert paused.paused and invoke.calls == []
    adapter = adapter_for("openai", llm.url)
    try:
        result = await resume(json.loads(json.dumps(paused.state)), {paused.pending_approvals[0].id: "approve"},
                              agent=agent_config(), adapter=adapter, invoke=invoke,
                              toolset=toolset(agent_tool("weather", approval="always", method="POST")))
    finally:
        await adapter.aclose()
    assert invoke.calls == [("weather", {"city": "Oslo"})]
    assert [c.id for c in result.handed_back] == ["c_s"] and result.finish_reason == "tool_calls"
    assert len(llm.requests) == 1  # the model was not asked again: the caller answers first
