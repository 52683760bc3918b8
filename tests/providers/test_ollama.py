"""Ollama /api/chat: objects both ways, "stop" with calls, NDJSON streaming, tool_name on results."""

from __future__ import annotations

import pytest
from loop_support import StandInInvoke, run_turns
from scripted_llm import Call, Reply, ScriptedLLM

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("stream", [False, True])
async def test_object_arguments_both_ways_and_one_tool_message_per_call(llm: ScriptedLLM, stream: bool) -> None:
    llm.script(Reply(calls=[Call("weather", {"city": "Paris"}), Call("weather", {"city": "Rome"})]),
               Reply(text="Sunny."))
    invoke = StandInInvoke()
    result = await run_turns(llm.url, "ollama", stream=stream, invoke=invoke)
    assert invoke.calls == [("weather", {"city": "Paris"}), ("weather", {"city": "Rome"})]
    first, second = llm.requests
    assert first.path == "/api/chat" and first.body["stream"] is stream  # explicit: Ollama streams by default
    assert [t["function"]["name"] for t in first.body["tools"]] == ["weather", "time"]
    assistant = second.body["messages"][2]
    assert [c["function"]["arguments"] for c in assistant["tool_calls"]] == [{"city": "Paris"}, {"city": "Rome"}]
    tools = second.body["messages"][3:]
    assert [(m["role"], m["tool_name"]) for m in tools] == [("tool", "weather"), ("tool", "weather")]
    assert "Paris" in tools[0]["content"] and "Rome" in tools[1]["content"]
    assert result.message.content == "Sunny." and result.usage.output_tokens == 10


async def test_thinking_is_echoed(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("weather", {})], thinking="Use the tool."), Reply(text="ok"))
    await run_turns(llm.url, "ollama", stream=True)
    assert llm.requests[1].body["messages"][2]["thinking"] == "Use the tool."


async def test_streamed_text_and_length_truncation(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("weather", {})], finish="length"), Reply(text="It is sunny.", chunks=3))
    invoke = StandInInvoke()
    result = await run_turns(llm.url, "ollama", stream=True, invoke=invoke)
    assert invoke.calls == [] and result.steps[0].error_type == "truncated_turn"
    assert len(result.texts) == 3 and "".join(result.texts) == "It is sunny."


async def test_parameters_go_to_options(llm: ScriptedLLM) -> None:
    from loop_support import adapter_for

    from gateway.messages import Message

    llm.script(Reply(text="ok"))
    await adapter_for("ollama", llm.url).complete("m", [Message(role="user", content="hi")],
                                                   params={"temperature": 0, "max_tokens": 64, "keep_alive": "5m",
                                                           "response_format": {"type": "json_object"}, "user": "u"})
    body = llm.requests[0].body
    assert body["options"] == {"temperature": 0, "num_predict": 64} and body["keep_alive"] == "5m"
    assert body["format"] == "json" and "user" not in body
