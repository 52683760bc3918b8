from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from recording_server import RecordingServer
from recording_server import Reply as UpstreamReply
from scripted_llm import GATE_LIMIT, Call, Reply
from server_support import AGENTS_YAML, FORECAST, ROOT, LenientLLM, gateway, running

from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app

pytestmark = pytest.mark.anyio

FORECAST_CALL = Call("getForecast", {"latitude": 52.52, "longitude": 13.41, "current": ["temperature_2m"]})


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def _tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "tool"]


async def test_sync_client_gets_the_answer_and_the_steps(gw: tuple[str, Any], llm: LenientLLM,
                                                         upstream: RecordingServer) -> None:
    url, _ = gw
    llm.script(Reply(calls=[FORECAST_CALL]), Reply(text="It is 3.5 °C in Berlin."))
    completion = _client(url).chat.completions.create(
        model="weather", messages=[{"role": "user", "content": "Weather in Berlin?"}], temperature=0.2)

    assert completion.choices[0].message.content == "It is 3.5 °C in Berlin."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "weather"
    extension = completion.model_extra["gateway"]
    assert [s["tool"] for s in extension["steps"]] == ["getForecast"]
    assert extension["steps"][0]["ok"] is True and extension["steps"][0]["status"] == 200
    assert extension["pending_approvals"] == [] and extension["cut"] is False
    assert completion.usage is not None and completion.usage.total_tokens == 30

    assert upstream.last.path == "/meteo/v1/forecast"
    first, second = llm.bodies()
    assert first["model"] == "gpt-test" and first["temperature"] == 0.2
    assert [t["function"]["name"] for t in first["tools"]] == ["getForecast"]
    assert first["messages"][0] == {"role": "system", "content": "You answer weather questions."}
    assert json.loads(_tool_messages(second)[0]["content"])["current"]["temperature_2m"] == 3.5


async def test_async_client(gw: tuple[str, Any], llm: LenientLLM) -> None:
    url, _ = gw
    llm.script(Reply(text="Hello."))
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    async with client:
        completion = await client.chat.completions.create(
            model="weather", messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                {"role": "assistant", "content": "Hello!"},
                {"role": "user", "content": "Again?"},
            ])
    assert completion.choices[0].message.content == "Hello."
    sent = [(m["role"], m["content"]) for m in llm.bodies()[0]["messages"]]
    assert sent[1:] == [("system", "Be brief."), ("user", "Hi"), ("assistant", "Hello!"), ("user", "Again?")]


