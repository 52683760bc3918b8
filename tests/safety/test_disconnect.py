from __future__ import annotations

import asyncio
import socket
import threading
import time

import httpx
import pytest
from server_support import running
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from gateway.server.disconnect import WATCH_AFTER, DisconnectMiddleware


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


def _app(work: Work, **options: float) -> Starlette:
    return Starlette(routes=[Route("/work", work.endpoint, methods=["POST"])],
                     middleware=[Middleware(DisconnectMiddleware, **options)])


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
    app = Starlette(routes=[Route("/work", work.endpoint, methods=["POST"])],
                    middleware=[Middleware(DisconnectMiddleware, watch_after=0.1)])
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

        middleware = DisconnectMiddleware(app, watch_after=0.1)
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

            await middleware({"type": "http", "method": "POST", "path": path}, receive, send)
            assert sent[0]["status"] == 200

        for _ in range(20):
            await request("/quick")
        sweeper = middleware._sweeper()
        assert sweeper.pending == {}  # none of the twenty is left to visit
        slow = asyncio.ensure_future(request("/slow"))
        await asyncio.sleep(0.2)  # past its watch's start
        assert sweeper.pending == {} and len(started) == 1
        await slow

    asyncio.run(scenario())
