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
