"""A NUL character in an id or a filter (issue #27): PostgreSQL's text cannot hold one, and the gateway answered 500.
Against a real gateway on a real PostgreSQL, each such request is answered 400 (a filter) or 404 (an id)."""

from __future__ import annotations

from pathlib import Path

import httpx
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import AGENTS_YAML, LenientLLM

from .safety_support import safe_gateway

COMMENT = Call("createIssueComment", {"owner": "acme", "repo": "app", "issue_number": 7, "body": "On it."})


def test_a_nul_in_an_id_or_a_filter_is_a_client_error(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer,
                                                      postgres_url: str) -> None:
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=AGENTS_YAML, store=postgres_url) as (url, _), \
            httpx.Client(base_url=url, timeout=30) as client:
        llm.script(Reply(calls=[COMMENT]))
        paused = client.post("/v1/chat/completions",
                             json={"model": "triage", "messages": [{"role": "user", "content": "ack #7"}]}).json()
        (pending,) = paused["gateway"]["pending_approvals"]
        ids = [
            ("GET", "/approvals/apr_%00x", None),
            ("POST", "/approvals/apr_%00x", {"decision": "approve"}),
            ("GET", "/v1/responses/resp_%00x", None),
            ("POST", "/v1/responses", {"model": "weather", "input": "hi", "previous_response_id": "resp_\u0000"}),
        ]
        for method, path, body in ids:
            answer = client.request(method, path, json=body)
            assert answer.status_code == 404, (method, path, answer.status_code, answer.text)
        run_page = client.get("/console/runs/run%00x")  # an unknown run's page: no rows
        assert run_page.status_code == 200 and "No audit rows" in run_page.text, run_page.text
        for name in ("agent", "client", "tool", "status", "run_id"):
            answer = client.get("/audit", params={name: "tri\u0000age"})
            assert answer.status_code == 400 and answer.json()["error"]["param"] == name, answer.text
        assert client.get("/console/audit", params={"agent": "\u0000"}).status_code == 400
        # A caller's history whose tool call id holds one, and a decision's reason: refused or carried, never a 500.
        history = [{"role": "user", "content": "hi"},
                   {"role": "assistant", "tool_calls": [{"id": "call_\u0000", "type": "function",
                                                         "function": {"name": "send", "arguments": "{}"}}]},
                   {"role": "tool", "tool_call_id": "call_\u0000", "content": "done"}]
        llm.script(Reply(text="ok"))
        chat = client.post("/v1/chat/completions", json={"model": "weather", "messages": history})
        assert chat.status_code == 200, chat.text
        denied = client.post(f"/approvals/{pending['id']}", json={"decision": "deny", "reason": "no\u0000pe"})
        assert denied.status_code in (200, 400), denied.text
        assert client.get("/healthz").status_code == 200
