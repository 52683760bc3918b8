"""A gateway killed while it resumes an approved call leaves the run `resuming`; the next one puts it right: once
the run is older than any resume could take, a run that sent nothing is reopened (decide it again: it runs once)
and a run that sent its call is failed (the call may have run: never twice). Real `gateway serve` processes
killed with SIGKILL, a SQLite store file they share, a recording upstream and an HTTP hook on loopback."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import httpx
import pytest
from recording_server import Recorded, RecordingServer, Reply
from server_support import LenientLLM

from .counted_writes import received, write_counter_project
from .instances import GatewayProcess

pytestmark = pytest.mark.slow

# Short timeouts: a resume is over within seconds, so a run `resuming` longer than twice that is stuck.
SETTINGS = """\
    approval: writes
    timeout: 3
    hooks:
      - {{on: before_tool_call, url: "{hook}", timeout: 2}}
"""


def _project(folder: Path, llm: LenientLLM, upstream: RecordingServer) -> Path:
    agents = write_counter_project(folder, llm.url, upstream.url)
    agents.write_text(agents.read_text().replace(
        "tools: [{api: counter}]\n", "tools: [{api: counter}]\n" + SETTINGS.format(hook=f"{upstream.url}/hook")))
    return folder / ".gateway" / "state.db"


def _run_status(store: Path) -> str:
    with sqlite3.connect(store) as db:
        (status,) = db.execute("SELECT status FROM runs").fetchone()
    return str(status)


def _decide_in_background(url: str, approval: str) -> threading.Thread:
    def decide() -> None:
        try:
            httpx.post(f"{url}/approvals/{approval}", json={"decision": "approve"}, timeout=30)
        except httpx.HTTPError:
            pass  # the gateway is killed under it

    thread = threading.Thread(target=decide, daemon=True)
    thread.start()
    return thread


def _wait_for(predicate: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_a_kill_before_the_call_was_sent_reopens_the_approval(tmp_path: Path, llm: LenientLLM,
                                                              upstream: RecordingServer) -> None:
    holding = threading.Event()

    def slow_hook(request: Recorded) -> Reply:
        if not holding.is_set():
            holding.set()
            return Reply(200, {}, delay=1.5)  # the first resume waits here when it is killed
        return Reply(200, {})

    upstream.route("/hook", slow_hook)
    store = _project(tmp_path, llm, upstream)
    first = GatewayProcess(tmp_path, "first").wait_ready()
    try:
        approval = httpx.post(f"{first.url}/agents/writer/tools/write", json={"n": 1}, timeout=30).json()[
            "approval_id"]
        _decide_in_background(first.url, approval)
        assert holding.wait(30)
        first.kill()  # mid-resume: the hook has the call, the upstream does not
    finally:
        first.stop()
    assert _run_status(store) == "resuming" and not received(upstream)
    second = GatewayProcess(tmp_path, "second").wait_ready()
    try:
        _wait_for(lambda: _run_status(store) == "paused")  # the sweep, once the run is past every timeout
        pending = httpx.get(f"{second.url}/approvals", timeout=30).json()["data"]
        again = httpx.post(f"{second.url}/approvals/{approval}", json={"decision": "approve"}, timeout=30)
    finally:
        second.stop()
    assert [a["id"] for a in pending] == [approval]
    assert again.status_code == 200 and again.json()["result"]["ok"] is True
    assert received(upstream) == {1: 1}
    assert _run_status(store) == "done"


def test_a_kill_after_the_call_was_sent_fails_the_run(tmp_path: Path, llm: LenientLLM,
                                                      upstream: RecordingServer) -> None:
    arrived = threading.Event()

    def slow_write(request: Recorded) -> Reply:
        arrived.set()
        return Reply(201, {"ok": True}, delay=1.5)

    upstream.route("/write", slow_write)
    upstream.route("/hook", Reply(200, {}))
    store = _project(tmp_path, llm, upstream)
    first = GatewayProcess(tmp_path, "first").wait_ready()
    try:
        approval = httpx.post(f"{first.url}/agents/writer/tools/write", json={"n": 2}, timeout=30).json()[
            "approval_id"]
        _decide_in_background(first.url, approval)
        assert arrived.wait(30)
        first.kill()  # the upstream has the write: it may run
    finally:
        first.stop()
    second = GatewayProcess(tmp_path, "second").wait_ready()
    try:
        _wait_for(lambda: _run_status(store) == "failed")
        again = httpx.post(f"{second.url}/approvals/{approval}", json={"decision": "approve"}, timeout=30)
        rows = httpx.get(f"{second.url}/audit", params={"tool": "write", "limit": 10}, timeout=30).json()["data"]
    finally:
        second.stop()
    assert again.status_code == 409  # used: the write is not sent a second time
    assert received(upstream) == {2: 1}
    assert "running" in [r["status"] for r in rows]  # sent, its outcome never recorded: the log says so
