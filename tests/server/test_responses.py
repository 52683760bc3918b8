"""`POST /v1/responses` and `GET /v1/responses/{id}` with the official openai SDK against a real gateway."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import Response
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import LenientLLM, gateway

from gateway.server.responses_object import ResponseShape

pytestmark = pytest.mark.anyio

FORECAST_CALL = Call("getForecast", {"latitude": 52.52, "longitude": 13.41, "current": ["temperature_2m"]})
SMS_TOOL = {"type": "function", "name": "send_sms", "description": "Text someone.",
            "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "text": {"type": "string"}},
                           "required": ["to", "text"], "additionalProperties": False}, "strict": True}
SMS_CALL = Call("send_sms", {"to": "ann", "text": "3.5 °C"}, id="call_sms")

def _client(url: str, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)


def _valid(response: Response) -> Response:
    return Response.model_validate(response.model_dump(exclude_unset=True))


async def test_create_runs_the_agents_loop_and_retrieve_gives_it_back(
        gw: tuple[str, Any], llm: LenientLLM, upstream: RecordingServer) -> None:
    url, _ = gw
    client = _client(url)
    llm.script(Reply(calls=[FORECAST_CALL]), Reply(text="It is 3.5 °C in Berlin."))
    response = _valid(client.responses.create(model="weather", input="Weather in Berlin?", instructions="Be brief.",
                                              temperature=0.2, max_output_tokens=300))
    assert response.output_text == "It is 3.5 °C in Berlin."
    assert response.status == "completed" and response.model == "weather"
    assert response.usage is not None and response.usage.total_tokens == 30
    steps = response.model_extra["gateway"]["steps"]
    assert [(s["tool"], s["status"]) for s in steps] == [("getForecast", 200)]
    assert upstream.last.path == "/meteo/v1/forecast"
    first = llm.bodies()[0]
    assert first["temperature"] == 0.2 and first["max_tokens"] == 300
    assert [(m["role"], m["content"]) for m in first["messages"]] == [
        ("system", "You answer weather questions."), ("system", "Be brief."), ("user", "Weather in Berlin?")]

    again = client.responses.retrieve(response.id)
    assert again.id == response.id and again.output_text == response.output_text


async def test_streamed_response_is_the_event_sequence_the_sdk_accumulates(
        gw: tuple[str, Any], llm: LenientLLM) -> None:
    url, _ = gw
    llm.script(Reply(text="Let me look. ", calls=[FORECAST_CALL]), Reply(text="It is 3.5 °C."))
    with _client(url).responses.stream(model="weather", input="Berlin?") as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert "gateway.step_finished" in kinds
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "Let me look. It is 3.5 °C."
    assert [item.type for item in final.output] == ["message", "message"]  # one per turn that spoke
    assert final.output_text == "Let me look. It is 3.5 °C."
    assert client_retrieves(url, final.id).output_text == final.output_text


def client_retrieves(url: str, response_id: str) -> Response:
    return _client(url).responses.retrieve(response_id)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_callers_function_is_handed_back_and_its_output_continues_the_run(
        gw: tuple[str, Any], llm: LenientLLM, upstream: RecordingServer, stream: bool) -> None:
    url, _ = gw
    client = _client(url)
    llm.script(Reply(calls=[FORECAST_CALL, SMS_CALL]), Reply(text="Sent."))
    if stream:
        with client.responses.stream(model="weather", input="Text Ann the weather.", tools=[SMS_TOOL]) as events:
            first = events.get_final_response()
    else:
        first = client.responses.create(model="weather", input="Text Ann the weather.", tools=[SMS_TOOL])
    calls = [item for item in first.output if item.type == "function_call"]
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("call_sms", "send_sms", {"to": "ann", "text": "3.5 °C"})]
    assert upstream.last.path == "/meteo/v1/forecast"

    second = client.responses.create(model="weather", previous_response_id=first.id, tools=[SMS_TOOL],
                                     input=[{"type": "function_call_output", "call_id": "call_sms",
                                             "output": "delivered"}])
    assert second.output_text == "Sent."
    sent = llm.bodies()[1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assert [c["function"]["name"] for c in sent[2]["tool_calls"]] == ["getForecast", "send_sms"]
    assert sent[4] == {"role": "tool", "tool_call_id": "call_sms", "content": "delivered"}


async def test_store_false_is_not_kept(gw: tuple[str, Any], llm: LenientLLM) -> None:
    url, _ = gw
    llm.script(Reply(text="ok"))
    response = _client(url).responses.create(model="weather", input="hi", store=False)
    assert response.store is False
    with pytest.raises(openai.NotFoundError):
        _client(url).responses.retrieve(response.id)


@pytest.mark.parametrize("stream", [False, True])
async def test_store_false_keeps_no_handed_back_turn(gw: tuple[str, Any], llm: LenientLLM, stream: bool) -> None:
    url, app = gw
    llm.script(Reply(calls=[FORECAST_CALL, SMS_CALL]))
    client = _client(url)
    if stream:
        with client.responses.stream(model="weather", input="Text Ann.", tools=[SMS_TOOL], store=False) as events:
            first = events.get_final_response()
    else:
        first = client.responses.create(model="weather", input="Text Ann.", tools=[SMS_TOOL], store=False)
    assert [item.call_id for item in first.output if item.type == "function_call"] == ["call_sms"]
    store = app.state.gateway.store
    assert await store.get_response("turn_call_sms") is None  # nothing of the conversation is kept
    assert await store.get_response(first.id) is None


async def test_what_the_gateway_cannot_honour_is_a_400_naming_it(gw: tuple[str, Any], llm: LenientLLM) -> None:
    url, _ = gw
    for body, param in (({"background": True}, "background"), ({"prompt_cache_key": 7}, "prompt_cache_key"),
                        ({"reasoning": {"generate_summary": "auto"}}, "reasoning"),
                        ({"tools": [{"type": "function", "name": "getForecast"}]}, "tools[0]"),
                        ({"tools": [{"type": "namespace", "name": "x", "tools": [{"type": "function"}]}]},
                         "tools[0].tools[0].name"),
                        ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0]"),
                        ({"model": "nobody"}, "model")):
        request = {"model": "weather", "input": "hi", **body}
        answer = httpx.post(f"{url}/v1/responses", json=request)
        assert answer.status_code in (400, 404), (body, answer.text)
        error = answer.json()["error"]
        assert error["param"] == param and error["message"], body
    assert llm.requests == []


CODEX_EXTRAS = {
    "include": ["reasoning.encrypted_content"], "prompt_cache_key": "thread-1",
    "extra_body": {"client_metadata": {"session_id": "s"}},  # not a parameter of the SDK's
    "reasoning": {"summary": "auto"}, "store": False, "parallel_tool_calls": True, "tool_choice": "auto",
    "tools": [{"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.", "tools": [
        {"type": "function", "name": "spawn_agent", "description": "Start one.", "strict": False,
         "parameters": {"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]}}]},
        {"type": "web_search", "external_web_access": False}],
}
"""What Codex CLI sends besides its input, in the shapes it sends them (one of each)."""


@pytest.mark.parametrize("stream", [False, True])
async def test_what_codex_sends_is_accepted_passed_on_or_listed_as_ignored(
        gw: tuple[str, Any], llm: LenientLLM, stream: bool) -> None:
    url, _ = gw
    llm.script(Reply(text="Let me start one.", calls=[Call("spawn_agent", {"task": "look"}, id="call_spawn")]))
    request = {"model": "weather", "input": [{"type": "message", "id": "msg_1", "role": "developer", "content": [
        {"type": "input_text", "text": "Be brief."}]}, {"type": "message", "role": "user", "content": "Berlin?"}],
        **CODEX_EXTRAS}
    client = _client(url)
    if stream:
        with client.responses.stream(**request) as events:
            response = events.get_final_response()
    else:
        response = _valid(client.responses.create(**request))
    [call] = [item for item in response.output if item.type == "function_call"]
    assert (call.name, call.namespace, call.call_id) == ("spawn_agent", "multi_agent_v1", "call_spawn")
    ignored = {item["param"]: item["reason"] for item in response.model_extra["gateway"]["ignored"]}
    assert set(ignored) == {"include", "client_metadata", "reasoning.summary", "tools[1]"}
    assert "web_search" in ignored["tools[1]"]
    sent = llm.bodies()[0]  # an openai provider: the cache key goes on; the namespace's function is offered
    assert sent["prompt_cache_key"] == "thread-1"
    assert [t["function"]["name"] for t in sent["tools"]] == ["getForecast", "spawn_agent"]
    assert not {"include", "client_metadata", "reasoning"} & set(sent)


async def test_both_doors_take_a_prompt_cache_key_alike(gw: tuple[str, Any], llm: LenientLLM) -> None:
    url, _ = gw
    chat = httpx.post(f"{url}/v1/chat/completions", json={
        "model": "weather", "messages": [{"role": "user", "content": "hi"}], "prompt_cache_key": "k1"})
    responses = httpx.post(f"{url}/v1/responses", json={"model": "weather", "input": "hi", "prompt_cache_key": "k2"})
    assert chat.status_code == responses.status_code == 200
    assert [body["prompt_cache_key"] for body in llm.bodies()] == ["k1", "k2"]  # both passed to the openai provider
    # triage runs on ollama, which takes no cache key: ignored, and said so, on both doors
    chat = httpx.post(f"{url}/v1/chat/completions", json={
        "model": "triage", "messages": [{"role": "user", "content": "hi"}], "prompt_cache_key": "k3"}).json()
    responses = httpx.post(f"{url}/v1/responses", json={"model": "triage", "input": "hi",
                                                        "prompt_cache_key": "k4"}).json()
    for answer in (chat, responses):
        [ignored] = answer["gateway"]["ignored"]
        assert ignored["param"] == "prompt_cache_key" and "ollama" in ignored["reason"]
    assert "prompt_cache_key" not in llm.bodies()[-1]


RESPONSES_PROVIDER_YAML = """\
providers:
  oai: {{kind: openai-responses, base_url: "{llm}/v1", api_key: test-key}}
