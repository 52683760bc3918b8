from __future__ import annotations

import asyncio
import logging
import socket
import threading
from typing import Any

import httpx
import pytest
from server_support import running

from gateway.server.protocol import CoalescingTransport, http_protocol

pytestmark = pytest.mark.anyio


class RecordingTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.events: list[str] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)
        self.events.append("write")

    def close(self) -> None:
        self.closing = True
        self.events.append("close")

    def write_eof(self) -> None:
        self.events.append("eof")

    def is_closing(self) -> bool:
        return self.closing

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else None


async def test_writes_of_one_turn_reach_the_socket_as_one() -> None:
    real = RecordingTransport()
    transport = CoalescingTransport(real, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    transport.write(bytearray(b"{}"))
    assert real.writes == []  # held until the end of this turn
    await asyncio.sleep(0)
    assert real.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
    transport.write(b"next")
    await asyncio.sleep(0)
    assert real.writes[1:] == [b"next"]
    assert transport.get_extra_info("peername") == ("127.0.0.1", 1)  # everything else is the real transport's


async def test_close_and_eof_send_what_is_held_first() -> None:
    real = RecordingTransport()
    transport = CoalescingTransport(real, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.write(b"last words")
    transport.close()
    assert real.events == ["write", "close"] and real.writes == [b"last words"]
    transport.write(b"too late")  # the real transport is closing: dropped, as a closing transport would
    await asyncio.sleep(0)
    assert real.writes == [b"last words"]
    other = RecordingTransport()
    transport = CoalescingTransport(other, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.write(b"a")
    transport.write_eof()
    assert other.events == ["write", "eof"]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            kind = (await receive())["type"]
            await send({"type": f"{kind}.complete"})
            if kind == "lifespan.shutdown":
                return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if scope["path"] == "/linger":
        # Work the app does after its answer's last byte (in a real app: returning through its middleware).
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"4")]})
        await send({"type": "http.response.body", "body": b"done"})
        LINGER["client_had_it"] = LINGER["received"].wait(timeout=10)  # blocks the loop: no turn ends meanwhile
        return
    if scope["path"] == "/logged":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})
        LOGGED["while_answering"] = list(LOGGED["records"])  # what was logged by the time the answer was out
        return
    if scope["path"] == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        for chunk in (b"one ", b"two ", b"three"):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await asyncio.sleep(0.01)
        await send({"type": "http.response.body", "body": b""})
        return
    headers = [(b"content-length", str(len(body) + 5).encode())]
    if scope["path"] == "/close":
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"echo:" + body})


LINGER: dict[str, Any] = {}
LOGGED: dict[str, Any] = {}


class _Records(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        LOGGED["records"].append(record.getMessage())


def test_a_finished_response_leaves_before_the_app_returns() -> None:
    LINGER.update(received=threading.Event(), client_had_it=None)
    with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        assert client.get("/linger").text == "done"
        LINGER["received"].set()
        assert client.post("/echo", content=b"x").text == "echo:x"  # the server is past the linger
    assert LINGER["client_had_it"] is True


def test_the_access_line_is_made_after_the_answer_has_left() -> None:
    LOGGED.update(records=[], while_answering=None)
    access = logging.getLogger("uvicorn.access")
    handler = _Records()
    with running(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        level, access.level = access.level, logging.INFO
        access.addHandler(handler)
        try:
            assert client.get("/logged").text == "ok"
            assert client.post("/echo", content=b"x").text == "echo:x"  # a turn later: the first line is out
        finally:
            access.removeHandler(handler)
            access.setLevel(level)
    assert LOGGED["while_answering"] == []
    assert LOGGED["records"][0].endswith('"GET /logged HTTP/1.1" 200')


def test_serve_uses_the_coalescing_protocol() -> None:
    protocol = http_protocol()
    assert not isinstance(protocol, str) and protocol.__name__ == "CoalescingHttpToolsProtocol"


def test_responses_over_a_real_socket() -> None:
    with running(app) as url, httpx.Client(base_url=url, timeout=5) as client:
        for n in range(5):  # one kept-alive connection
            assert client.post("/echo", content=f"body {n}".encode()).text == f"echo:body {n}"
        assert client.get("/stream").text == "one two three"
        closing = client.post("/close", content=b"x")
        assert closing.text == "echo:x" and closing.headers["connection"] == "close"
        assert client.post("/echo", content=b"again").text == "echo:again"  # a new connection


def test_pipelined_and_expect_continue_requests() -> None:
    with running(app) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(b"POST /a HTTP/1.1\r\nhost: x\r\ncontent-length: 1\r\n\r\n1"
                         b"POST /b HTTP/1.1\r\nhost: x\r\ncontent-length: 1\r\n\r\n2")
            answers = _read_until(sock, b"echo:2")
            assert answers.count(b"HTTP/1.1 200 OK") == 2 and answers.index(b"echo:1") < answers.index(b"echo:2")
            sock.sendall(b"POST /c HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\ncontent-length: 3\r\n\r\n")
            assert _read_until(sock, b"\r\n\r\n").startswith(b"HTTP/1.1 100 Continue")
            sock.sendall(b"abc")
            assert b"echo:abc" in _read_until(sock, b"echo:abc")


def _read_until(sock: socket.socket, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data
