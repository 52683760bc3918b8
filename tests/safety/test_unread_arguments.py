"""A call whose arguments cannot be read (not JSON, or JSON but no object) leaves the same kind of audit row as a
call whose arguments were read and found invalid: `invalid_arguments`, nothing sent, the text that came in the
row's `arguments`, redacted. Before, the first was refused before the pipeline and left no row at all (the model's
call in a chat, a `run_code` call, the direct door's body, `gateway call --args`), and the console's try-out
refused invalid arguments before the pipeline too.

Real parts: a uvicorn gateway with a SQLite store, the scripted LLM (OpenAI format: the exact argument text), a
recording upstream that must receive nothing, `gateway call` as the terminal runs it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import AGENTS_YAML, LenientLLM

from gateway.cli.commands import main
from gateway.kernel import tracing

from .safety_support import API_TOKEN, safe_gateway

BROKEN = '{"latitude": 52.52, "note": "' + API_TOKEN + '", "longitude": 13'
"""Arguments cut off mid-object, holding a secret the gateway knows (the github api's token)."""
YAML = AGENTS_YAML.replace("    max_iterations: 4\n", "    max_iterations: 4\n    code_mode: on\n")


def _rows(url: str, tool: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{url}/audit", params={"tool": tool, "limit": 100}, timeout=30)
    assert answer.status_code == 200, answer.text
    return list(reversed(answer.json()["data"]))


def _shape(row: dict[str, Any]) -> tuple[Any, ...]:
    """What a refused call's row says, apart from its arguments and its words."""
    return row["kind"], row["agent"], row["tool"], row["api"], row["status"], row["http_status"], row["approval"]


def test_a_models_unread_arguments_leave_the_row_invalid_ones_leave(tmp_path: Path, llm: LenientLLM,
                                                                      upstream: RecordingServer) -> None:
    llm.script(Reply(calls=[Call("getForecast", raw=BROKEN), Call("getForecast", {"latitude": "north"}),
                            Call("run_code", raw="getForecast(latitude=1")]),
               Reply(text="Let me try again later."))
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=YAML) as (url, _):
        answer = httpx.post(f"{url}/v1/chat/completions", timeout=30, json={
            "model": "weather", "messages": [{"role": "user", "content": "Weather in Berlin?"}]})
        forecasts, scripts = _rows(url, "getForecast"), _rows(url, "run_code")
    assert answer.status_code == 200, answer.text
    steps = answer.json()["gateway"]["steps"]
    assert [s["error_type"] for s in steps] == ["invalid_arguments"] * 3
    assert "not valid JSON" in steps[0]["error"] and "not valid JSON" in steps[2]["error"]
    assert upstream.requests == []
    unread, invalid = forecasts
    assert _shape(unread) == _shape(invalid) == ("tool", "weather", "getForecast", "open-meteo", "invalid_arguments",
                                                 None, None)
    assert unread["run_id"] == invalid["run_id"] == answer.json()["id"]  # the chat's calls, both
    assert unread["arguments"] == BROKEN.replace(API_TOKEN, "[REDACTED]")  # the text that came, redacted
    assert invalid["arguments"] == {"latitude": "north"}
    assert "not valid JSON" in unread["error"]
    (script,) = scripts
    assert _shape(script) == ("tool", "weather", "run_code", None, "invalid_arguments", None, None)
    assert script["arguments"] == "getForecast(latitude=1" and script["run_id"] == answer.json()["id"]


def test_the_direct_doors_unread_body_leaves_the_row_an_invalid_one_leaves(tmp_path: Path, llm: LenientLLM,
                                                                             upstream: RecordingServer) -> None:
    door = "/agents/weather/tools/getForecast"
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=YAML) as (url, _):
        with httpx.Client(base_url=url, timeout=30) as client:
            not_json = client.post(door, content=BROKEN, headers={"content-type": "application/json"})
            no_object = client.post(door, json=[52.52, 13.41])
            invalid = client.post(door, json={"latitude": "north"})
        rows = _rows(url, "getForecast")
    assert (not_json.status_code, no_object.status_code, invalid.status_code) == (400, 400, 422)
    assert "not valid JSON" in not_json.json()["error"]["message"]  # the door's answers are as they were
    assert upstream.requests == []
    assert [_shape(row) for row in rows] == [("tool", "weather", "getForecast", "open-meteo", "invalid_arguments",
                                              None, None)] * 3
    assert [row["arguments"] for row in rows] == [BROKEN.replace(API_TOKEN, "[REDACTED]"), "[52.52,13.41]",
                                                  {"latitude": "north"}]
    assert "not valid JSON" in rows[0]["error"] and "JSON object" in rows[1]["error"]


