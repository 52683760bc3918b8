from __future__ import annotations

import asyncio
import logging
import socket
import sqlite3
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from recording_server import RecordingServer, Reply
from server_support import LenientLLM, running
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from gateway.safety.audit import CANCELLED
from gateway.server.disconnect import WATCH_AFTER, DisconnectWatch
from gateway.server.envelope import RequestEnvelope
from gateway.server.hosts import HostPolicy

from .safety_support import hang_up_during_a_call, safe_gateway


class Work:
    def __init__(self) -> None:
        self.started = threading.Event()
        self.cancelled = threading.Event()
        self.finished = threading.Event()

    async def endpoint(self, request: Request) -> JSONResponse:
        await request.body()
        self.started.set()
        try:
            await asyncio.sleep(float(request.query_params.get("sleep", "30")))
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        self.finished.set()
        return JSONResponse({"done": True})


ANY_HOST = SimpleNamespace(current=HostPolicy(hosts=None))
"""A host policy that admits any `Host` (these tests send `Host: x`): only the watch is under test."""


def _watched(watch_after: float = WATCH_AFTER) -> list[Middleware]:
    """The request envelope with the disconnect watch and nothing else of the gateway's (no metrics, no access
    line, any host): the one layer that runs the watch."""
    return [Middleware(RequestEnvelope, policy=ANY_HOST, max_body_bytes=1_000_000, metrics=None,
                       watch=DisconnectWatch(watch_after))]


def _app(work: Work, watch_after: float = WATCH_AFTER) -> Starlette:
    return Starlette(routes=[Route("/work", work.endpoint, methods=["POST"])], middleware=_watched(watch_after))


@pytest.mark.parametrize("watch_after", [0.0, WATCH_AFTER, 0.3])  # the client leaves before or after watching starts
def test_a_client_that_goes_away_cancels_the_work(watch_after: float) -> None:
    work = Work()
    with running(_app(work, watch_after=watch_after)) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"POST /work HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 2\r\n\r\n{}")
            assert work.started.wait(10)
        assert work.cancelled.wait(10)
        assert not work.finished.is_set()


def test_a_client_that_waits_gets_the_answer() -> None:
    work = Work()
    with TestClient(_app(work)) as client:
        response = client.post("/work?sleep=0.01", json={})
        assert response.json() == {"done": True}
    assert work.finished.is_set() and not work.cancelled.is_set()


