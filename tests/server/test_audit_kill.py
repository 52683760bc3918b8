"""The audit's promise on a real `gateway serve` with its default SQLite store, judged by the file itself as another
process reads it: a call's row is in the file when the upstream receives the call, its outcome is there when the
answer returns, and a process killed with SIGKILL (no shutdown of any
kind) loses no row of a call it sent (WAL with `synchronous=NORMAL`: a commit is in the operating system's hands
before the call leaves; a power loss is another matter, docs/safety.md)."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from recording_server import Recorded, RecordingServer, Reply
from serve_process import start_serve

sys.path.insert(0, str(Path(__file__).parent.parent / "safety"))

from counted_writes import received, write_counter_project  # noqa: E402


def _rows(store: Path) -> dict[int, str]:
    """The numbered writes the file records, with their status, as another process reads them."""
    if not store.exists():
        return {}
    with contextlib.closing(sqlite3.connect(store, timeout=10)) as other:
        found = other.execute("SELECT arguments, status FROM audit WHERE kind = 'tool'").fetchall()
    return {json.loads(arguments)["n"]: status for arguments, status in found}


def _post(port: int, n: int) -> int:
    with httpx.Client(timeout=30) as client:
        return client.post(f"http://127.0.0.1:{port}/agents/writer/tools/write", json={"n": n}).status_code


def test_rows_before_sending_outcomes_within_the_bound_and_none_lost_to_sigkill(tmp_path: Path) -> None:
    store = tmp_path / ".gateway" / "state.db"
    seen: dict[int, dict[int, str]] = {}  # what the file said when the upstream received each write
    lock = threading.Lock()

    def look(request: Recorded) -> Reply:
        rows = _rows(store)
        with lock:
            seen[request.json()["n"]] = rows
        return Reply(201, {"ok": True})

    with RecordingServer() as upstream:
        upstream.route("/write", look)
        write_counter_project(tmp_path, "http://127.0.0.1:9", upstream.url)
        process, port = start_serve(tmp_path)
        try:
            for n in range(1, 6):  # one after another
                assert _post(port, n) == 200
                assert seen[n][n] == "running"  # the row was in the file when the upstream had the call
                assert all(seen[n][earlier] == "ok" for earlier in range(1, n))
                assert _rows(store)[n] == "ok"  # the outcome was committed before the answer returned

            with ThreadPoolExecutor(8) as pool:  # then many at once, killed while they run and answer
                answers = [pool.submit(_post, port, n) for n in range(100, 140)]
                while len(received(upstream)) < 20:
                    time.sleep(0.001)
                process.send_signal(signal.SIGKILL)
                for answer in answers:
                    with contextlib.suppress(httpx.HTTPError):
                        answer.result()
            assert process.wait(30) == -signal.SIGKILL
        finally:
            process.kill()
        rows = _rows(store)
        sent = received(upstream)
    assert sent and all(count == 1 for count in sent.values())
    assert [n for n in sent if n not in rows] == []  # no row of a sent call was lost
    assert all(seen[n].get(n) == "running" for n in sent)
    assert {rows[n] for n in range(1, 6)} == {"ok"}
    assert set(rows.values()) <= {"ok", "running"}
