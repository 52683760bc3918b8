"""Tools the caller brings, through chat completions: handed back, answered, and the run goes on."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import LenientLLM

pytestmark = pytest.mark.anyio

FORECAST_CALL = Call("getForecast", {"latitude": 52.52, "longitude": 13.41, "current": ["temperature_2m"]})
SMS_TOOL = {"type": "function", "function": {"name": "send_sms", "description": "Text someone.",
                                             "parameters": {"type": "object", "properties": {
                                                 "to": {"type": "string"}, "text": {"type": "string"}},
                                                 "required": ["to", "text"]}}}
SMS_CALL = Call("send_sms", {"to": "ann", "text": "3.5 °C"}, id="call_sms")


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_callers_tool_is_handed_back_after_the_gateways_own_call_and_the_run_goes_on(
        gw: tuple[str, Any], llm: LenientLLM, upstream: RecordingServer, stream: bool) -> None:
    url, _ = gw
    client = _client(url)
    llm.script(Reply(text="Looking.", calls=[FORECAST_CALL, SMS_CALL]), Reply(text="Sent Ann the forecast."))
    messages: list[Any] = [{"role": "user", "content": "Text Ann the Berlin weather."}]
    if stream:
        with client.chat.completions.stream(model="weather", messages=messages, tools=[SMS_TOOL]) as events:
            completion = events.get_final_completion()
    else:
        completion = client.chat.completions.create(model="weather", messages=messages, tools=[SMS_TOOL])

    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls] == [
        ("call_sms", "send_sms", {"to": "ann", "text": "3.5 °C"})]
    assert upstream.last.path == "/meteo/v1/forecast"  # the agent's own call of that turn ran
    steps = completion.model_extra["gateway"]["steps"] if not stream else None
    if steps is not None:
        assert [(s["tool"], s.get("handed_back", False)) for s in steps] == [("getForecast", False),
                                                                              ("send_sms", True)]
    offered = [t["function"]["name"] for t in llm.bodies()[0]["tools"]]
    assert offered == ["getForecast", "send_sms"]

    # The caller runs its tool and sends the result back, repeating the turn as it saw it.
    messages += [choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": "call_sms", "content": "sent"}]
    final = client.chat.completions.create(model="weather", messages=messages, tools=[SMS_TOOL])
    assert final.choices[0].message.content == "Sent Ann the forecast."
    assert final.choices[0].finish_reason == "stop"

    # The model saw its whole turn: both calls, the gateway's result and the caller's.
    sent = llm.bodies()[1]["messages"]
    turn = next(m for m in sent if m["role"] == "assistant")
    assert [c["function"]["name"] for c in turn["tool_calls"]] == ["getForecast", "send_sms"]
    results = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    assert results["call_sms"] == "sent"
    assert json.loads(results[turn["tool_calls"][0]["id"]])["current"]["temperature_2m"] == 3.5
    assert len(upstream.requests) == 1  # the forecast was not fetched twice


async def test_a_callers_tool_may_not_take_an_agent_tools_name(gw: tuple[str, Any], llm: LenientLLM) -> None:
    url, _ = gw
    shadow = {"type": "function", "function": {"name": "getForecast", "parameters": {"type": "object"}}}
    with pytest.raises(openai.BadRequestError) as caught:
        _client(url).chat.completions.create(model="weather", messages=[{"role": "user", "content": "hi"}],
                                             tools=[shadow])
    assert caught.value.status_code == 400 and caught.value.code == "tool_name_taken"
    assert "getForecast" in caught.value.message
    assert llm.requests == []


@pytest.mark.parametrize("name", ["search_tools", "describe_tool", "call_tool", "run_code"])
async def test_a_callers_tool_may_not_take_a_gateway_tools_name(gw: tuple[str, Any], llm: LenientLLM,
                                                                name: str) -> None:
    url, _ = gw
    shadow = {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    with pytest.raises(openai.BadRequestError) as caught:
        _client(url).chat.completions.create(model="weather", messages=[{"role": "user", "content": "hi"}],
                                             tools=[shadow])
    assert caught.value.status_code == 400 and caught.value.code == "tool_name_taken" and name in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        _client(url).responses.create(model="weather", input="hi",
                                      tools=[{"type": "function", "name": name, "parameters": {"type": "object"}}])
    assert caught.value.status_code == 400 and caught.value.code == "tool_name_taken"
    assert llm.requests == []


async def test_tool_choice_is_passed_on_or_refused_with_the_reason(gw: tuple[str, Any], llm: LenientLLM) -> None:
    url, _ = gw
    client = _client(url)
    llm.script(Reply(calls=[SMS_CALL]))
    completion = client.chat.completions.create(
        model="weather", messages=[{"role": "user", "content": "hi"}], tools=[SMS_TOOL],
        tool_choice={"type": "function", "function": {"name": "send_sms"}}, parallel_tool_calls=False)
    assert completion.choices[0].finish_reason == "tool_calls"
    sent = llm.bodies()[0]
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "send_sms"}}
    assert sent["parallel_tool_calls"] is False

    # The triage agent runs on Ollama, which the gateway can't pass tool_choice to.
    for extra, param in (({"tool_choice": "required"}, "tool_choice"), ({"parallel_tool_calls": False},
                                                                         "parallel_tool_calls")):
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="triage", messages=[{"role": "user", "content": "hi"}],
                                           tools=[SMS_TOOL], **extra)
        assert caught.value.code == "unsupported_parameter" and param in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="weather", messages=[{"role": "user", "content": "hi"}],
                                       tools=[{"type": "custom", "custom": {"name": "grammar"}}])
    assert "only function tools" in caught.value.message
    assert len(llm.requests) == 1




async def test_a_history_of_made_up_calls_costs_one_lookup_a_request(gw: tuple[str, Any], llm: LenientLLM,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """redteam44: each assistant message of a history is looked up among the turns kept for handed-back calls, and
    it was looked up once per call: 16 messages of 1,000 made-up calls (1.5 MB) were 16,000 queries of the store,
    4 s of the process's CPU for one request; then once per message, up to 4,096 queries a request. A kept turn is
    found by the message's first call (the caller's copy holds the calls handed back, and the turn is kept under
    each), and every message's is asked for in one question; the handed-back flow above still finds it."""
    import httpx

    url, app = gw
    store = app.state.gateway.store
    looked: list[list[str]] = []
    lookup = store.get_responses

    async def counted(response_ids: list[str]) -> Any:
        looked.append(list(response_ids))
        return await lookup(response_ids)

    async def one_by_one(response_id: str) -> Any:
        raise AssertionError(f"{response_id} was looked up alone")

    monkeypatch.setattr(store, "get_responses", counted)
    monkeypatch.setattr(store, "get_response", one_by_one)
    made_up = [{"id": f"call_{i}", "type": "function", "function": {"name": "getForecast", "arguments": "{}"}}
               for i in range(600)]
    messages = [{"role": "user", "content": "x"},
                {"role": "assistant", "content": None, "tool_calls": made_up[:300]},
                {"role": "assistant", "content": None, "tool_calls": made_up[300:]},
                *({"role": "assistant", "content": None, "tool_calls": [{**made_up[0], "id": f"more_{i}"}]}
                  for i in range(200)),
                {"role": "user", "content": "y"}]
    llm.script(Reply(text="fine"))
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        answer = await client.post("/v1/chat/completions", json={"model": "weather", "messages": messages})
    assert answer.status_code == 200, answer.text
    assert looked == [["turn_call_0", "turn_call_300", *(f"turn_more_{i}" for i in range(200))]]
