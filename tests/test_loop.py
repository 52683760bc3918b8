"""The loop against the scripted LLM over real HTTP, in every wire format: calls, errors, limits, approvals."""

from __future__ import annotations

import json
import threading

import anyio
import pytest
from loop_support import KINDS, StandInInvoke, adapter_for, agent_config, agent_tool, toolset
from scripted_llm import Call, Reply, ScriptedLLM

from gateway.loop import run
from gateway.loop_types import LoopError, LoopEvent
from gateway.messages import Message, ToolResult

pytestmark = pytest.mark.anyio

USER = [Message(role="user", content="What is the weather?")]


def _tools_sent(kind: str, body: dict) -> list:
    return body.get("tools") or []


def _results_sent(kind: str, body: dict) -> list[str]:
    """The text of every tool result in a request, in order, whatever the format."""
    if kind == "anthropic":
        return [b["content"] for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], list)
                for b in m["content"] if b.get("type") == "tool_result"]
    if kind == "gemini":
        return [json.dumps(p["functionResponse"]["response"]) for c in body["contents"] for p in c["parts"]
                if "functionResponse" in p]
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


async def _run(llm: ScriptedLLM, kind: str, invoke=None, tools=None, *, stream=False, events=None, **policy):
    async def on_event(event: LoopEvent) -> None:
        if events is not None:
            events.append(event)

    return await run(agent_config(kind, **policy), USER, adapter=adapter_for(kind, llm.url),
                     toolset=tools or toolset(agent_tool("weather"), agent_tool("time")),
                     invoke=invoke or StandInInvoke(), stream=stream, on_event=on_event)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("kind", KINDS)
async def test_single_call_then_answer(llm: ScriptedLLM, kind: str, stream: bool) -> None:
    llm.script(Reply(calls=[Call("weather", {"city": "Paris"})], usage=(7, 3)), Reply(text="Sunny.", usage=(11, 2)))
    invoke = StandInInvoke()
    result = await _run(llm, kind, invoke, stream=stream)
    assert result.message.content == "Sunny."
    assert invoke.calls == [("weather", {"city": "Paris"})]
    assert [(s.tool, s.arguments, s.ok, s.status) for s in result.steps] == [("weather", {"city": "Paris"}, True, 200)]
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.llm_calls) == (18, 5, 2)
    assert not result.cut and result.iterations == 2
    assert "Paris" in _results_sent(kind, llm.requests[1].body)[0]


@pytest.mark.parametrize("kind", KINDS)
async def test_parallel_calls_run_concurrently_and_answer_in_call_order(llm: ScriptedLLM, kind: str) -> None:
    llm.script(Reply(calls=[Call("weather", {"city": "Paris"}), Call("weather", {"city": "Rome"}),
                            Call("time", {"city": "Oslo"})]), Reply(text="Done."))
    both_started = anyio.Event()
    in_flight = 0

    async def invoke(tool, call):
        nonlocal in_flight
        in_flight += 1
        if in_flight == 3:
            both_started.set()
        with anyio.fail_after(5):
            await both_started.wait()  # returns only if all three calls are in flight at once
        if call.arguments["city"] == "Paris":
            await anyio.sleep(0.05)  # the first call finishes last
        return ToolResult(ok=True, status=200, body=f"result for {call.arguments['city']}")

    result = await _run(llm, kind, invoke)
    assert result.message.content == "Done."
    sent = _results_sent(kind, llm.requests[1].body)
    assert [("Paris" in s, "Rome" in s, "Oslo" in s) for s in sent] == [
        (True, False, False), (False, True, False), (False, False, True)]
    assert [s.arguments["city"] for s in result.steps] == ["Paris", "Rome", "Oslo"]


async def test_max_parallel_calls_bounds_concurrency(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("weather", {"city": c}) for c in "ABCD"]), Reply(text="ok"))
    current = peak = 0

    async def invoke(tool, call):
        nonlocal current, peak
        current += 1
        peak = max(peak, current)
        await anyio.sleep(0.01)
        current -= 1
        return ToolResult(ok=True, body="x")

    await _run(llm, "openai", invoke, max_parallel_calls=2)
    assert peak == 2


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("raw, expected", [('{"city": "Paris"}', {"city": "Paris"}), ("", {})])
async def test_string_arguments_are_parsed(llm: ScriptedLLM, raw: str, expected: dict, stream: bool) -> None:
    llm.script(Reply(calls=[Call("weather", raw=raw)]), Reply(text="ok"))
    invoke = StandInInvoke()
    await _run(llm, "openai", invoke, stream=stream)
    assert invoke.calls == [("weather", expected)]


