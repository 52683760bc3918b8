"""Fault injection with real servers on 127.0.0.1: an upstream that hangs, resets, answers 500s, sends an
endless body or redirects to another host. The gateway keeps serving the other tools, cuts off the failing
api, never repeats a write when its caller goes away, and loses no audit row."""

from __future__ import annotations

import socket
import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import LenientLLM, running, write_project

from .fault_server import SPEC, FaultServer
from .safety_support import build_app

AGENTS = """\
providers:
  openai: {{kind: openai, base_url: "{llm}/v1", api_key: test-key}}
apis:
  faulty: {{base_url: "{faults}", timeout: 1, auth: {{type: bearer, token: faulty-secret-token}}}}
  open-meteo: {{base_url: "{upstream}/meteo"}}
agents:
  ops:
    model: openai/gpt-test
    # Only the hanging tool waits out a short timeout; the other faults keep the api's 1 s.
    tools: [{{api: faulty, override: {{hang: {{timeout: 0.3}}}}}}, {{api: open-meteo}}]
    max_consecutive_errors: 10
gateway:
  breaker: {{failures: {failures}, reset_after: 600}}
"""
FORECAST = {"latitude": 52.52, "longitude": 13.41, "current": ["temperature_2m"]}


@contextmanager
def _gateway(folder: Path, llm: LenientLLM, upstream: RecordingServer, faults: FaultServer,
             failures: int = 50) -> Iterator[tuple[httpx.Client, Path]]:
    write_project(folder, llm.url, upstream.url)
    (folder / "specs" / "faulty.yaml").write_text(SPEC)
    text = AGENTS.format(llm=llm.url, upstream=upstream.url, faults=faults.url, failures=failures)
    (folder / "agents.yaml").write_text(text)
    store = folder / "state.db"
    app, safety = build_app(folder, store=store)
    try:
        with running(app) as url, httpx.Client(base_url=url, timeout=60) as client:
            yield client, store
    finally:
        safety.store.close()  # type: ignore[attr-defined]


@pytest.fixture
def faults() -> Iterator[FaultServer]:
    with FaultServer() as server:
        yield server


def _call(client: httpx.Client, tool: str, arguments: dict | None = None) -> dict:
    response = client.post(f"/agents/ops/tools/{tool}", json=arguments or {})
    body = response.json()
    return body.get("result", body) if response.status_code != 200 else body


