"""Anthropic Messages: tool_result blocks first in the next user message, thinking echoed, input_json_delta."""

from __future__ import annotations

import pytest
from loop_support import StandInInvoke, run_turns
from scripted_llm import Call, Reply, ScriptedLLM

from gateway.messages import ToolResult

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("stream", [False, True])
async def test_results_are_the_first_blocks_of_the_next_user_message(llm: ScriptedLLM, stream: bool) -> None:
    calls = [Call("weather", {"city": "Paris"}, id="toolu_1"), Call("time", {}, id="toolu_2")]
    llm.script(Reply(text="Checking.", calls=calls), Reply(text="ok"))
    invoke = StandInInvoke(lambda t, c: ToolResult.failure("timeout", "too slow") if t.name == "time"
                           else ToolResult(ok=True, body="20 degrees"))
    await run_turns(llm.url, "anthropic", stream=stream, invoke=invoke)
    first, second = llm.requests
    assert first.path == "/v1/messages"
    assert first.headers["x-api-key"] == "secret-key" and first.headers["anthropic-version"] == "2023-06-01"
    assert first.body["system"] == "You are the clerk." and first.body["max_tokens"] > 0
    assert [m["role"] for m in first.body["messages"]] == ["user"]
    assert [t["name"] for t in first.body["tools"]] == ["weather", "time"]
    user, assistant, results = second.body["messages"]
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use", "tool_use"]
    assert assistant["content"][1] == {"type": "tool_use", "id": "toolu_1", "name": "weather",
                                       "input": {"city": "Paris"}}
    assert results["role"] == "user"
    assert [(b["type"], b["tool_use_id"], b.get("is_error", False)) for b in results["content"]] == [
        ("tool_result", "toolu_1", False), ("tool_result", "toolu_2", True)]
    assert results["content"][0]["content"] == "20 degrees"


@pytest.mark.parametrize("stream", [False, True])
async def test_thinking_blocks_are_echoed_before_the_calls(llm: ScriptedLLM, stream: bool) -> None:
    llm.script(Reply(calls=[Call("weather", {})], thinking="Weather needs a tool.", signature="sig-xyz"),
               Reply(text="ok"))
    await run_turns(llm.url, "anthropic", stream=stream)
    assistant = llm.requests[1].body["messages"][1]
    assert assistant["content"][0] == {"type": "thinking", "thinking": "Weather needs a tool.",
                                       "signature": "sig-xyz"}
    assert assistant["content"][1]["type"] == "tool_use"


async def test_streamed_parallel_calls_with_empty_first_partial_json(llm: ScriptedLLM) -> None:
    calls = [Call("weather", {"city": "Paris", "days": 3}), Call("time", {}), Call("weather", {"city": "Rome"})]
    llm.script(Reply(calls=calls, chunks=4), Reply(text="Sunny everywhere.", chunks=3))
    invoke = StandInInvoke()
    result = await run_turns(llm.url, "anthropic", stream=True, invoke=invoke)
    assert invoke.calls == [("weather", {"city": "Paris", "days": 3}), ("time", {}), ("weather", {"city": "Rome"})]
    assert "".join(result.texts) == "Sunny everywhere." and len(result.texts) == 3
    assert result.usage.output_tokens == 10 and result.usage.input_tokens == 20


async def test_summary_without_tools_writes_past_calls_as_text(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("weather", {"city": "Paris"})]), Reply(text="Summary."))
    result = await run_turns(llm.url, "anthropic", max_iterations=1)
    body = llm.requests[1].body
    assert result.cut and "tools" not in body
    blocks = [b for m in body["messages"] for b in m["content"]]
    assert {b["type"] for b in blocks} == {"text"}  # no tool_use/tool_result without tool definitions
    assert any("weather" in b["text"] and "Paris" in b["text"] for b in blocks)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]


async def test_max_tokens_stop_is_a_truncated_turn(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("weather", {})], finish="length"), Reply(text="ok"))
    invoke = StandInInvoke()
    result = await run_turns(llm.url, "anthropic", invoke=invoke)
    assert invoke.calls == [] and result.steps[0].error_type == "truncated_turn"
    results = llm.requests[1].body["messages"][2]["content"]
    assert results[0]["type"] == "tool_result" and results[0]["is_error"] is True


async def test_openai_parameters_are_translated_or_left_out(llm: ScriptedLLM) -> None:
    from loop_support import adapter_for

    from gateway.messages import Message

    llm.script(Reply(text="ok"))
    params = {"temperature": 0.1, "max_completion_tokens": 99, "stop": "END", "user": "u1", "seed": 4,
              "presence_penalty": 0.5, "response_format": {"type": "json_object"}, "logit_bias": {"1": 2}}
    await adapter_for("anthropic", llm.url).complete("m", [Message(role="user", content="hi")], params=params)
    body = llm.requests[0].body
    assert {k: body[k] for k in ("temperature", "max_tokens", "stop_sequences", "metadata")} == {
        "temperature": 0.1, "max_tokens": 99, "stop_sequences": ["END"], "metadata": {"user_id": "u1"}}
    assert not {"seed", "presence_penalty", "response_format", "logit_bias", "user", "stop"} & set(body)


async def test_a_tool_without_arguments_streams_only_an_empty_partial_json(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("time", raw="")]), Reply(text="ok"))
    invoke = StandInInvoke()
    await run_turns(llm.url, "anthropic", stream=True, invoke=invoke)
    assert invoke.calls == [("time", {})]
    assert llm.requests[1].body["messages"][1]["content"][0]["input"] == {}
