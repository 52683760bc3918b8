"""OpenAI's Responses API as a provider: input items, function_call_output per call, reasoning items echoed."""

from __future__ import annotations

import json

import pytest
from loop_support import StandInInvoke, run_turns
from scripted_llm import Call, Reply, ScriptedLLM

from gateway.messages import ToolResult

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("stream", [False, True])
async def test_items_out_and_reasoning_kept_across_the_loops_turns(llm: ScriptedLLM, stream: bool) -> None:
    llm.script(Reply(text="Looking.", thinking="plan", signature="enc-1",
                     calls=[Call("weather", {"city": "Paris"}, id="call_a"), Call("time", {}, id="call_b")]),
               Reply(text="Sunny at noon."))
    invoke = StandInInvoke(lambda t, c: ToolResult.failure("upstream_error", "HTTP 404", status=404)
                           if t.name == "time" else ToolResult(ok=True, status=200, body={"t": 20}))
    result = await run_turns(llm.url, "openai-responses", stream=stream, invoke=invoke)
    assert result.message.content == "Sunny at noon."
    assert invoke.calls == [("weather", {"city": "Paris"}), ("time", {})]
    assert result.usage.llm_calls == 2 and result.usage.input_tokens == 20
    if stream:
        assert "".join(result.texts) == "Looking.Sunny at noon."

    first, second = llm.requests
    assert first.path == "/v1/responses" and first.headers["authorization"] == "Bearer secret-key"
    assert first.body["store"] is False and first.body["include"] == ["reasoning.encrypted_content"]
    assert first.body["input"][0] == {"type": "message", "role": "developer", "content": "You are the clerk."}
    assert [(t["type"], t["name"]) for t in first.body["tools"]] == [("function", "weather"), ("function", "time")]
    assert first.body.get("stream", False) is stream
    reasoning, said, *calls_and_outputs = second.body["input"][2:]
    assert reasoning == {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}],
                         "encrypted_content": "enc-1"}
    assert said["role"] == "assistant" and said["content"][0]["text"] == "Looking."
    assert [(i["type"], i["call_id"]) for i in calls_and_outputs] == [
        ("function_call", "call_a"), ("function_call", "call_b"),
        ("function_call_output", "call_a"), ("function_call_output", "call_b")]
    assert calls_and_outputs[0]["arguments"] == '{"city": "Paris"}'
    assert json.loads(calls_and_outputs[2]["output"]) == {"t": 20}
    assert json.loads(calls_and_outputs[3]["output"])["status"] == 404


async def test_an_answer_cut_by_max_output_tokens_is_length(llm: ScriptedLLM) -> None:
    llm.script(Reply(text="It is", finish="length"))
    result = await run_turns(llm.url, "openai-responses")
    assert result.finish_reason == "length"


async def test_a_stream_error_is_a_provider_error(llm: ScriptedLLM) -> None:
    from gateway.errors import ProviderError

    llm.script(Reply(text="Sunny all day long in Paris", stream_error="overloaded"))
    with pytest.raises(ProviderError, match="overloaded"):
        await run_turns(llm.url, "openai-responses", stream=True)