def test_gateway_call_with_unread_args_leaves_its_row(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / ".gateway" / "state.db"  # where `gateway call` finds agents.yaml's store
    store.parent.mkdir()
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=YAML, store=store) as (url, _):
        common = ["--specs", str(tmp_path / "specs"), "--agents", str(tmp_path / "agents.yaml"), "--no-cache"]
        assert main(["call", *common, "weather", "getForecast", "--args", BROKEN]) == 1
        said = json.loads(capsys.readouterr().out)
        rows = _rows(url, "getForecast")
    assert said["error_type"] == "invalid_arguments" and "--args is not valid JSON" in said["error"]
    (row,) = rows  # the terminal's call, in the log the server reads (agents.yaml's store)
    assert _shape(row) == ("tool", "weather", "getForecast", "open-meteo", "invalid_arguments", None, None)
    assert row["arguments"] == BROKEN.replace(API_TOKEN, "[REDACTED]")
    assert upstream.requests == []


def test_the_consoles_try_out_leaves_a_row_for_invalid_and_unread_arguments(tmp_path: Path, llm: LenientLLM,
                                                                             upstream: RecordingServer) -> None:
    run = "/console/agents/weather/tools/getForecast/run"
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=YAML) as (url, _), \
            httpx.Client(base_url=url, timeout=30) as client:
        token = re.search(r'name="csrf-token" content="([^"]+)"', client.get("/console/agents").text)
        assert token is not None
        csrf = {"X-CSRF-Token": token.group(1)}
        invalid = client.post(run, json={"arguments": {"latitude": "north"}}, headers=csrf)
        unread = client.post(run, json={"arguments": "latitude=52"}, headers=csrf)
        rows = _rows(url, "getForecast")
    assert invalid.status_code == 422 and invalid.json()["error"]["code"] == "invalid_arguments"
    assert invalid.json()["problems"]  # the console's answer is as it was
    assert unread.status_code == 400
    assert upstream.requests == []
    assert [(row["status"], row["arguments"]) for row in rows] == [
        ("invalid_arguments", {"latitude": "north"}), ("invalid_arguments", "latitude=52")]


def test_a_call_with_unread_arguments_has_its_span_and_its_count(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, exporter: InMemorySpanExporter,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen as the validation's refusals are: its `execute_tool` span (with content capture, the text that came,
    redacted) and `gateway_tool_calls_total{outcome="invalid_arguments"}`."""
    monkeypatch.setenv(tracing.CAPTURE_CONTENT, "true")
    llm.script(Reply(calls=[Call("getForecast", raw=BROKEN)]), Reply(text="Later."))
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=YAML) as (url, _):
        answer = httpx.post(f"{url}/v1/chat/completions", timeout=30, json={
            "model": "weather", "messages": [{"role": "user", "content": "Weather in Berlin?"}]})
        metrics = httpx.get(f"{url}/metrics", timeout=30).text
    assert answer.status_code == 200, answer.text
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool getForecast"]
    assert span.attributes is not None and span.attributes["error.type"] == "invalid_arguments"
    assert span.attributes["gen_ai.tool.call.arguments"] == BROKEN.replace(API_TOKEN, "[REDACTED]")
    assert 'gateway_tool_calls_total{api="open-meteo",outcome="invalid_arguments",tool="getForecast"} 1.0' in metrics
