"""Code mode over HTTP (real uvicorn, a real upstream on loopback, the SQLite store): a script's calls are the
pipeline's, an approval pauses the script across a restart, and what the sandbox refuses is a tool error while
the gateway goes on serving."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import AGENTS_YAML, LenientLLM, running, write_project

from .safety_support import SAFE_AGENTS_YAML, TRIAGE_KEY, bearer, build_app

CODE_AGENTS_YAML = SAFE_AGENTS_YAML.replace(
    "    approval: writes\n",
    "    approval: writes\n    code_mode: only\n    code_limits: {{time: 1, memory: 32, tool_calls: 20}}\n")
READ_READ_WRITE = """
issues = listIssues(owner="acme", repo="app")
crashes = [i for i in issues if "Crash" in i["title"]]
issue = getIssue(owner="acme", repo="app", issue_number=crashes[0]["number"])
comment = createIssueComment(owner="acme", repo="app", issue_number=issue["number"], body="Looking into it.")
{"commented": comment["id"], "on": issue["number"]}
"""
CHAT = {"model": "triage", "messages": [{"role": "user", "content": "comment on the crash"}]}


def _requests(upstream: RecordingServer) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in upstream.requests]


def _chat_and_audit(app: Any, safety: Any, audit: str = "/audit?limit=50") -> tuple[httpx.Response, list[Any]]:
    """One chat of the triage client on the running `app`, and the audit rows read after it."""
    with running(app) as url, httpx.Client(base_url=url, headers=bearer(TRIAGE_KEY), timeout=60) as client:
        answer = client.post("/v1/chat/completions", json=CHAT)
        rows: list[Any] = client.get(audit).json()["data"]
    safety.store.close()
    return answer, rows


def test_a_script_pauses_at_its_write_and_resumes_after_a_restart(tmp_path: Path, llm: LenientLLM,
                                                                  upstream: RecordingServer) -> None:
    write_project(tmp_path, llm.url, upstream.url, CODE_AGENTS_YAML)
    store = tmp_path / "state.db"
    llm.script(Reply(calls=[Call("run_code", {"code": READ_READ_WRITE})]))
    first, first_safety = build_app(tmp_path, store=store)
    with running(first) as url, httpx.Client(base_url=url, headers=bearer(TRIAGE_KEY), timeout=30) as client:
        paused = client.post("/v1/chat/completions", json=CHAT).json()
    first_safety.store.close()  # type: ignore[attr-defined]
    (pending,) = paused["gateway"]["pending_approvals"]
    comment = {"owner": "acme", "repo": "app", "issue_number": 7, "body": "Looking into it."}
    assert (pending["tool"], pending["arguments"]) == ("createIssueComment", comment)
    reads = [("GET", "/github/repos/acme/app/issues"), ("GET", "/github/repos/acme/app/issues/7")]
    assert _requests(upstream) == reads  # each read once; the write waits
    [shown] = paused["gateway"]["steps"]
    assert [s["tool"] for s in shown["steps"]] == ["listIssues", "getIssue"]

    second, second_safety = build_app(tmp_path, store=store)  # a new process on the same file
    llm.script(Reply(text="Commented on #7."))
    with running(second) as url, httpx.Client(base_url=url, headers=bearer(TRIAGE_KEY), timeout=30) as client:
        listed = client.get("/approvals").json()["data"]
        assert [(a["id"], a["tool"], a["arguments"]) for a in listed] == [
            (pending["id"], "createIssueComment", comment)]
        done = client.post(f"/approvals/{pending['id']}", json={"decision": "approve"})
        assert done.status_code == 200, done.text
        body = done.json()
        replay = client.post(f"/approvals/{pending['id']}", json={"decision": "approve"})
        audit = client.get("/audit?limit=50").json()["data"]
    second_safety.store.close()  # type: ignore[attr-defined]
    assert replay.status_code == 409
    assert body["choices"][0]["message"]["content"] == "Commented on #7."
    assert _requests(upstream) == [*reads, ("POST", "/github/repos/acme/app/issues/7/comments")]  # the write once
    [step] = body["gateway"]["steps"]
    assert step["tool"] == "run_code" and step["ok"]
    assert [s["tool"] for s in step["steps"]] == ["listIssues", "getIssue", "createIssueComment"]
    # The script's result reached the model.
    tool_messages = [m for m in llm.requests[-1].body["messages"] if m["role"] == "tool"]
    assert [json.loads(m["content"]) for m in tool_messages] == [{"commented": 99, "on": 7}]
    # Every call has its audit row; the write's carry its approval.
    rows = {(r["tool"].rsplit("_", 1)[-1] if r["tool"] else None, r["kind"], r["status"]) for r in audit}
    assert {("listIssues", "tool", "ok"), ("getIssue", "tool", "ok"), ("createIssueComment", "tool", "ok"),
            ("createIssueComment", "tool", "approval_pending"), ("createIssueComment", "decision", "approved")} <= rows
    writes = [r for r in audit if r["tool"] and r["tool"].endswith("createIssueComment")]
    assert all(r["approval"] == pending["id"] for r in writes)
    assert len([r for r in audit if r["kind"] == "tool" and r["tool"] != "run_code" and r["status"] == "ok"]) == 3
    # The script has a row for each time it ran: it waited at the write, then went on under the approval.
    scripts = [(r["status"], r["approval"]) for r in reversed(audit) if r["tool"] == "run_code"]
    assert scripts == [("approval_pending", None), ("ok", pending["id"])]


HOSTILE = {
    "file": "open('/etc/passwd').read()",
    "os": "import os\nos.listdir('/')",
    "subprocess": "import subprocess\nsubprocess.run(['id'])",
    "socket": "import socket\nsocket.create_connection(('127.0.0.1', 22))",
    "loop": "while True:\n    pass",
}


def test_files_os_modules_and_an_endless_loop_are_tool_errors(tmp_path: Path, llm: LenientLLM,
                                                               upstream: RecordingServer) -> None:
    write_project(tmp_path, llm.url, upstream.url, CODE_AGENTS_YAML)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    llm.script(Reply(calls=[Call("run_code", {"code": code}) for code in HOSTILE.values()]),
               Reply(text="The sandbox refused all of that."))
    answer, audit = _chat_and_audit(app, safety)
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "The sandbox refused all of that."
    # One result per call, in the calls' order (Ollama's wire carries no call ids).
    answered = [json.loads(m["content"]) for m in llm.requests[-1].body["messages"] if m["role"] == "tool"]
    results = dict(zip(HOSTILE, answered, strict=True))
    assert {name: result["error_type"] for name, result in results.items()} == {
        "file": "code_error", "os": "code_error", "subprocess": "code_error", "socket": "code_error",
        "loop": "code_limit"}
    assert "PermissionError" in results["file"]["error"] and "PermissionError" in results["os"]["error"]
    assert "No module named 'subprocess'" in results["subprocess"]["error"]
    assert "No module named 'socket'" in results["socket"]["error"]
    assert "code_limits.time" in results["loop"]["error"]
    assert upstream.requests == []
    # No tool was called: the only rows are the scripts' own, each with its error.
    scripts = [(r["arguments"]["code"], r["status"]) for r in reversed(audit) if r["kind"] == "tool"]
    assert sorted(scripts) == sorted(zip(HOSTILE.values(), [*["code_error"] * 4, "code_limit"], strict=True))


def test_the_gateway_serves_others_while_a_script_loops(tmp_path: Path, llm: LenientLLM,
                                                        upstream: RecordingServer) -> None:
    write_project(tmp_path, llm.url, upstream.url, CODE_AGENTS_YAML)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    llm.script(Reply(calls=[Call("run_code", {"code": HOSTILE["loop"]})]), Reply(text="It looped."))
    health: list[float] = []
    steps: dict[str, float] = {}
    finished = threading.Event()
    with running(app) as url, httpx.Client(base_url=url, headers=bearer(TRIAGE_KEY), timeout=30) as client:
        def poll() -> None:
            with httpx.Client(base_url=url, timeout=30) as poller:
                while not finished.is_set():
                    if poller.get("/healthz").status_code == 200:
                        health.append(time.monotonic())

        poller = threading.Thread(target=poll)
        poller.start()
        try:
            with client.stream("POST", "/v1/chat/completions", json={**CHAT, "stream": True}) as streamed:
                for line in streamed.iter_lines():
                    if line.startswith("data: {"):
                        event = json.loads(line[6:]).get("gateway", {}).get("event")
                        if event in ("step_started", "step_finished"):
                            steps[event] = time.monotonic()
        finally:
            finished.set()
            poller.join()
    safety.store.close()  # type: ignore[attr-defined]
    assert set(steps) == {"step_started", "step_finished"}
    # While the script looped (from its step's start to its end), /healthz kept being answered.
    assert len([at for at in health if steps["step_started"] < at < steps["step_finished"]]) >= 2


def test_mcp_clients_get_run_code_and_a_script_waits_for_its_approval(tmp_path: Path, llm: LenientLLM,
                                                                       upstream: RecordingServer) -> None:
    from mcp import Client

    agents_yaml = AGENTS_YAML.replace("    approval: writes\n", "    approval: writes\n    code_mode: only\n")
    write_project(tmp_path, llm.url, upstream.url, agents_yaml)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")

    async def session(url: str) -> tuple[list[str], Any, Any, Any]:
        async with Client(f"{url}/mcp/triage") as client:
            listed = [t.name for t in (await client.list_tools()).tools]
            direct = await client.call_tool("createIssueComment", {"owner": "acme", "repo": "app",
                                                                   "issue_number": 7, "body": "x"})
            found = await client.call_tool("search_tools", {"query": "comment on an issue"})
            waiting = await client.call_tool("run_code", {"code": READ_READ_WRITE})
        return listed, direct, found, waiting

    with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        listed, direct, found, waiting = anyio.run(session, url)
        text = "\n".join(c.text for c in waiting.content)
        (pending,) = client.get("/approvals").json()["data"]
        reads = _requests(upstream)
        done = client.post(f"/approvals/{pending['id']}", json={"decision": "approve"})
        audit = client.get("/audit?limit=50").json()["data"]
    safety.store.close()  # type: ignore[attr-defined]
    assert listed == ["run_code", "search_tools", "describe_tool"]
    assert direct.is_error and "call it as a function in a run_code script" in direct.content[0].text
    assert "def createIssueComment(*, owner: str" in found.content[0].text
    assert waiting.is_error and pending["id"] in text and pending["tool"] == "createIssueComment"
    assert reads == [("GET", "/github/repos/acme/app/issues"), ("GET", "/github/repos/acme/app/issues/7")]
    assert done.status_code == 200 and done.json()["result"]["body"] == {"commented": 99, "on": 7}
    assert _requests(upstream) == [*reads, ("POST", "/github/repos/acme/app/issues/7/comments")]
    doors = {(r["tool"].rsplit("_", 1)[-1], r["status"]) for r in audit if r["kind"] == "tool"}
    assert {("listIssues", "ok"), ("getIssue", "ok"), ("createIssueComment", "approval_pending"),
            ("createIssueComment", "ok")} <= doors


DEEP = "a = []\nfor i in range(100000):\n    a = [a]\n"


def test_a_value_nested_past_the_cut_is_shown_short_not_a_gateway_failure(tmp_path: Path, llm: LenientLLM,
                                                                           upstream: RecordingServer) -> None:
    """redteam44: a script's value 100,000 lists deep, returned or handed to a tool, recursed in the gateway past
    Python's limit (a RecursionError rendering it), so the script failed and its audit row said the call may have
    run upstream. Past the depth JSON keeps, the value is a short text saying what it was."""
    write_project(tmp_path, llm.url, upstream.url, CODE_AGENTS_YAML.replace("time: 1,", "time: 10,"))
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    llm.script(Reply(calls=[Call("run_code", {"code": DEEP + "a"}),
                            Call("run_code", {"code": DEEP + "listIssues(owner='acme', repo=a)"})]),
               Reply(text="done"))
    answer, audit = _chat_and_audit(app, safety)
    assert answer.status_code == 200, answer.text
    returned, handed = [json.loads(m["content"]) for m in llm.requests[-1].body["messages"] if m["role"] == "tool"]
    depth, inner = 0, returned
    while isinstance(inner, list):
        depth, inner = depth + 1, inner[0]
    assert depth == 64 and isinstance(inner, str) and inner.startswith("[[[") and len(inner) <= 200
    # The argument is refused by the tool's schema (a list where a string goes), and nothing is sent.
    assert handed["error_type"] == "code_error" and "listIssues failed (invalid_arguments" in handed["error"]
    assert upstream.requests == []
    scripts = sorted(r["status"] for r in audit if r["tool"] == "run_code")
    assert scripts == ["code_error", "ok"]


def test_a_run_at_its_tool_call_cap_starts_no_more_scripts(tmp_path: Path, llm: LenientLLM,
                                                           upstream: RecordingServer) -> None:
    """redteam44: a `run_code` call was not counted against the run's `max_tool_calls` (only the calls its script
    made were), so a model told to could start any number of scripts, each with its seconds of CPU: with a cap of
    3, two turns of 40 scripts ran all 80. A script is one of the run's calls, as a delegation is."""
    write_project(tmp_path, llm.url, upstream.url,
                  CODE_AGENTS_YAML.replace("    code_mode: only\n", "    code_mode: only\n    max_tool_calls: 3\n"))
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    turn = Reply(calls=[Call("run_code", {"code": f"{i} * 2"}) for i in range(40)])
    llm.script(turn, turn, Reply(text="done"))
    answer, audit = _chat_and_audit(app, safety, "/audit?limit=200&tool=run_code")
    assert answer.status_code == 200, answer.text
    steps = answer.json()["gateway"]["steps"]
    assert [s["ok"] for s in steps].count(True) == 3 and len(audit) == 3
    refused = [s for s in steps if not s["ok"]]
    assert refused and all(s["error_type"] == "rate_limited" and "cap of 3 tool calls" in s["error"]
                           for s in refused)
