"""Approvals over HTTP: a run paused across a restart, replayed and forged ids, MCP and direct calls on hold."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import ROOT, LenientLLM, running, write_project

from gateway.cli.commands import main

from .safety_support import SAFE_AGENTS_YAML, TRIAGE_KEY, bearer, build_app

COMMENT = Call("createIssueComment", {"owner": "acme", "repo": "app", "issue_number": 7, "body": "On it."})
READ = Call("getIssue", {"owner": "acme", "repo": "app", "issue_number": 7})
CHAT = {"model": "triage", "messages": [{"role": "user", "content": "triage #7"}]}


def _writes(upstream: RecordingServer) -> list[str]:
    return [r.path for r in upstream.requests if r.method == "POST"]


def test_paused_run_survives_a_restart_and_resumes_once(tmp_path: Path, llm: LenientLLM,
                                                        upstream: RecordingServer) -> None:
    write_project(tmp_path, llm.url, upstream.url, SAFE_AGENTS_YAML)
    store = tmp_path / "state.db"
    llm.script(Reply(calls=[READ, COMMENT]))  # one call needing approval gates the whole batch
    first, first_safety = build_app(tmp_path, store=store)
    with running(first) as url, httpx.Client(base_url=url, headers=bearer(TRIAGE_KEY), timeout=30) as client:
        paused = client.post("/v1/chat/completions", json=CHAT).json()
    first_safety.store.close()  # type: ignore[attr-defined]
    (pending,) = paused["gateway"]["pending_approvals"]
    assert pending["tool"] == "createIssueComment" and upstream.requests == []
    said = paused["choices"][0]["message"]["content"]
    assert "approval" in said and pending["id"] in said and "createIssueComment" in said

    second, second_safety = build_app(tmp_path, store=store)  # a new process on the same file
    llm.script(Reply(text="Commented on #7."))
    with running(second) as url, httpx.Client(base_url=url, headers=bearer(TRIAGE_KEY), timeout=30) as client:
        listed = client.get("/approvals").json()["data"]
        assert [(a["id"], a["tool"], a["arguments"]) for a in listed] == [
            (pending["id"], "createIssueComment", COMMENT.args)]
        edited = {**COMMENT.args, "body": "Looking into it."}
        done = client.post(f"/approvals/{pending['id']}", json={"decision": "approve", "arguments": edited})
        assert done.status_code == 200, done.text
        body = done.json()
        assert body["choices"][0]["message"]["content"] == "Commented on #7."
        assert [s["tool"] for s in body["gateway"]["steps"]] == ["getIssue", "createIssueComment"]
        assert _writes(upstream) == ["/github/repos/acme/app/issues/7/comments"]
        # The resumed batch runs its calls concurrently: the write is not necessarily the last request.
        (write,) = [r for r in upstream.requests if r.method == "POST"]
        assert json.loads(write.body) == {"body": "Looking into it."}

        replay = client.post(f"/approvals/{pending['id']}", json={"decision": "approve"})
        assert replay.status_code == 409 and replay.json()["error"]["code"] == "approval_used"
        forged = client.post("/approvals/apr_" + "0" * 32, json={"decision": "approve"})
        assert forged.status_code == 404
        assert client.get("/approvals").json()["data"] == []
        audit = client.get("/audit?limit=50").json()["data"]
    second_safety.store.close()  # type: ignore[attr-defined]
    assert _writes(upstream) == ["/github/repos/acme/app/issues/7/comments"]  # exactly once
    comment_rows = [r for r in audit if r["tool"] and r["tool"].endswith("createIssueComment")]
    assert {(r["kind"], r["status"]) for r in comment_rows} == {("tool", "approval_pending"), ("tool", "ok"),
                                                                ("decision", "approved")}
    assert all(r["approval"] == pending["id"] for r in comment_rows)
    assert any(r["kind"] == "chat" and r["status"] == "paused" for r in audit)
    assert any(r["kind"] == "chat" and r["status"] == "ok" and r["usage"] for r in audit)


def test_denied_call_reaches_the_model_and_never_the_api(tmp_path: Path, llm: LenientLLM,
                                                         upstream: RecordingServer) -> None:
    write_project(tmp_path, llm.url, upstream.url, SAFE_AGENTS_YAML)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    llm.script(Reply(calls=[COMMENT]), Reply(text="Understood, no comment."))
    with running(app) as url, httpx.Client(base_url=url, headers=bearer(TRIAGE_KEY), timeout=30) as client:
        (pending,) = client.post("/v1/chat/completions", json=CHAT).json()["gateway"]["pending_approvals"]
        bad = client.post(f"/approvals/{pending['id']}", json={"decision": "maybe"})
        assert bad.status_code == 400
        denied = client.post(f"/approvals/{pending['id']}", json={"decision": "deny", "reason": "not yet"})
        assert denied.status_code == 200
        assert denied.json()["choices"][0]["message"]["content"] == "Understood, no comment."
    safety.store.close()  # type: ignore[attr-defined]
    assert _writes(upstream) == []
    last_prompt = json.dumps(llm.requests[-1].body)
    assert "not yet" in last_prompt  # the model was told why


def test_direct_and_mcp_calls_wait_for_approval_with_their_id(tmp_path: Path, llm: LenientLLM,
                                                              upstream: RecordingServer) -> None:
    write_project(tmp_path, llm.url, upstream.url, SAFE_AGENTS_YAML)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    headers = {**bearer(TRIAGE_KEY), "Accept": "application/json, text/event-stream"}
    with running(app) as url, httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        direct = client.post("/agents/triage/tools/createIssueComment", json=COMMENT.args)
        assert direct.status_code == 202
        approval_id = direct.json()["approval_id"]
        assert approval_id in direct.json()["error"]

        mcp_text = _mcp_call(client, "createIssueComment", COMMENT.args)
        assert "approval" in mcp_text.lower()
        mcp_ids = [a["id"] for a in client.get("/approvals").json()["data"] if a["id"] != approval_id]
        assert len(mcp_ids) == 1 and mcp_ids[0] in mcp_text
        assert _writes(upstream) == []

        approved = client.post(f"/approvals/{approval_id}", json={"decision": "approve"})
        assert approved.status_code == 200 and approved.json()["result"]["status"] == 201
        assert client.post(f"/approvals/{approval_id}", json={"decision": "approve"}).status_code == 409
        denied = client.post(f"/approvals/{mcp_ids[0]}", json={"decision": "deny"})
        assert denied.json()["result"]["error_type"] == "approval_denied"
    safety.store.close()  # type: ignore[attr-defined]
    assert len(_writes(upstream)) == 1


def _mcp_call(client: httpx.Client, tool: str, arguments: dict) -> str:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    opened = client.post("/mcp/triage", json=init)
    session = opened.headers.get("mcp-session-id")
    extra = {"mcp-session-id": session} if session else {}
    client.post("/mcp/triage", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=extra)
    answer = client.post("/mcp/triage", headers=extra, json={
        "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
    payload = _jsonrpc_payload(answer)
    result = payload["result"]
    assert result["isError"] is True
    return "\n".join(c["text"] for c in result["content"])


def _jsonrpc_payload(response: httpx.Response) -> dict:
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.json()
    for line in response.text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            return json.loads(line[5:])
    raise AssertionError(f"no JSON-RPC answer in {response.text!r}")


@pytest.mark.anyio
async def test_stdio_mcp_call_waits_in_the_store_for_the_terminal(tmp_path: Path, llm: LenientLLM,
                                                                  upstream: RecordingServer) -> None:
    specs, agents = write_project(tmp_path, llm.url, upstream.url, SAFE_AGENTS_YAML)
    params = StdioServerParameters(command=sys.executable, cwd=str(ROOT), args=[
        "-m", "gateway", "mcp", "triage", "--specs", str(specs), "--agents", str(agents), "--no-cache"])
    async with Client(params) as client:
        result = await client.call_tool("createIssueComment", COMMENT.args)
    text = "\n".join(c.text for c in result.content)
    assert result.is_error and "approval" in text
    assert _writes(upstream) == []
    approval_id = next(word for word in text.replace(":", " ").split() if word.startswith("apr_"))
    cli = ["--specs", str(specs), "--agents", str(agents), "--no-cache"]
    # The terminal decides it, on the default store beside agents.yaml (in a thread: the CLI runs its own loop).
    assert await anyio.to_thread.run_sync(main, ["approvals", "approve", approval_id, *cli]) == 0
    assert _writes(upstream) == ["/github/repos/acme/app/issues/7/comments"]


def test_two_approvers_at_once_resume_the_run_once(tmp_path: Path, llm: LenientLLM,
                                                   upstream: RecordingServer) -> None:
    write_project(tmp_path, llm.url, upstream.url, SAFE_AGENTS_YAML)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    llm.script(Reply(calls=[COMMENT]), Reply(text="Commented."))
    with running(app) as url, httpx.Client(base_url=url, headers=bearer(TRIAGE_KEY), timeout=30) as client:
        (pending,) = client.post("/v1/chat/completions", json=CHAT).json()["gateway"]["pending_approvals"]
        with ThreadPoolExecutor(max_workers=4) as pool:
            answers = list(pool.map(lambda _: client.post(f"/approvals/{pending['id']}",
                                                          json={"decision": "approve"}).status_code, range(4)))
    safety.store.close()  # type: ignore[attr-defined]
    assert sorted(answers) == [200, 409, 409, 409]
    assert len(_writes(upstream)) == 1
