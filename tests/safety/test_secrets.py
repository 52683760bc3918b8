"""Seeded secrets (the api token, client keys, the provider key) never show in a response, a log line, an
audit row, or what the model is sent, even when the upstream echoes them back."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from recording_server import Recorded, RecordingServer, Reply
from scripted_llm import Call
from scripted_llm import Reply as LLMReply
from server_support import ISSUE, LenientLLM, running, write_project

from .safety_support import API_TOKEN, SAFE_AGENTS_YAML, TRIAGE_KEY, WEATHER_KEY, bearer, build_app

SECRETS = (API_TOKEN, TRIAGE_KEY, WEATHER_KEY)


def _echo_credentials(request: Recorded) -> Reply:
    seen = request.header("authorization") or ""
    if request.path.endswith("/issues/7"):
        return Reply(200, {**ISSUE, "body": f"you sent {seen}"}, headers={"X-Echo": seen})
    if request.path.endswith("/issues/8"):
        return Reply(500, f"internal error while checking {seen} for {request.target}")
    return Reply(401, {"message": f"Bad credentials: {seen}"})


def test_secrets_never_leave_the_gateway(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer,
                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    upstream.route("/github/", _echo_credentials)
    write_project(tmp_path, llm.url, upstream.url, SAFE_AGENTS_YAML)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    issue = {"owner": "acme", "repo": "app"}
    llm.script(
        LLMReply(calls=[Call("getIssue", {**issue, "issue_number": 7}), Call("getIssue", {**issue, "issue_number": 8}),
                        Call("listIssues", issue)]),
        LLMReply(text="Done."),
    )
    responses: list[str] = []
    with running(app) as url, httpx.Client(base_url=url, headers=bearer(TRIAGE_KEY), timeout=30) as client:
        chat = client.post("/v1/chat/completions", json={"model": "triage",
                                                         "messages": [{"role": "user", "content": "look"}]})
        assert chat.status_code == 200
        responses.append(chat.text)
        for number in (7, 8):
            direct = client.post("/agents/triage/tools/getIssue", json={**issue, "issue_number": number})
            responses.append(direct.text + json.dumps(dict(direct.headers)))
        responses.append(client.post("/agents/triage/tools/listIssues", json=issue).text)
        responses.append(client.get("/audit?limit=100").text)
        responses.append(client.get("/agents/triage/tools").text)
        responses.append(client.get("/agents").text)
        responses.append(client.get("/v1/models").text)
        responses.append(client.get("/approvals").text)
        responses.append(client.post("/v1/chat/completions", headers=bearer(WEATHER_KEY),
                                     json={"model": "triage", "messages": []}).text)
        responses.append(client.get("/audit", headers=bearer(TRIAGE_KEY + "x")).text)
    safety.store.close()  # type: ignore[attr-defined]

    # The upstream did receive the token (so the echo was real) ...
    assert any(API_TOKEN in (r.header("authorization") or "") for r in upstream.requests)
    # ... but nothing that came back shows it, nor any client key.
    rows = sqlite3.connect(tmp_path / "state.db").execute("SELECT * FROM audit").fetchall()
    assert len(rows) == 7  # 3 tool calls and the chat, 3 direct calls
    llm_bodies = json.dumps(llm.bodies())
    for secret in SECRETS:
        for text in responses:
            assert secret not in text
        assert secret not in caplog.text
        assert secret not in repr(rows)
        assert secret not in llm_bodies
    assert "[REDACTED]" in llm_bodies  # the echo reached the model, scrubbed


class _ReasonEcho(BaseHTTPRequestHandler):
    """An upstream that echoes the caller's credential in its HTTP reason phrase (some proxies do)."""

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(401, f"Unauthorized ({self.headers.get('Authorization')})")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def _reason_echo() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ReasonEcho)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_token_echoed_in_the_reason_phrase_is_redacted_on_every_path(tmp_path: Path, llm: LenientLLM) -> None:
    issue = {"owner": "acme", "repo": "app", "issue_number": 7}
    llm.script(LLMReply(calls=[Call("getIssue", issue)]), LLMReply(text="It refused."))
    with _reason_echo() as echo:
        write_project(tmp_path, llm.url, echo, SAFE_AGENTS_YAML)
        app, safety = build_app(tmp_path, store=tmp_path / "state.db")
        with running(app) as url, httpx.Client(base_url=url, headers=bearer(TRIAGE_KEY), timeout=30) as client:
            direct = client.post("/agents/triage/tools/getIssue", json=issue)
            chat = client.post("/v1/chat/completions",
                               json={"model": "triage", "messages": [{"role": "user", "content": "look"}]})
            audit = client.get("/audit?limit=100").text
    safety.store.close()  # type: ignore[attr-defined]
    # The reason phrase is either scrubbed ("Unauthorized (Bearer [REDACTED])") or not carried at all (the
    # upstream client may report the status's standard phrase): never the token.
    message = direct.json()["error"]["message"]
    assert direct.status_code == 502 and "HTTP 401 Unauthorized" in message
    assert chat.status_code == 200
    for text in (direct.text, chat.text, audit, json.dumps(llm.bodies())):
        assert API_TOKEN not in text
    assert "HTTP 401" in json.dumps(llm.bodies())  # the model saw the refusal


def test_a_configured_secret_passed_as_an_argument_is_redacted_in_the_audit(tmp_path: Path, llm: LenientLLM,
                                                                           upstream: RecordingServer) -> None:
    write_project(tmp_path, llm.url, upstream.url, SAFE_AGENTS_YAML)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    with running(app) as url, httpx.Client(base_url=url, headers=bearer(TRIAGE_KEY), timeout=30) as client:
        client.post("/agents/triage/tools/getIssue", json={"owner": API_TOKEN, "repo": "app", "issue_number": 7})
        rows = client.get("/audit").json()["data"]
    safety.store.close()  # type: ignore[attr-defined]
    (row,) = [r for r in rows if r["tool"] == "getIssue"]
    assert row["arguments"]["owner"] == "[REDACTED]"
    assert API_TOKEN not in repr(sqlite3.connect(tmp_path / "state.db").execute("SELECT * FROM audit").fetchall())
