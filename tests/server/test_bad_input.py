"""Bad input gets a clear error and loses nothing; provider trouble is reported, never an empty success or a leak."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import AGENTS_YAML, ROOT, LenientLLM, running, write_project

from gateway.cli.terminal_chat import chat_command
from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app
from gateway.server.supervision import Safety

PROVIDER_KEY = "test-key"  # server_support.AGENTS_YAML's openai api_key
LEAKY = f"Incorrect API key provided: {PROVIDER_KEY}. You can find your API key at example.invalid"
FORECAST_CALL = Call("getForecast", {"latitude": 52.52, "longitude": 13.41})
HELLO = [{"role": "user", "content": "hi"}]


@pytest.fixture
def safe(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Iterator[tuple[str, Safety]]:
    """`gateway serve`'s setup: the safety layer on (audit, approvals)."""
    specs, agents = write_project(tmp_path, llm.url, upstream.url)
    runtime = load_runtime(specs, agents, use_cache=False)
    safety = Safety.open(runtime, store=str(tmp_path / "state.db"))
    try:
        with running(create_app(RuntimeHolder(runtime), watch=False, **safety.app_options())) as url:
            yield url, safety
    finally:
        safety.store.close()  # type: ignore[attr-defined]


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def _audit(url: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = httpx.get(f"{url}/audit").json()["data"]
    return rows


def test_a_provider_error_that_echoes_the_key_does_not_reach_the_caller(safe: tuple[str, Safety],
                                                                        llm: LenientLLM) -> None:
    url, _ = safe
    llm.script(Reply(status=401, error=LEAKY))
    plain = httpx.post(f"{url}/v1/chat/completions", json={"model": "weather", "messages": HELLO})
    assert plain.status_code == 502 and "Incorrect API key provided" in plain.text
    assert PROVIDER_KEY not in plain.text
    llm.script(Reply(text="partial answer", stream_error=LEAKY))
    with httpx.stream("POST", f"{url}/v1/chat/completions",
                      json={"model": "weather", "messages": HELLO, "stream": True}) as streamed:
        body = streamed.read().decode()
    assert "Incorrect API key provided" in body and PROVIDER_KEY not in body
    llm.script(Reply(status=400, error=LEAKY))
    with pytest.raises(openai.APIError) as caught:
        list(_client(url).chat.completions.create(model="weather", messages=HELLO, stream=True))  # type: ignore[arg-type]
    assert PROVIDER_KEY not in str(caught.value) and "[REDACTED]" in str(caught.value)


@pytest.mark.parametrize("status", [404, 401])
@pytest.mark.parametrize("door", ["chat", "responses"])
def test_a_provider_refusal_is_not_retried_by_the_openai_client(safe: tuple[str, Safety], llm: LenientLLM,
                                                                 door: str, status: int) -> None:
    """A wrong model id in agents.yaml (the provider's 404) or a bad key (401) fails the same way every time; the
    official client, with its default two retries, must show it after one model request, not three."""
    url, _ = safe
    llm.script(Reply(status=status, error="The model `gpt-tset` does not exist or you do not have access to it."))
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")  # the SDK's default retries
    with pytest.raises(openai.APIStatusError) as caught:
        if door == "chat":
            client.chat.completions.create(model="weather", messages=HELLO)  # type: ignore[arg-type]
        else:
            client.responses.create(model="weather", input="hi")
    assert caught.value.status_code == 502 and "gpt-tset" in caught.value.message
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert len(llm.requests) == 1  # the lenient LLM would have answered a retry


def test_a_provider_rate_limit_passes_its_retry_after_on(safe: tuple[str, Safety], llm: LenientLLM) -> None:
    """After the gateway's own retries, a client's retry is told how long the provider asked to wait, rather than
    coming back after its own short backoff to a provider that is still limiting."""
    url, _ = safe
    llm.script(*[Reply(status=429, error="Rate limit reached", headers={"retry-after-ms": "1500"})] * 3)
    answer = httpx.post(f"{url}/v1/chat/completions", json={"model": "weather", "messages": HELLO})
    assert answer.status_code == 429 and answer.json()["error"]["code"] == "provider_rate_limited"
    assert answer.headers["retry-after"] == "2"  # 1.5 s, in whole seconds as the header takes them, rounded up


def test_a_provider_that_ignores_stream_true_still_answers(safe: tuple[str, Safety], llm: LenientLLM) -> None:
    url, _ = safe
    llm.script(Reply(calls=[FORECAST_CALL], ignore_stream=True), Reply(text="It is 3.5 °C.", ignore_stream=True))
    chunks = list(_client(url).chat.completions.create(model="weather", messages=HELLO, stream=True))  # type: ignore[arg-type]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "It is 3.5 °C."
    assert llm.bodies()[0]["stream"] is True  # it was asked to stream and answered in one piece
    final = [c for c in chunks if c.choices and c.choices[0].finish_reason][-1]
    assert [s["tool"] for s in final.model_extra["gateway"]["steps"]] == ["getForecast"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_lone_surrogate_in_a_user_message_is_refused_before_the_run(safe: tuple[str, Safety], llm: LenientLLM,
                                                                      stream: bool) -> None:
    url, _ = safe
    body = '{"model": "weather", "stream": ' + json.dumps(stream) + \
        ', "messages": [{"role": "user", "content": "hi \\ud800"}]}'
    response = httpx.post(f"{url}/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400 and "lone surrogate" in response.json()["error"]["message"]
    assert llm.bodies() == []


def test_a_lone_surrogate_in_the_models_arguments_is_a_tool_error(safe: tuple[str, Safety], llm: LenientLLM,
                                                                  upstream: RecordingServer) -> None:
    url, _ = safe
    bad = Call("getForecast", {}, raw='{"latitude": 1, "longitude": 2, "timezone": "\\ud800"}')
    llm.script(Reply(calls=[bad]), Reply(text="Sorry, I sent a broken argument."))
    response = httpx.post(f"{url}/v1/chat/completions", json={"model": "weather", "messages": HELLO})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["choices"][0]["message"]["content"] == "Sorry, I sent a broken argument."
    step = body["gateway"]["steps"][0]
    assert step["ok"] is False
    assert upstream.requests == []  # never sent
    tool_message = [m for m in llm.bodies()[1]["messages"] if m["role"] == "tool"][0]
    assert "lone surrogate" in tool_message["content"]  # the model learns what was wrong
    assert any(row.get("status") == "ok" for row in _audit(url))  # the chat's own row is written


def test_a_lone_surrogate_in_a_direct_call_is_422_and_nothing_is_sent(safe: tuple[str, Safety],
                                                                      upstream: RecordingServer) -> None:
    url, _ = safe
    response = httpx.post(f"{url}/agents/weather/tools/getForecast",
                          content=b'{"latitude": 1, "longitude": 2, "timezone": "\\ud800"}',
                          headers={"content-type": "application/json"})
    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_arguments"
    assert upstream.requests == []


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/approvals/ap_x", "/agents/weather/tools/getForecast"])
def test_json_nested_too_deep_is_a_400(safe: tuple[str, Safety], path: str) -> None:
    url, _ = safe
    deep = b'{"model": "weather", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    response = httpx.post(url + path, content=deep, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text[:300]
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert httpx.get(f"{url}/healthz").status_code == 200


def test_a_streamed_pause_says_what_waits(safe: tuple[str, Safety], llm: LenientLLM) -> None:
    url, _ = safe
    comment = Call("createIssueComment", {"owner": "acme", "repo": "app", "issue_number": 7, "body": "On it."})
    llm.script(Reply(text="I will comment.", calls=[comment]))
    chunks = list(_client(url).chat.completions.create(
        model="triage", messages=[{"role": "user", "content": "Answer #7"}], stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("I will comment.\n\nWaiting for a human's approval")
    assert "createIssueComment" in text and "POST /approvals/" in text
    plain = httpx.post(f"{url}/v1/chat/completions", json={
        "model": "triage", "messages": [{"role": "user", "content": "Answer #7"}]})
    # (the lenient LLM answers "fine" now: no pause) - the streamed text equals what a paused plain answer says
    assert plain.status_code == 200


def test_healthz_reports_a_refused_reload_and_serve_logs_a_good_one(tmp_path: Path, llm: LenientLLM,
                                                                     upstream: RecordingServer,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    import logging

    caplog.set_level(logging.INFO, logger="gateway")
    specs, agents = write_project(tmp_path, llm.url, upstream.url)
    holder = RuntimeHolder(load_runtime(specs, agents, use_cache=False))
    with running(create_app(holder, watch=True, watch_interval=0.05)) as url:
        assert httpx.get(f"{url}/healthz").json()["status"] == "ok"
        _replace(agents, agents.read_text() + "\nagents: [this is not a mapping\n")
        health = _wait_for(lambda: httpx.get(f"{url}/healthz").json(), lambda h: h["status"] != "ok")
        assert health["status"] == "degraded" and health["reload_error"]
        assert health["agents"] == 2  # the last good configuration keeps serving
        _replace(agents, AGENTS_YAML.format(llm=llm.url, upstream=upstream.url).replace(
            "Weather from Open-Meteo.", "Weather, reloaded."))
        health = _wait_for(lambda: httpx.get(f"{url}/healthz").json(), lambda h: h["status"] == "ok")
        assert health["reloads"] == 1 and "reload_error" not in health
    assert any("reloaded" in r.getMessage() for r in caplog.records if r.name.startswith("gateway"))


def _replace(path: Path, text: str) -> None:
    """Write `path` in one step (a watcher polling mid-write would see a half-written file)."""
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text)
    temporary.replace(path)


def test_serve_configures_the_gateways_own_loggers() -> None:
    import logging.config

    from gateway.server.run import log_config

    config = log_config()
    assert config["loggers"]["gateway"]["level"] == "INFO"
    logging.config.dictConfig(config)
    try:
        assert logging.getLogger("gateway.runtime").getEffectiveLevel() == logging.INFO
    finally:
        logging.getLogger("gateway").propagate = True
        logging.getLogger("gateway").handlers.clear()
        logging.getLogger("gateway").setLevel(logging.NOTSET)


def _wait_for(fetch: Any, done: Any, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = fetch()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def test_gateway_chat_explains_a_missing_key_and_sends_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    import os

    saved = {k: os.environ.pop(k) for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GATEWAY_MODEL") if k in os.environ}
    try:
        status = chat_command(ROOT / "specs", ROOT / "agents.yaml", "weather", "hi", use_cache=False, out=out,
                              err=err)
    finally:
        os.environ.update(saved)
    assert status == 1
    assert "OPENAI_API_KEY" in err.getvalue() and "api_key is empty" in err.getvalue()
    assert out.getvalue() == ""