class Counting:
    """An endpoint that sleeps as long as asked, counting starts, cancellations and finishes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts = {"started": 0, "cancelled": 0, "finished": 0}

    def _count(self, what: str) -> None:
        with self.lock:
            self.counts[what] += 1

    async def endpoint(self, request: Request) -> JSONResponse:
        await request.body()
        self._count("started")
        try:
            await asyncio.sleep(float(request.query_params["sleep"]))
        except asyncio.CancelledError:
            self._count("cancelled")
            raise
        self._count("finished")
        return JSONResponse({"done": True})

    def wait_for(self, what: str, count: int, seconds: float = 10.0) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with self.lock:
                if self.counts[what] >= count:
                    return True
            time.sleep(0.01)
        return False


def _open_request(port: int, sleep: float) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(f"POST /work?sleep={sleep} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Content-Length: 2\r\n\r\n{}".encode())
    return sock


def test_overlapping_requests_are_each_watched_from_their_own_start() -> None:
    # Requests that ended, requests still running and requests that arrive while the watch timer is set share
    # one queue: each client that leaves has its own work cancelled, and only its own.
    work = Counting()
    app = Starlette(routes=[Route("/work", work.endpoint, methods=["POST"])], middleware=_watched(0.1))
    with running(app) as url:
        port = int(url.rsplit(":", 1)[1])
        with httpx.Client(base_url=url) as client:
            assert client.post("/work?sleep=0", json={}).status_code == 200  # ends long before its watch is due
            first = _open_request(port, 30)
            assert work.wait_for("started", 2)
            time.sleep(0.05)  # the second arrives while the first one's watch is still to come
            second = _open_request(port, 30)
            stays = _open_request(port, 0.6)
            assert work.wait_for("started", 4)
            first.close()
            assert work.wait_for("cancelled", 1)
            time.sleep(0.2)  # long past every watch's start
            second.close()
            assert work.wait_for("cancelled", 2)
            assert stays.recv(4096).startswith(b"HTTP/1.1 200")  # the one whose client stayed is answered
            stays.close()
            assert client.post("/work?sleep=0", json={}).status_code == 200
    assert work.counts == {"started": 5, "cancelled": 2, "finished": 3}


def test_a_request_that_ended_is_not_waited_for_by_the_sweep() -> None:
    """A request that ends before its watch is due leaves the sweeper's queue at once (the sweep then visits only
    the requests still running), and one still running when it is due gets its watcher."""
    async def scenario() -> None:
        started: list[asyncio.Future[None]] = []

        async def app(scope: dict, receive: object, send: object) -> None:
            await receive()  # type: ignore[operator]
            if scope["path"] == "/slow":
                started.append(asyncio.get_running_loop().create_future())
                await asyncio.sleep(0.3)
            await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
            await send({"type": "http.response.body", "body": b""})  # type: ignore[operator]

        watch = DisconnectWatch(0.1)
        envelope = RequestEnvelope(app, policy=ANY_HOST, max_body_bytes=1000, metrics=None,  # type: ignore[arg-type]
                                   watch=watch)
        leave = asyncio.Event()

        async def receive() -> dict:
            if not leave.is_set():
                leave.set()
                return {"type": "http.request", "body": b"{}", "more_body": False}
            await asyncio.Event().wait()
            raise AssertionError

        async def request(path: str) -> None:
            nonlocal leave
            leave = asyncio.Event()
            sent: list[dict] = []

            async def send(message: dict) -> None:
                sent.append(message)

            await envelope({"type": "http", "method": "POST", "path": path, "headers": [
                (b"host", b"x"), (b"content-type", b"application/json"), (b"content-length", b"2")]}, receive, send)
            assert sent[0]["status"] == 200

        for _ in range(20):
            await request("/quick")
        sweeper = watch.sweeper()
        assert sweeper.pending == {}  # none of the twenty is left to visit
        slow = asyncio.ensure_future(request("/slow"))
        await asyncio.sleep(0.2)  # past its watch's start
        assert sweeper.pending == {} and len(started) == 1
        await slow

    asyncio.run(scenario())


def test_the_gateway_cancels_a_tool_call_whose_client_left_and_audits_it(tmp_path: Path, llm: LenientLLM,
                                                                         upstream: RecordingServer) -> None:
    """On the gateway's own app the watch runs in the request envelope (one layer, not a middleware of its own): a
    direct call whose client goes away while the api is still answering is cancelled, and its audit row says so."""
    upstream.route("/", Reply(200, {"ok": True}, delay=30))
    store = tmp_path / "state.db"
    with safe_gateway(tmp_path, llm.url, upstream.url, store=store) as (url, _):
        hang_up_during_a_call(url, upstream)
        deadline = time.monotonic() + 10
        while (rows := _tool_rows(store)) and rows[0][0] == "running":
            assert time.monotonic() < deadline, "the cancellation was never recorded"
            time.sleep(0.05)
    assert rows == [("transport_error", CANCELLED)]
    assert len(upstream.requests) == 1  # sent once, never repeated


def _tool_rows(store: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(store) as db:
        return db.execute("SELECT status, error FROM audit WHERE kind = 'tool'").fetchall()


@pytest.mark.parametrize("answers_when_cancelled", [False, True])
def test_the_envelope_runs_the_watch_in_its_own_frame(answers_when_cancelled: bool) -> None:
    """`RequestEnvelope(watch=...)`: the client leaving cancels the app, and the request is still counted (499, as
    nginx counts a client that closed its request) and its access line written (with no status: nothing was
    answered), also when the app answers as it is cancelled (the MCP door does: `mcp.stopping`), to nobody."""

    async def scenario() -> None:
        started = asyncio.Event()
        cancelled: list[bool] = []

        async def app(scope: dict, receive: Any, send: Any) -> None:
            await receive()
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.append(True)
                if answers_when_cancelled:
                    await send({"type": "http.response.start", "status": 503, "headers": []})
                    await send({"type": "http.response.body", "body": b"stopped"})
                raise

        lines: list[tuple[Any, ...]] = []

        class Log(logging.Logger):
            def isEnabledFor(self, level: int) -> bool:  # noqa: N802 - logging's name
                return True

            def handle(self, record: logging.LogRecord) -> None:
                lines.append(record.args or ())

        counted: list[tuple[str, int]] = []

        class Metrics:
            def count_request(self, door: str, status: int) -> None:
                counted.append((door, status))

        policy = SimpleNamespace(current=HostPolicy.build("127.0.0.1", keyless=True))
        envelope = RequestEnvelope(app, policy=policy, max_body_bytes=1000,  # type: ignore[arg-type]
                                   metrics=Metrics(), access_log=Log("access"),  # type: ignore[arg-type]
                                   watch=DisconnectWatch(0.0))
        messages = [{"type": "http.request", "body": b"{}", "more_body": False}, {"type": "http.disconnect"}]

        async def receive() -> dict:
            if len(messages) == 1:
                await started.wait()
            return messages.pop(0)

        sent: list[dict] = []

        async def send(message: dict) -> None:
            sent.append(message)  # (a server drops what is sent to a client that left)

        scope = {"type": "http", "method": "POST", "path": "/agents/a/tools/t", "raw_path": b"/agents/a/tools/t",
                 "query_string": b"", "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                                                  (b"content-length", b"2")], "server": ("127.0.0.1", 8080),
                 "client": ("127.0.0.1", 5000), "http_version": "1.1"}
        await asyncio.wait_for(envelope(scope, receive, send), 10)
        await asyncio.sleep(0)  # the access line is written on the loop's next turn
        assert cancelled == [True]
        assert counted == [("direct", 499)]  # not a 500: the gateway did not fail, its client left
        assert len(lines) == 1 and lines[0][-1] == 0
        assert len(sent) == (2 if answers_when_cancelled else 0)

    asyncio.run(scenario())
