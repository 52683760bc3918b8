"""Slowloris on every door: a connection that says nothing, half a request head, or less body than it announced
is closed by the gateway (the head with a 408), not held for ever, and the gateway goes on serving.

A real gateway (uvicorn on 127.0.0.1 with the protocol `gateway serve` runs); the deadlines are shortened for
the test, which waits for the close itself (a socket timeout far above them only keeps a broken run from hanging).
"""

from __future__ import annotations

import socket
from typing import Any

import httpx
import pytest

from gateway.server import bounded_head

HANG_GUARD = 60.0


@pytest.fixture
def served(gw: tuple[str, Any], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(bounded_head, "HEAD_SECONDS", 0.5)
    monkeypatch.setattr(bounded_head, "BODY_SECONDS", 0.5)
    return gw[0]


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=HANG_GUARD)


def _until_closed(connection: socket.socket) -> bytes:
    answer = b""
    try:
        while chunk := connection.recv(65536):
            answer += chunk
    except ConnectionResetError:
        pass
    return answer


@pytest.mark.parametrize("door", ["/v1/chat/completions", "/v1/responses", "/agents/weather/tools/getForecast",
                                  "/mcp/weather", "/approvals/apr_x", "/console/"])
def test_half_a_head_is_answered_408_and_closed(served: str, door: str) -> None:
    with _connect(served) as connection:
        connection.sendall(f"POST {door} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl".encode())
        answer = _until_closed(connection)
    assert answer.startswith(b"HTTP/1.1 408 ") and b"request_timeout" in answer, answer[:200]
    assert httpx.get(f"{served}/healthz", timeout=10).status_code == 200


def test_a_connection_that_never_speaks_is_closed(served: str) -> None:
    with _connect(served) as connection:
        assert _until_closed(connection) == b""


@pytest.mark.parametrize("door", ["/v1/chat/completions", "/agents/weather/tools/getForecast", "/mcp/weather"])
def test_a_body_shorter_than_announced_is_not_waited_for_for_ever(served: str, door: str) -> None:
    with _connect(served) as connection:
        connection.sendall(f"POST {door} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           "Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{\"a\"".encode())
        assert b"HTTP/1.1 200" not in _until_closed(connection)
    assert httpx.get(f"{served}/healthz", timeout=10).status_code == 200


def test_a_kept_alive_connection_serves_request_after_request(served: str) -> None:
    # The head's deadline starts at each head's first byte, not once per connection.
    with httpx.Client(base_url=served, timeout=10) as client:
        for _ in range(3):
            assert client.get("/healthz").status_code == 200
