from __future__ import annotations

import asyncio
import socket
import threading

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