@pytest.mark.parametrize("stream", [False, True])
async def test_an_answer_cut_by_the_models_token_limit_has_finish_reason_length(
        gw: tuple[str, Any], llm: LenientLLM, stream: bool) -> None:
    url, _ = gw
    llm.script(Reply(text="It is 3.5", finish="length"))
    request = {"model": "weather", "messages": [{"role": "user", "content": "Berlin?"}], "max_tokens": 4}
    if stream:
        chunks = list(_client(url).chat.completions.create(**request, stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        reasons = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    else:
        completion = _client(url).chat.completions.create(**request)
        text, reasons = completion.choices[0].message.content, [completion.choices[0].finish_reason]
    assert text == "It is 3.5" and reasons == ["length"]


async def test_streaming_carries_text_in_content_and_steps_in_their_own_chunks(
        gw: tuple[str, Any], llm: LenientLLM) -> None:
    url, _ = gw
    llm.script(Reply(text="Let me look.", calls=[FORECAST_CALL]), Reply(text="Cold: 3.5 °C."))
    stream = _client(url).chat.completions.create(
        model="weather", messages=[{"role": "user", "content": "Berlin?"}], stream=True,
        stream_options={"include_usage": True})
    chunks = list(stream)

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Let me look.Cold: 3.5 °C."
    events = [c.model_extra["gateway"] for c in chunks if not c.choices and c.model_extra.get("gateway")]
    assert [e["event"] for e in events] == ["step_started", "step_finished"]
    assert events[1]["step"]["tool"] == "getForecast" and events[1]["step"]["ok"] is True
    final = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert final[-1].choices[0].finish_reason == "stop"
    assert [s["tool"] for s in final[-1].model_extra["gateway"]["steps"]] == ["getForecast"]
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 30
    assert all("getForecast" not in (c.choices[0].delta.content or "") for c in chunks if c.choices)


async def test_pending_approval_is_reported_and_nothing_is_written(gw: tuple[str, Any], llm: LenientLLM,
                                                                   upstream: RecordingServer) -> None:
    url, _ = gw
    comment = Call("createIssueComment", {"owner": "acme", "repo": "app", "issue_number": 7, "body": "On it."})
    llm.script(Reply(calls=[comment]))
    completion = _client(url).chat.completions.create(model="triage",
                                                      messages=[{"role": "user", "content": "Answer #7"}])
    pending = completion.model_extra["gateway"]["pending_approvals"]
    assert len(pending) == 1
    assert pending[0]["tool"] == "createIssueComment" and pending[0]["agent"] == "triage"
    assert pending[0]["arguments"]["body"] == "On it."
    assert not [r for r in upstream.requests if r.method == "POST"]


async def test_models_list_and_retrieve_with_the_sdk(gw: tuple[str, Any]) -> None:
    url, _ = gw
    client = _client(url)
    assert [m.id for m in client.models.list()] == ["weather", "triage"]
    assert client.models.retrieve("triage").id == "triage"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")


async def test_unknown_agent_is_404(gw: tuple[str, Any]) -> None:
    url, _ = gw
    with pytest.raises(openai.NotFoundError) as caught:
        _client(url).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert "weather" in caught.value.message  # names the agents there are


@pytest.mark.parametrize("body, param", [
    ({"messages": [{"role": "user", "content": "hi"}]}, "model"),
    ({"model": "weather", "messages": []}, "messages"),
    ({"model": "weather", "messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
    ({"model": "weather", "messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
    ({"model": "weather", "messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}, "temperature"),
    ({"model": "weather", "messages": [{"role": "user", "content": "hi"}], "n": 3}, "n"),
    ({"model": "weather", "messages": [{"role": "user", "content": "hi"}], "stream_options": "x"}, "stream_options"),
    ({"model": "weather", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages[0].content"),
    ({"model": "weather", "messages": [{"role": "assistant", "tool_calls": [{"id": "c"}]}]},
     "messages[0].tool_calls[0]"),
])
async def test_malformed_requests_are_400_naming_the_field(gw: tuple[str, Any], body: dict[str, Any],
                                                           param: str) -> None:
    url, _ = gw
    response = httpx.post(f"{url}/v1/chat/completions", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == param


async def test_provider_failure_is_502(gw: tuple[str, Any], llm: LenientLLM) -> None:
    url, _ = gw
    llm.script(Reply(status=401, error="invalid api key"))
    with pytest.raises(openai.APIStatusError) as caught:
        _client(url).chat.completions.create(model="weather", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 502
    assert "invalid api key" in caught.value.message


async def test_provider_failure_while_streaming_raises_in_the_client(gw: tuple[str, Any], llm: LenientLLM) -> None:
    url, _ = gw
    llm.script(Reply(status=400, error="context too long"))
    stream = _client(url).chat.completions.create(model="weather", messages=[{"role": "user", "content": "hi"}],
                                                  stream=True)
    with pytest.raises(openai.APIError, match="context too long"):
        list(stream)


async def test_a_refusal_after_the_stream_started_is_an_api_error_with_what_may_have_run(
        gw: tuple[str, Any], llm: LenientLLM, upstream: RecordingServer) -> None:
    """user44's left item: the provider refuses the second turn, after the 200, the role chunk and a tool's steps
    went out. The official client yields what came and raises `openai.APIError` (not a status error: there is no
    status left to give), as for OpenAI's own stream errors; its `body` is the error object alone, so the steps
    that may have run are inside it, where the caller holding the exception reads them."""
    url, _ = gw
    llm.script(Reply(calls=[FORECAST_CALL]), Reply(status=400, error="context too long"))
    stream = _client(url).chat.completions.create(model="weather", messages=[{"role": "user", "content": "hi"}],
                                                  stream=True)
    seen: list[Any] = []
    with pytest.raises(openai.APIError) as caught:
        for chunk in stream:
            seen.append(chunk)
    error = caught.value
    assert not isinstance(error, openai.APIStatusError)
    assert [(c.model_extra.get("gateway") or {}).get("event") for c in seen] == [None, "step_started",
                                                                                  "step_finished"]
    assert error.code == "provider_error" and "context too long" in error.message
    assert "may have run upstream" in error.message
    assert isinstance(error.body, dict) and error.body["gateway"]["may_have_run"] is True
    assert [s["tool"] for s in error.body["gateway"]["steps"]] == ["getForecast"]
    assert upstream.last.path == "/meteo/v1/forecast"


async def test_example_without_environment_says_what_is_missing(tmp_path: Path) -> None:
    runtime = load_runtime(ROOT / "specs", ROOT / "agents.yaml", environ={}, use_cache=False)
    with running(create_app(RuntimeHolder(runtime), watch=False)) as url:
        assert len(httpx.get(f"{url}/agents/weather/tools").json()["data"]) == 1
        response = httpx.post(f"{url}/v1/chat/completions",
                              json={"model": "weather", "messages": [{"role": "user", "content": "hi"}]})
        assert response.status_code == 503  # this gateway's configuration, not a failing upstream
        error = response.json()["error"]
        assert error["code"] == "provider_not_configured" and error["type"] == "configuration_error"
        assert "OPENAI_API_KEY" in error["message"] and "ollama" in error["message"].lower()


async def test_streamed_pause_reports_the_approval_as_its_own_event(gw: tuple[str, Any], llm: LenientLLM) -> None:
    url, _ = gw
    comment = Call("createIssueComment", {"owner": "acme", "repo": "app", "issue_number": 7, "body": "On it."})
    llm.script(Reply(calls=[comment]))
    chunks = list(_client(url).chat.completions.create(
        model="triage", messages=[{"role": "user", "content": "Answer #7"}], stream=True))
    events = [c.model_extra["gateway"] for c in chunks if not c.choices and c.model_extra.get("gateway")]
    assert [e["event"] for e in events] == ["approval_pending"]
    assert events[0]["pending_approvals"][0]["tool"] == "createIssueComment"
    final = [c for c in chunks if c.choices and c.choices[0].finish_reason][-1]
    assert final.model_extra["gateway"]["pending_approvals"][0]["id"] == events[0]["pending_approvals"][0]["id"]


async def test_run_past_its_deadline_is_504(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    upstream.route("/meteo/", UpstreamReply(200, FORECAST, delay=3.0))
    agents_yaml = AGENTS_YAML.replace("max_iterations: 4", "max_iterations: 4\n    timeout: 0.2")
    with gateway(tmp_path, llm.url, upstream.url, agents_yaml=agents_yaml) as (url, _):
        llm.script(Reply(calls=[FORECAST_CALL]))
        response = httpx.post(f"{url}/v1/chat/completions", timeout=30,
                              json={"model": "weather", "messages": [{"role": "user", "content": "Berlin?"}]})
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "deadline_exceeded"


async def test_client_leaving_a_stream_stops_the_run(gw: tuple[str, Any], llm: LenientLLM,
                                                     upstream: RecordingServer) -> None:
    url, app = gw
    gate = threading.Event()
    llm.script(Reply(text="Looking it up now.", calls=[FORECAST_CALL], gate=gate))
    try:
        with httpx.stream("POST", f"{url}/v1/chat/completions", timeout=30, json={
                "model": "weather", "messages": [{"role": "user", "content": "Berlin?"}], "stream": True}) as response:
            for line in response.iter_lines():
                chunk = json.loads(line[6:]) if line.startswith("data: {") else {}
                if chunk.get("choices") and chunk["choices"][0]["delta"].get("content"):
                    break  # the first text arrived: hang up while the model is still talking (held by the gate)
        generation = app.state.gateway.current
        # The model stays held until the gate opens (GATE_LIMIT is only a safety net, beyond this bound), so
        # however slow the machine, the run can only end here by noticing that its client left.
        deadline = time.monotonic() + GATE_LIMIT / 2
        while generation.active:  # the run let go of the generation: it ended while the model was held
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        gate.set()
    assert upstream.requests == []  # the tool call the model was making never ran
    assert len(llm.requests) == 1