apis:
  open-meteo: {{base_url: "{upstream}/meteo"}}
agents:
  weather:
    model: oai/gpt-test
    tools: [{{api: open-meteo}}]
"""


@pytest.mark.parametrize("stream", [False, True])
async def test_an_agent_on_an_openai_responses_provider(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, stream: bool) -> None:
    with gateway(tmp_path, llm.url, upstream.url, agents_yaml=RESPONSES_PROVIDER_YAML) as (url, _):
        client = _client(url)
        llm.script(Reply(thinking="plan", signature="enc-1", calls=[FORECAST_CALL, SMS_CALL]), Reply(text="Sent."))
        request: dict[str, Any] = {"model": "weather", "input": "Text Ann.", "tools": [SMS_TOOL],
                                   "tool_choice": {"type": "function", "name": "send_sms"}}
        if stream:
            with client.responses.stream(**request) as events:
                first = events.get_final_response()
        else:
            first = client.responses.create(**request)
        assert [item.type for item in first.output] == ["function_call"]
        assert upstream.last.path == "/meteo/v1/forecast"
        sent = llm.bodies()[0]
        assert sent["tool_choice"] == {"type": "function", "name": "send_sms"}
        assert [t["name"] for t in sent["tools"]] == ["getForecast", "send_sms"]

        client.responses.create(model="weather", previous_response_id=first.id, input=[
            {"type": "function_call_output", "call_id": "call_sms", "output": "delivered"}])
        items = llm.bodies()[1]["input"]
        assert [i["type"] for i in items] == ["message", "reasoning", "function_call", "function_call",
                                              "function_call_output", "function_call_output"]
        assert items[1]["encrypted_content"] == "enc-1"  # the reasoning of the handed-back turn was kept
        assert items[-1] == {"type": "function_call_output", "call_id": "call_sms", "output": "delivered"}


async def test_a_run_failing_mid_stream_ends_with_response_failed(gw: tuple[str, Any], llm: LenientLLM) -> None:
    url, _ = gw
    llm.script(Reply(status=400, error="model refused the request"))
    events = list(_client(url).responses.create(model="weather", input="hi", stream=True))
    assert [e.type for e in events] == ["response.created", "response.in_progress", "response.failed"]
    failed = events[-1].response
    assert failed.status == "failed" and "model refused the request" in failed.error.message
    Response.model_validate(failed.model_dump(exclude_unset=True))


async def test_a_script_runs_at_the_responses_door(tmp_path: Path, llm: LenientLLM,
                                                   upstream: RecordingServer) -> None:
    from server_support import AGENTS_YAML

    agents_yaml = AGENTS_YAML.replace("    max_iterations: 4\n", "    max_iterations: 4\n    code_mode: only\n")
    code = ("cities = {'Berlin': (52.52, 13.41), 'Paris': (48.85, 2.35)}\n"
            "{c: getForecast(latitude=la, longitude=lo, current=['temperature_2m'])['current']['temperature_2m']"
            " for c, (la, lo) in cities.items()}")
    llm.script(Reply(calls=[Call("run_code", {"code": code})]), Reply(text="3.5 °C in both."))
    with gateway(tmp_path, llm.url, upstream.url, agents_yaml=agents_yaml) as (url, _):
        response = _valid(_client(url).responses.create(model="weather", input="Berlin or Paris?"))
    assert response.output_text == "3.5 °C in both."
    [step] = response.model_extra["gateway"]["steps"]
    assert step["tool"] == "run_code" and [s["tool"] for s in step["steps"]] == ["getForecast", "getForecast"]
    assert [r.path for r in upstream.requests] == ["/meteo/v1/forecast", "/meteo/v1/forecast"]
    assert json.loads(llm.bodies()[1]["messages"][-1]["content"]) == {"Berlin": 3.5, "Paris": 3.5}
    assert [t["function"]["name"] for t in llm.bodies()[0]["tools"]] == ["run_code", "search_tools", "describe_tool"]


def test_a_runs_shape_keeps_the_requests_echo_as_it_is_and_survives_the_store() -> None:
    """redteam44: the shape (kept with a run, made before every run on this door) was `dataclasses.asdict`, a deep
    copy of the request's echo, caller tools and schemas included, in Python on the event loop: 512 caller tools
    in a 2 MB body held every other request of the process for 2.0 s (the longest wait between two /healthz
    answers; 0.7-0.95 s after, the body's parse being most of it; load 13-16). Its fields are kept as they are."""
    tools = [{"type": "function", "name": f"mine_{i}", "parameters": {"type": "object", "properties": {
        "a": {"type": "object", "properties": {"b": {"type": "string"}}}}}} for i in range(512)]
    shape = ResponseShape.of({"tools": tools, "metadata": {"k": "v"}, "input": "not echoed"}, keep=True, created=1,
                             first_new=2, skip=1, namespaces={"mine_1": "ns"})
    state = shape.to_state()
    assert state["request"]["tools"] is tools  # not copied
    assert ResponseShape.from_state(json.loads(json.dumps(state))) == shape  # as the store gives it back
