"""OpenAI Chat Completions: string arguments, one tool message per call, streamed deltas by index and id."""

from __future__ import annotations

import json

import pytest
from loop_support import StandInInvoke, run_turns
from scripted_llm import Call, Reply, ScriptedLLM

from gateway.messages import ToolResult

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("stream", [False, True])
async def test_request_shape_and_one_tool_message_per_call(llm: ScriptedLLM, stream: bool) -> None:
    llm.script(Reply(calls=[Call("weather", {"city": "Paris"}, id="call_a"), Call("time", {}, id="call_b")]),
               Reply(text="ok"))
    invoke = StandInInvoke(lambda t, c: ToolResult.failure("upstream_error", "HTTP 404", status=404)
                           if t.name == "time" else ToolResult(ok=True, status=200, body={"t": 20}))
    await run_turns(llm.url, "openai", stream=stream, invoke=invoke)
    first, second = llm.requests
    assert first.path == "/v1/chat/completions" and first.headers["authorization"] == "Bearer secret-key"
    assert first.body["messages"][0] == {"role": "system", "content": "You are the clerk."}
    assert [t["function"]["name"] for t in first.body["tools"]] == ["weather", "time"]
    assert first.body.get("stream", False) is stream
    if stream:
        assert first.body["stream_options"] == {"include_usage": True}
    assistant, *tools = second.body["messages"][2:]
    assert assistant["content"] is None
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in assistant["tool_calls"]] == [
        ("call_a", "weather", '{"city": "Paris"}'), ("call_b", "time", "{}")]
    assert [(m["role"], m["tool_call_id"]) for m in tools] == [("tool", "call_a"), ("tool", "call_b")]
    assert json.loads(tools[0]["content"]) == {"t": 20}
    assert json.loads(tools[1]["content"])["status"] == 404


async def test_streamed_parallel_calls_on_index_zero_are_split_by_id(llm: ScriptedLLM) -> None:
    calls = [Call("weather", {"city": "Paris"}), Call("weather", {"city": "Rome"}), Call("time", {"tz": "CET"})]
    llm.script(Reply(calls=calls, index_zero=True, chunks=4), Reply(text="ok"))
    invoke = StandInInvoke()
    result = await run_turns(llm.url, "openai", stream=True, invoke=invoke)
    assert invoke.calls == [("weather", {"city": "Paris"}), ("weather", {"city": "Rome"}), ("time", {"tz": "CET"})]
    assert len({s.call_id for s in result.steps}) == 3


async def test_streamed_parallel_calls_by_index(llm: ScriptedLLM) -> None:
    llm.script(Reply(text="Looking.", calls=[Call("weather", {"city": "Paris"}), Call("time", {})], chunks=5),
               Reply(text="Sunny.", chunks=2))
    invoke = StandInInvoke()
    result = await run_turns(llm.url, "openai", stream=True, invoke=invoke)
    assert invoke.calls == [("weather", {"city": "Paris"}), ("time", {})]
    assert len(result.texts) > 2 and "".join(result.texts) == "Looking.Sunny."
    assert result.message.content == "Sunny."
    assert result.usage.llm_calls == 2 and result.usage.input_tokens == 20


@pytest.mark.parametrize("stream", [False, True])
async def test_reasoning_content_is_echoed(llm: ScriptedLLM, stream: bool) -> None:
    llm.script(Reply(calls=[Call("weather", {})], thinking="I should check the weather."), Reply(text="ok"))
    await run_turns(llm.url, "openai", stream=stream)
    assistant = llm.requests[1].body["messages"][2]
    assert assistant["reasoning_content"] == "I should check the weather."


async def test_broken_arguments_are_echoed_as_sent(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("weather", raw='{"city": ')]), Reply(text="ok"))
    await run_turns(llm.url, "openai")
    assistant = llm.requests[1].body["messages"][2]
    assert assistant["tool_calls"][0]["function"]["arguments"] == '{"city": '


async def test_content_filter_and_text_beside_calls(llm: ScriptedLLM) -> None:
    llm.script(Reply(text="Let me check.", calls=[Call("weather", {})]),
               Reply(text="Refused.", finish="content_filter"))
    result = await run_turns(llm.url, "openai")
    assert llm.requests[1].body["messages"][2]["content"] == "Let me check."
    assert result.message.content == "Refused."


async def test_more_tools_than_openai_accepts_is_a_clear_error_before_sending() -> None:
    import httpx
    from loop_support import agent_tool, provider_config

    from gateway.errors import ProviderError
    from gateway.messages import Message
    from gateway.providers import get_adapter

    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]})

    tools = [agent_tool(f"t{i}") for i in range(129)]
    config = provider_config("openai", "https://api.openai.com")
    adapter = get_adapter(config, transport=httpx.MockTransport(handler))
    with pytest.raises(ProviderError, match="129 tools .* at most 128"):
        await adapter.complete("gpt-x", [Message(role="user", content="hi")], tools)
    assert sent == []
    compatible = get_adapter(provider_config("openai", "http://127.0.0.1:9"), transport=httpx.MockTransport(handler))
    turn = await compatible.complete("m", [Message(role="user", content="hi")], tools)
    assert turn.message.content == "ok" and len(sent) == 1


async def test_stream_deltas_repeating_id_and_name_stay_one_call() -> None:
    import json as _json

    import httpx
    from loop_support import provider_config

    from gateway.messages import Message
    from gateway.providers import get_adapter

    def chunk(delta: dict, finish: str | None = None) -> str:
        return "data: " + _json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n"

    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "weather"}}
    pieces = ['{"city"', ': "Paris"}']
    stream = "".join([chunk({"tool_calls": [{**call, "function": {"name": "weather", "arguments": p}}]})
                      for p in pieces] + [chunk({}, "tool_calls"), "data: [DONE]\n\n"])

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=stream, headers={"content-type": "text/event-stream"})

    adapter = get_adapter(provider_config("openai", "http://127.0.0.1:9"), transport=httpx.MockTransport(handler))

    async def on_text(text: str) -> None:
        pass

    turn = await adapter.complete("m", [Message(role="user", content="hi")], on_text=on_text)
    assert [(c.id, c.name, c.arguments) for c in turn.message.tool_calls] == [("call_1", "weather", {"city": "Paris"})]


async def test_strict_provider_sends_strict_tools_and_drops_the_nulls_of_left_out_properties(
        llm: ScriptedLLM) -> None:

    from loop_support import agent_config, agent_tool, provider_config, toolset

    from gateway.loop import run
    from gateway.messages import Message
    from gateway.providers import get_adapter

    search = agent_tool("search", properties={"q": {"type": "string"}, "limit": {"type": "integer"},
                                              "filter": {"type": "object", "properties": {
                                                  "state": {"type": "string"}, "label": {"type": "string"}}}})
    search.input_schema["required"] = ["q"]
    llm.script(Reply(calls=[Call("search", {"q": "bug", "limit": None, "filter": {"state": "open", "label": None}})]),
               Reply(text="done"))
    invoke = StandInInvoke()
    adapter = get_adapter(provider_config("openai", llm.url).model_copy(update={"strict": True}))
    await run(agent_config("openai"), [Message(role="user", content="find bugs")], adapter=adapter,
              toolset=toolset(search), invoke=invoke)
    function = llm.requests[0].body["tools"][0]["function"]
    assert function["strict"] is True
    assert function["parameters"]["required"] == ["q", "limit", "filter"]
    assert function["parameters"]["properties"]["limit"]["type"] == ["integer", "null"]
    assert invoke.calls == [("search", {"q": "bug", "filter": {"state": "open"}})]
