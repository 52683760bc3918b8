"""The direct-call door: a client that leaves before its body has arrived."""

from __future__ import annotations

import socket
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from recording_server import RecordingServer


def test_a_client_leaving_mid_body_ends_the_call_quietly(gw: tuple[str, Any], upstream: RecordingServer,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    url, _ = gw
    address = urlsplit(url)
    with socket.create_connection((address.hostname, address.port)) as sock:
        sock.sendall(b"POST /agents/weather/tools/getForecast HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"latitude\": 1")
        time.sleep(0.1)  # the door is waiting for the rest of the body
    time.sleep(0.2)
    assert upstream.requests == []
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")], caplog.text
    # The gateway goes on serving.
    response = httpx.post(f"{url}/agents/weather/tools/getForecast", json={"latitude": 1, "longitude": 2})
    assert response.status_code == 200


def test_a_body_in_several_pieces_is_read_whole(gw: tuple[str, Any], upstream: RecordingServer) -> None:
    """The usual body arrives in one message and is taken as it is; one sent in chunks (and one split across
    packets under a declared length) is joined before it is parsed."""
    url, _ = gw

    def pieces() -> Any:
        yield b'{"latitude": 52.5'
        yield b', "longitude": 13.4}'

    chunked = httpx.post(f"{url}/agents/weather/tools/getForecast", content=pieces(),
                         headers={"Content-Type": "application/json"})
    assert chunked.status_code == 200, chunked.text
    address = urlsplit(url)
    body = b'{"latitude": 52.5, "longitude": 13.4}'
    with socket.create_connection((address.hostname, address.port)) as sock:
        sock.sendall(b"POST /agents/weather/tools/getForecast HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:10])
        time.sleep(0.1)
        sock.sendall(body[10:])
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200")
    assert len(upstream.requests) == 2
