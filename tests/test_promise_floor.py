"""The floor of the promises (bench/promise_floor.py) keeps each promise it claims: a real uvicorn serving it on
127.0.0.1, in front of a real recording upstream; the store is the SQLite file it writes."""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from recording_server import Recorded, RecordingServer, Reply

from bench.promise_floor import FLOOR_KEY, MARKER, Promises, make_app, server_options
from bench.support import CALL_ARGS, DIRECT_PATH, TOKEN

PATH = "/agents/bench/tools/listIssues"
ANSWER = {"items": [{"id": 1, "name": "one", "tags": ["a"]}]}
KEY = {"Authorization": f"Bearer {FLOOR_KEY}"}


@contextmanager
def serving(promises: Promises, upstream: str, folder: Path, *, audit_form: str = "sqlite") -> Iterator[str]:
    app, _ = make_app(promises, upstream, folder, audit_form=audit_form)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="off",
                                           **server_options(promises)))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def rows(folder: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(folder / "floor.db") as conn:
        return conn.execute("SELECT status, arguments, http_status, error FROM audit ORDER BY id").fetchall()


@pytest.fixture
def upstream() -> Iterator[RecordingServer]:
    with RecordingServer() as server:
        server.route("/repos/", Reply(200, ANSWER))
        yield server


def test_every_promise_answers_the_direct_call(upstream: RecordingServer, tmp_path: Path) -> None:
    with serving(Promises(), upstream.url, tmp_path) as url:
        answer = httpx.post(url + PATH, json=CALL_ARGS, headers=KEY)
    assert answer.status_code == 200, answer.text
    assert answer.json()["body"] == ANSWER and answer.json()["ok"] is True
    sent = upstream.last
    assert sent.target == DIRECT_PATH  # the bench's direct request, built from the spec's path, query and headers
    assert sent.header("authorization") == f"Bearer {TOKEN}" and sent.header("x-request-id") == "bench"
    assert rows(tmp_path) == [("ok", json.dumps(CALL_ARGS, separators=(",", ":")), 200, None)]


def test_a_bad_argument_is_refused_and_nothing_sent(upstream: RecordingServer, tmp_path: Path) -> None:
    with serving(Promises(), upstream.url, tmp_path) as url:
        answer = httpx.post(url + PATH, json={**CALL_ARGS, "per_page": 300}, headers=KEY)
    assert answer.status_code == 422
    assert "300 is greater than the maximum of 100" in answer.json()["error"]["message"]
    assert upstream.requests == [] and rows(tmp_path) == []


def test_the_row_is_committed_before_the_upstream_sees_the_request(upstream: RecordingServer,
                                                                   tmp_path: Path) -> None:
    seen: list[list[tuple[Any, ...]]] = []

    def look(request: Recorded) -> Reply:  # another connection reads the file as the request arrives
        seen.append(rows(tmp_path))
        return Reply(200, ANSWER)

    upstream.route("/repos/", look)
    with serving(Promises(), upstream.url, tmp_path) as url:
        assert httpx.post(url + PATH, json=CALL_ARGS, headers=KEY).status_code == 200
    assert [status for status, *_ in seen[0]] == ["running"]
    assert [status for status, *_ in rows(tmp_path)] == ["ok"]  # the outcome, before the answer


def test_a_secret_is_absent_from_the_row(upstream: RecordingServer, tmp_path: Path) -> None:
    with serving(Promises(), upstream.url, tmp_path) as url:
        answer = httpx.post(url + PATH, json={**CALL_ARGS, "X-Request-Id": f"echo {TOKEN}"}, headers=KEY)
    assert answer.status_code == 200
    (_, arguments, _, _), = rows(tmp_path)
    assert TOKEN not in arguments and json.loads(arguments)["X-Request-Id"] == f"echo {MARKER}"


def test_a_secret_the_api_echoes_is_absent_from_the_answer(upstream: RecordingServer, tmp_path: Path) -> None:
    upstream.route("/repos/", Reply(200, {"items": [{"id": 1, "name": TOKEN, "tags": []}]}))
    with serving(Promises(), upstream.url, tmp_path) as url:
        answer = httpx.post(url + PATH, json=CALL_ARGS, headers=KEY)
    assert TOKEN not in answer.text and answer.json()["body"]["items"][0]["name"] == MARKER


def test_an_answer_the_output_schema_refuses_is_invalid_output(upstream: RecordingServer, tmp_path: Path) -> None:
    upstream.route("/repos/", Reply(200, {"items": [{"id": "not a number"}]}))
    with serving(Promises(), upstream.url, tmp_path) as url:
        answer = httpx.post(url + PATH, json=CALL_ARGS, headers=KEY)
    assert answer.status_code == 502 and answer.json()["error"]["code"] == "invalid_output"
    assert [status for status, *_ in rows(tmp_path)] == ["invalid_output"]


def test_a_caller_without_the_key_is_refused(upstream: RecordingServer, tmp_path: Path) -> None:
    with serving(Promises(), upstream.url, tmp_path) as url:
        missing = httpx.post(url + PATH, json=CALL_ARGS)
        wrong = httpx.post(url + PATH, json=CALL_ARGS, headers={"Authorization": "Bearer nope"})
        foreign = httpx.post(url + PATH, json=CALL_ARGS, headers={**KEY, "Host": "evil.example"})
    assert (missing.status_code, wrong.status_code, foreign.status_code) == (401, 401, 421)
    assert upstream.requests == []


def test_each_promise_can_be_left_out(upstream: RecordingServer, tmp_path: Path) -> None:
    promises = Promises().without("key", "audit", "validation")
    with serving(promises, upstream.url, tmp_path) as url:
        answer = httpx.post(url + PATH, json={**CALL_ARGS, "per_page": 300})
    assert answer.status_code == 200  # no key asked, no schema judged
    assert not (tmp_path / "floor.db").exists()  # no store opened


def test_the_appended_audit_line_is_written_before_the_upstream_sees_the_request(upstream: RecordingServer,
                                                                                tmp_path: Path) -> None:
    log = tmp_path / "floor.db.log"
    seen: list[list[dict[str, Any]]] = []

    def look(request: Recorded) -> Reply:
        seen.append([json.loads(line) for line in log.read_text().splitlines()])
        return Reply(200, ANSWER)

    upstream.route("/repos/", look)
    with serving(Promises(), upstream.url, tmp_path, audit_form="file") as url:
        assert httpx.post(url + PATH, json={**CALL_ARGS, "X-Request-Id": TOKEN}, headers=KEY).status_code == 200
    assert [line["status"] for line in seen[0]] == ["running"]
    assert TOKEN not in log.read_text()
    assert [line["status"] for line in map(json.loads, log.read_text().splitlines())] == ["running", "ok"]