def _audit_rows(store: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(store) as db:
        return db.execute("SELECT tool, status FROM audit WHERE kind = 'tool' ORDER BY id").fetchall()


def test_each_fault_is_a_clear_result_and_other_tools_keep_working(tmp_path: Path, llm: LenientLLM,
                                                                   upstream: RecordingServer,
                                                                   faults: FaultServer) -> None:
    with RecordingServer() as elsewhere:
        faults.redirect_to = elsewhere.url.replace("127.0.0.1", "localhost") + "/steal"
        with _gateway(tmp_path, llm, upstream, faults) as (client, store):
            with ThreadPoolExecutor(max_workers=4) as pool:
                hanging = [pool.submit(_call, client, "hang") for _ in range(3)]
                assert faults.arrival("/hang").wait(10)
                # While the faulty api hangs, the healthy one answers.
                healthy = [_call(client, "getForecast", FORECAST) for _ in range(4)]
                results = {name: _call(client, name) for name in ("reset", "fail", "endless", "redirect")}
                hung = [future.result() for future in hanging]
            rows = _audit_rows(store)

    assert all(r["ok"] and r["status"] == 200 for r in healthy)
    assert {r["error_type"] for r in hung} == {"timeout"}
    assert results["reset"]["error_type"] == "transport_error"
    assert results["fail"]["error_type"] == "upstream_error" and results["fail"]["status"] == 500
    endless = results["endless"]
    assert endless["truncated"] or endless["error_type"] in ("transport_error", "upstream_error")
    assert results["redirect"]["error_type"] == "transport_error" and results["redirect"]["ok"] is False
    assert elsewhere.requests == []  # the redirect to another host was not followed
    # One audit row per call, none lost, each with its outcome.
    assert len(rows) == 3 + 4 + 4
    assert sorted(status for tool, status in rows if tool == "hang") == ["timeout"] * 3
    assert [status for tool, status in rows if tool == "getForecast"] == ["ok"] * 4
    assert dict((tool, status) for tool, status in rows if tool in ("fail", "reset")) == {
        "fail": "upstream_error", "reset": "transport_error"}


def test_a_failing_api_is_cut_off_and_the_others_are_not(tmp_path: Path, llm: LenientLLM,
                                                         upstream: RecordingServer, faults: FaultServer) -> None:
    with _gateway(tmp_path, llm, upstream, faults, failures=2) as (client, store):
        assert [_call(client, "fail")["status"] for _ in range(2)] == [500, 500]
        reached = faults.hits["/fail"]
        refused = _call(client, "fail")
        also_refused = _call(client, "ok")  # the breaker is per api: every tool of it waits
        assert faults.hits["/fail"] == reached and faults.hits["/ok"] == 0
        assert _call(client, "getForecast", FORECAST)["ok"]
        rows = _audit_rows(store)
    for result in (refused, also_refused):  # the breaker's own type: not sent, not a failure on the wire
        assert result["error_type"] == "circuit_open" and "paused" in result["error"]
    assert [status for _, status in rows] == ["upstream_error", "upstream_error", "circuit_open",
                                              "circuit_open", "ok"]


def test_a_chat_goes_on_while_one_tool_hangs(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer,
                                             faults: FaultServer) -> None:
    llm.script(Reply(calls=[Call("hang"), Call("getForecast", FORECAST)]), Reply(text="Partly done."))
    with _gateway(tmp_path, llm, upstream, faults) as (client, store):
        chat = client.post("/v1/chat/completions",
                           json={"model": "ops", "messages": [{"role": "user", "content": "go"}]})
        rows = _audit_rows(store)
    assert chat.status_code == 200
    steps = {s["tool"]: s for s in chat.json()["gateway"]["steps"]}
    assert steps["getForecast"]["ok"] and steps["hang"]["error_type"] == "timeout"
    assert sorted(rows) == [("getForecast", "ok"), ("hang", "timeout")]


def test_a_client_that_disconnects_cancels_its_run_and_the_write_is_not_repeated(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, faults: FaultServer) -> None:
    llm.script(Reply(calls=[Call("write", {"n": 1})]), Reply(text="written"))
    with _gateway(tmp_path, llm, upstream, faults) as (client, store):
        port = int(str(client.base_url).rstrip("/").rsplit(":", 1)[1])
        body = b'{"model": "ops", "messages": [{"role": "user", "content": "write"}]}'
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            assert faults.arrival("/write").wait(10)
        # The run was cancelled: its cancelled call is in the audit log, and nothing more was sent. (Its row was
        # written before it was sent, as `running`; the cancellation is its outcome.)
        written = threading.Event()
        for _ in range(200):
            if any(tool == "write" and status != "running" for tool, status in _audit_rows(store)):
                written.set()
                break
            threading.Event().wait(0.05)
        assert written.is_set()
        assert _audit_rows(store) == [("write", "transport_error")]
        assert client.get("/healthz").status_code == 200
    assert faults.hits["/write"] == 1
    assert len(llm.requests) == 1  # the model was never asked again


def test_a_streamed_chat_that_fails_midway_still_leaves_its_chat_row(tmp_path: Path, llm: LenientLLM,
                                                                     upstream: RecordingServer,
                                                                     faults: FaultServer) -> None:
    # The tool call runs, then the provider fails: the answer is already a 200 event stream, so the failure
    # arrives as an error chunk, and the audit must not take that 200 for a finished chat.
    llm.script(Reply(calls=[Call("getForecast", FORECAST)]), Reply(status=400, error="context too long"))
    with _gateway(tmp_path, llm, upstream, faults) as (client, store):
        with client.stream("POST", "/v1/chat/completions", json={
                "model": "ops", "stream": True, "messages": [{"role": "user", "content": "go"}]}) as answer:
            body = "".join(answer.iter_text())
        with sqlite3.connect(store) as db:
            rows = db.execute("SELECT kind, tool, status, error FROM audit ORDER BY id").fetchall()
    assert answer.status_code == 200 and "context too long" in body
    assert rows[0][:3] == ("tool", "getForecast", "ok")
    assert [r[:3] for r in rows[1:]] == [("chat", None, "error")]
    assert rows[1][3] == "HTTP 502 in the stream: provider_error"