# Only OpenAI sends argument text (and Anthropic streams it as partial JSON); the others send objects.
@pytest.mark.parametrize("kind, stream", [("openai", False), ("openai", True), ("anthropic", True)])
async def test_broken_json_is_reported_then_the_model_recovers(llm: ScriptedLLM, kind: str, stream: bool) -> None:
    llm.script(Reply(calls=[Call("weather", raw='{"city": "Par')]), Reply(calls=[Call("weather", {"city": "Paris"})]),
               Reply(text="Sunny."))
    invoke = StandInInvoke()
    result = await _run(llm, kind, invoke, stream=stream)
    assert invoke.calls == [("weather", {"city": "Paris"})]
    error = json.loads(_results_sent(kind, llm.requests[1].body)[0])
    assert error["error_type"] == "invalid_arguments" and "not valid JSON" in error["error"]
    assert [s.error_type for s in result.steps] == ["invalid_arguments", None]
    assert result.message.content == "Sunny."


@pytest.mark.parametrize("kind", KINDS)
async def test_unknown_tool_gets_an_error_listing_valid_names(llm: ScriptedLLM, kind: str) -> None:
    llm.script(Reply(calls=[Call("forecast", {"city": "Paris"})]), Reply(text="Sorry."))
    invoke = StandInInvoke()
    events: list[LoopEvent] = []
    result = await _run(llm, kind, invoke, events=events)
    assert invoke.calls == []
    assert [(e.type, e.step.tool, e.step.error_type) for e in events] == [
        ("step_started", "forecast", None), ("step_finished", "forecast", "unknown_tool")]
    sent = _results_sent(kind, llm.requests[1].body)[0]
    assert "forecast" in sent and "weather" in sent and "time" in sent and "unknown_tool" in sent
    assert result.message.content == "Sorry."


async def test_consecutive_errors_end_the_run(llm: ScriptedLLM) -> None:
    llm.script(*[Reply(calls=[Call("nope", {})]) for _ in range(5)])
    with pytest.raises(LoopError) as caught:
        await _run(llm, "openai", max_consecutive_errors=3)
    assert caught.value.code == "too_many_errors"
    assert "3 iterations in a row" in str(caught.value) and "nope" in str(caught.value)
    assert len(llm.requests) == 3 and len(caught.value.steps) == 3


async def test_a_success_resets_the_error_count(llm: ScriptedLLM) -> None:
    failing = Reply(calls=[Call("nope", {})])
    llm.script(failing, Reply(calls=[Call("weather", {})]), Reply(calls=[Call("nope", {})]),
               Reply(calls=[Call("nope", {})]), Reply(text="ok"))
    result = await _run(llm, "openai", max_consecutive_errors=3)
    assert result.message.content == "ok"


async def test_upstream_errors_count_as_failing_calls(llm: ScriptedLLM) -> None:
    llm.script(*[Reply(calls=[Call("weather", {})]) for _ in range(2)])
    invoke = StandInInvoke(lambda t, c: ToolResult.failure("upstream_error", "HTTP 500", status=500))
    with pytest.raises(LoopError, match="HTTP 500"):
        await _run(llm, "openai", invoke, max_consecutive_errors=2)


@pytest.mark.parametrize("kind", KINDS)
async def test_iteration_cap_ends_with_a_summary_call_without_tools(llm: ScriptedLLM, kind: str) -> None:
    llm.script(Reply(calls=[Call("weather", {"city": "A"})]), Reply(calls=[Call("weather", {"city": "B"})]),
               Reply(text="Summary: A and B are sunny."))
    result = await _run(llm, kind, max_iterations=2)
    assert result.cut and result.message.content == "Summary: A and B are sunny."
    assert len(llm.requests) == 3
    assert [bool(_tools_sent(kind, r.body)) for r in llm.requests] == [True, True, False]
    last = json.dumps(llm.requests[2].body)
    assert "Do not call any tools" in last
    assert result.usage.llm_calls == 3 and len(result.steps) == 2


