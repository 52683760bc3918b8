"""Approval gating: a paused run's state survives JSON (a restart), decisions resume it."""

from __future__ import annotations

import json

import pytest
from loop_support import KINDS, StandInInvoke, adapter_for, agent_config, agent_tool, toolset
from scripted_llm import Call, Reply, ScriptedLLM

from gateway.loop import resume, run
from gateway.loop_types import Decision

pytestmark = pytest.mark.anyio


def _tools():
    return toolset(agent_tool("weather"), agent_tool("refund", method="POST", approval="writes",
                                                     properties={"amount": {"type": "integer"}}))


async def _start(llm: ScriptedLLM, kind: str = "openai", invoke=None, hook=None):
    from gateway.messages import Message

    return await run(agent_config(kind), [Message(role="user", content="refund order 7")],
                     adapter=adapter_for(kind, llm.url), toolset=_tools(), invoke=invoke or StandInInvoke(),
                     approvals=hook)


async def _resume(llm: ScriptedLLM, state: dict, decisions: dict, kind: str = "openai", invoke=None):
    # A fresh adapter and a JSON round trip of the state: what a restarted gateway has.
    return await resume(json.loads(json.dumps(state)), decisions, agent=agent_config(kind),
                        adapter=adapter_for(kind, llm.url), toolset=_tools(), invoke=invoke or StandInInvoke())


@pytest.mark.parametrize("kind", KINDS)
async def test_a_call_needing_approval_pauses_the_whole_batch(llm: ScriptedLLM, kind: str) -> None:
    llm.script(Reply(calls=[Call("weather", {"city": "Paris"}), Call("refund", {"amount": 30})]))
    invoke = StandInInvoke()
    hooked = []

    async def hook(pending, state):
        hooked.append((pending, state))

    result = await _start(llm, kind, invoke, hook)
    assert invoke.calls == []  # nothing of the batch ran
    assert result.paused and result.message.content is None
    [pending] = result.pending_approvals
    assert (pending.agent, pending.tool, pending.arguments) == ("clerk", "refund", {"amount": 30})
    assert pending.id.startswith("apr_")
    assert json.loads(json.dumps(result.state))["pending"][0]["id"] == pending.id
    assert hooked and hooked[0][0] == [pending]
    assert result.gateway_extension()["pending_approvals"][0]["tool"] == "refund"


@pytest.mark.parametrize("kind", KINDS)
async def test_approve_runs_the_batch_and_continues(llm: ScriptedLLM, kind: str) -> None:
    llm.script(Reply(calls=[Call("weather", {"city": "Paris"}), Call("refund", {"amount": 30})]),
               Reply(text="Refunded."))
    paused = await _start(llm, kind)
    invoke = StandInInvoke()
    result = await _resume(llm, paused.state, {paused.pending_approvals[0].id: "approve"}, kind, invoke)
    assert sorted(invoke.calls) == [("refund", {"amount": 30}), ("weather", {"city": "Paris"})]
    assert result.message.content == "Refunded." and not result.paused
    assert [s.tool for s in result.steps] == ["weather", "refund"]
    assert result.usage.llm_calls == 2
    # The second LLM request carries the first turn and both results, in the provider's grouping.
    assert len(llm.requests) == 2 and "Refunded" not in json.dumps(llm.requests[1].body)


async def test_approve_with_edited_arguments(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("refund", {"amount": 3000})]), Reply(text="Refunded 30."))
    paused = await _start(llm)
    invoke = StandInInvoke()
    decision = {"decision": "approve", "arguments": {"amount": 30}}
    result = await _resume(llm, paused.state, {paused.pending_approvals[0].id: decision}, invoke=invoke)
    assert invoke.calls == [("refund", {"amount": 30})]
    assert result.steps[0].arguments == {"amount": 30}


async def test_deny_sends_the_reason_to_the_model(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("weather", {"city": "Paris"}), Call("refund", {"amount": 30})]),
               Reply(text="I could not refund."))
    paused = await _start(llm)
    invoke = StandInInvoke()
    decision = Decision(approve=False, reason="refunds need a ticket")
    result = await _resume(llm, paused.state, {paused.pending_approvals[0].id: decision}, invoke=invoke)
    assert invoke.calls == [("weather", {"city": "Paris"})]
    tool_messages = [m for m in llm.requests[1].body["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 2 and "refunds need a ticket" in tool_messages[1]["content"]
    assert "approval_denied" in tool_messages[1]["content"]
    assert result.steps[1].error_type == "approval_denied"


async def test_partial_decisions_keep_the_run_paused(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("refund", {"amount": 1}), Call("refund", {"amount": 2})]), Reply(text="Both done."))
    paused = await _start(llm)
    first, second = paused.pending_approvals
    invoke = StandInInvoke()
    still = await _resume(llm, paused.state, {first.id: "approve"}, invoke=invoke)
    assert still.paused and [p.id for p in still.pending_approvals] == [second.id]
    assert invoke.calls == [] and len(llm.requests) == 1
    done = await _resume(llm, still.state, {second.id: "deny"}, invoke=invoke)
    assert invoke.calls == [("refund", {"amount": 1})]
    assert done.message.content == "Both done."


async def test_resume_rejects_bad_input(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("refund", {"amount": 1})]))
    paused = await _start(llm)
    approval = paused.pending_approvals[0].id
    with pytest.raises(ValueError, match="no pending approval"):
        await _resume(llm, paused.state, {"apr_unknown": "approve"})
    with pytest.raises(ValueError, match="approve' or 'deny"):
        await _resume(llm, paused.state, {approval: "maybe"})
    with pytest.raises(ValueError, match="belongs to agent"):
        other = agent_config()
        other.name = "auditor"
        await resume(paused.state, {approval: "approve"}, agent=other, adapter=adapter_for("openai", llm.url),
                     toolset=_tools(), invoke=StandInInvoke())
