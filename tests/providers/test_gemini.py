"""Gemini: STOP with calls, missing ids, thoughtSignature echoed, one functionResponse part per call."""

from __future__ import annotations

import pytest
from loop_support import StandInInvoke, run_turns
from scripted_llm import Call, Reply, ScriptedLLM

from gateway.messages import ToolResult

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("stream", [False, True])
async def test_stop_with_calls_runs_them_and_answers_in_one_content(llm: ScriptedLLM, stream: bool) -> None:
    calls = [Call("weather", {"city": "Paris"}), Call("weather", {"city": "Rome"}), Call("time", {})]
    llm.script(Reply(calls=calls), Reply(text="ok"))
    invoke = StandInInvoke(lambda t, c: ToolResult.failure("upstream_error", "HTTP 500", status=500)
                           if t.name == "time" else ToolResult(ok=True, body={"temp": 20}))
    result = await run_turns(llm.url, "gemini", stream=stream, invoke=invoke)
    assert [c[1] for c in invoke.calls] == [{"city": "Paris"}, {"city": "Rome"}, {}]
    assert len({s.call_id for s in result.steps}) == 3  # ids synthesized, unique though the names repeat
    first, second = llm.requests
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    assert first.path == f"/v1beta/models/model-x:{method}"
    assert first.headers["x-goog-api-key"] == "secret-key"
    assert first.body["systemInstruction"] == {"parts": [{"text": "You are the clerk."}]}
    assert [f["name"] for f in first.body["tools"][0]["functionDeclarations"]] == ["weather", "time"]
    user, model, responses = second.body["contents"]
    assert model["role"] == "model" and [p["functionCall"]["name"] for p in model["parts"]] == [
        "weather", "weather", "time"]
    assert all("id" not in p["functionCall"] for p in model["parts"])  # the model gave none: none echoed
    assert responses["role"] == "user" and len(responses["parts"]) == 3
    parts = [p["functionResponse"] for p in responses["parts"]]
    assert [p["name"] for p in parts] == ["weather", "weather", "time"] and all("id" not in p for p in parts)
    assert parts[0]["response"] == {"output": {"temp": 20}}
    assert parts[2]["response"]["error"]["status"] == 500


async def test_given_ids_are_echoed_in_function_responses(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("weather", {}, id="fc-1"), Call("time", {}, id="fc-2")]), Reply(text="ok"))
    await run_turns(llm.url, "gemini")
    parts = llm.requests[1].body["contents"][2]["parts"]
    assert [p["functionResponse"]["id"] for p in parts] == ["fc-1", "fc-2"]


@pytest.mark.parametrize("stream", [False, True])
async def test_thought_signatures_and_thoughts_are_echoed(llm: ScriptedLLM, stream: bool) -> None:
    calls = [Call("weather", {"city": "Paris"}, signature="U0lHTkFUVVJF"), Call("time", {})]
    llm.script(Reply(calls=calls, thinking="Need the weather."), Reply(text="ok"))
    result = await run_turns(llm.url, "gemini", stream=stream)
    parts = llm.requests[1].body["contents"][1]["parts"]
    assert parts[0] == {"text": "Need the weather.", "thought": True}
    assert parts[1]["thoughtSignature"] == "U0lHTkFUVVJF" and "thoughtSignature" not in parts[2]
    assert result.message.content == "ok"
    assert "Need the weather" not in "".join(result.texts)  # thoughts are not answer text


@pytest.mark.parametrize("stream", [False, True])
async def test_max_tokens_is_a_truncated_turn(llm: ScriptedLLM, stream: bool) -> None:
    llm.script(Reply(calls=[Call("weather", {})], finish="length"), Reply(text="ok"))
    invoke = StandInInvoke()
    result = await run_turns(llm.url, "gemini", stream=stream, invoke=invoke)
    assert invoke.calls == [] and result.steps[0].error_type == "truncated_turn"
    assert "error" in llm.requests[1].body["contents"][2]["parts"][0]["functionResponse"]["response"]


async def test_generation_parameters_are_mapped(llm: ScriptedLLM) -> None:
    from loop_support import adapter_for

    from gateway.messages import Message

    llm.script(Reply(text="ok"))
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    params = {"temperature": 0.2, "max_tokens": 50, "stop": "END", "user": "u", "logit_bias": {"1": 1},
              "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}
    await adapter_for("gemini", llm.url).complete("model-x", [Message(role="user", content="hi")], params=params)
    body = llm.requests[0].body
    assert body["generationConfig"] == {"temperature": 0.2, "maxOutputTokens": 50, "stopSequences": ["END"],
                                        "responseMimeType": "application/json", "responseJsonSchema": schema}
    assert set(body) == {"contents", "generationConfig"}  # nothing Gemini would refuse as unknown