async def test_tool_call_cap_refuses_extra_calls_then_summarizes(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("weather", {"city": c}) for c in "ABC"]), Reply(text="Summary."))
    invoke = StandInInvoke()
    result = await _run(llm, "openai", invoke, max_tool_calls=2)
    assert [c[1]["city"] for c in invoke.calls] == ["A", "B"]
    assert [s.error_type for s in result.steps] == [None, None, "rate_limited"]
    assert result.cut and "tools" not in llm.requests[1].body


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("kind", KINDS)
async def test_truncated_turn_is_not_executed(llm: ScriptedLLM, kind: str, stream: bool) -> None:
    llm.script(Reply(calls=[Call("weather", {"city": "Paris"}), Call("time", {})], finish="length"),
               Reply(text="Let me answer briefly."))
    invoke = StandInInvoke()
    result = await _run(llm, kind, invoke, stream=stream)
    assert invoke.calls == []
    sent = _results_sent(kind, llm.requests[1].body)
    assert len(sent) == 2 and all("truncated_turn" in s for s in sent)
    assert [s.error_type for s in result.steps] == ["truncated_turn", "truncated_turn"]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("kind", KINDS)
async def test_an_answer_cut_by_the_token_limit_says_so(llm: ScriptedLLM, kind: str, stream: bool) -> None:
    llm.script(Reply(text="The forecast for Par", finish="length"))
    result = await _run(llm, kind, stream=stream)
    assert result.message.content == "The forecast for Par"
    assert result.finish_reason == "length" and not result.cut
    llm.script(Reply(text="Sunny."))
    assert (await _run(llm, kind, stream=stream)).finish_reason == "stop"


async def test_invoke_exception_becomes_an_error_result(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("weather", {})]), Reply(text="ok"))

    async def invoke(tool, call):
        raise RuntimeError("kaboom")

    result = await _run(llm, "openai", invoke)
    assert "kaboom" in _results_sent("openai", llm.requests[1].body)[0]
    assert result.steps[0].ok is False


async def test_deadline_ends_the_run(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("weather", {})]))

    async def invoke(tool, call):
        await anyio.sleep(30)

    with pytest.raises(LoopError) as caught:
        await _run(llm, "openai", invoke, timeout=0.3)
    assert caught.value.code == "deadline_exceeded"


@pytest.mark.parametrize("kind", KINDS)
async def test_streamed_text_arrives_while_the_provider_produces_it(llm: ScriptedLLM, kind: str) -> None:
    reply = Reply(text="The weather is sunny today.", chunks=4, gate=threading.Event())
    llm.script(Reply(calls=[Call("weather", {"city": "Paris"})]), reply)
    events: list[LoopEvent] = []

    async def on_event(event: LoopEvent) -> None:
        events.append(event)
        if event.type == "text":
            reply.gate.set()  # the server holds the rest of its stream until the first text reached us

    result = await run(agent_config(kind), USER, adapter=adapter_for(kind, llm.url),
                       toolset=toolset(agent_tool("weather")), invoke=StandInInvoke(), stream=True, on_event=on_event)
    assert reply.gate_released is True
    texts = [e.text for e in events if e.type == "text"]
    assert len(texts) > 1 and "".join(texts) == result.message.content == "The weather is sunny today."
    kinds = [e.type for e in events]
    assert kinds.index("step_finished") < kinds.index("text")
    assert all(e.step is None for e in events if e.type == "text")
    assert all(not e.text for e in events if e.type != "text")


async def test_gateway_extension_reports_steps_and_usage(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("weather", {"city": "Paris"})]), Reply(text="ok"))
    extension = (await _run(llm, "openai")).gateway_extension()
    json.dumps(extension)
    assert extension["steps"][0]["tool"] == "weather" and extension["steps"][0]["status"] == 200
    assert extension["cut"] is False and extension["pending_approvals"] == []
    assert extension["usage"]["total_tokens"] == 30
