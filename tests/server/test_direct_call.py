"""The direct-call door: a client that leaves before its body has arrived."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from recording_server import RecordingServer, Reply
from server_support import FORECAST, LenientLLM, gateway

API_TOKEN = "gh-secret-token"
"""The github api's bearer token in server_support.AGENTS_YAML (every secret of the manifest is redacted)."""


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


def test_the_answer_carries_the_apis_json_as_it_was_sent(gw: tuple[str, Any], upstream: RecordingServer) -> None:
    """A body nothing changed (no secret in it, nothing cut) is answered as the api's own JSON text, not written
    again from its parse: an integer past a double's precision keeps its digits (its parse holds a float)."""
    url, _ = gw
    big = 123456789012345678901234567890
    text = json.dumps({**FORECAST, "generationtime_ms": 0}, ensure_ascii=False)  # no escape: see the next test
    text = text.replace('"generationtime_ms": 0', f'"generationtime_ms": {big}')
    upstream.route("/meteo/v1/forecast", Reply(200, text.encode(), headers={"Content-Type": "application/json"}))
    response = httpx.post(f"{url}/agents/weather/tools/getForecast", json={"latitude": 52.5, "longitude": 13.4})
    assert response.status_code == 200, response.text
    answer = json.loads(response.text)  # the standard library keeps an integer's every digit
    assert answer["ok"] is True
    assert answer["body"]["generationtime_ms"] == big
    assert answer["body"]["current"] == FORECAST["current"]


def test_a_body_with_a_secret_is_not_passed_on_as_sent(gw: tuple[str, Any], upstream: RecordingServer) -> None:
    """The api's text goes out only when the redaction found nothing in it: an echoed credential is replaced."""
    url, _ = gw
    upstream.route("/meteo/v1/forecast", Reply(200, {**FORECAST, "timezone": API_TOKEN}))
    response = httpx.post(f"{url}/agents/weather/tools/getForecast", json={"latitude": 52.5, "longitude": 13.4})
    assert response.status_code == 200, response.text
    assert API_TOKEN not in response.text
    assert response.json()["body"]["timezone"] == "[REDACTED]"


def test_a_secret_its_parse_dropped_is_not_passed_on_as_sent(gw: tuple[str, Any], upstream: RecordingServer) -> None:
    """A text can hold what its parse drops: of a repeated key the parse keeps the last value, so a credential in the
    first is in the api's text and not in the body the redaction judged. The text goes out only when it showed no
    secret in any form and no escape (which could hide one in such a key); here the answer is written from the
    (clean) parse."""
    url, _ = gw
    text = json.dumps(FORECAST, ensure_ascii=False)[:-1] + f', "note": "{API_TOKEN}", "note": "fine"}}'
    upstream.route("/meteo/v1/forecast", Reply(200, text.encode(), headers={"Content-Type": "application/json"}))
    response = httpx.post(f"{url}/agents/weather/tools/getForecast", json={"latitude": 52.5, "longitude": 13.4})
    assert response.status_code == 200, response.text
    assert API_TOKEN not in response.text
    assert response.json()["body"]["note"] == "fine"


class _StampBody:
    """A hook that changes the body in place (no new object for anyone to notice)."""

    async def before_tool_call(self, invocation: Any) -> None:
        return None

    async def after_tool_call(self, invocation: Any, result: Any) -> Any:
        result.body["timezone"] = "stamped"
        return result


def test_a_body_a_hook_changed_in_place_is_answered_as_changed(tmp_path: Path, llm: LenientLLM,
                                                                upstream: RecordingServer) -> None:
    with gateway(tmp_path, llm.url, upstream.url, hooks=[_StampBody()]) as (url, _):
        response = httpx.post(f"{url}/agents/weather/tools/getForecast", json={"latitude": 52.5, "longitude": 13.4})
    assert response.status_code == 200, response.text
    assert response.json()["body"]["timezone"] == "stamped"


class _SeeCaller:
    """A hook that notes the call's agent and the caller context it runs in."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    async def before_tool_call(self, invocation: Any) -> None:
        from gateway.kernel.caller import current_caller

        self.seen.append((invocation.agent, current_caller()))
        return None

    async def after_tool_call(self, invocation: Any, result: Any) -> Any:
        return result


def test_the_door_binds_no_caller_of_its_own(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    """The agent travels in the call's Invocation; the call runs in the caller the request was given (here that of a
    gateway without clients), with no narrowed copy made for it."""
    hook = _SeeCaller()
    with gateway(tmp_path, llm.url, upstream.url, hooks=[hook]) as (url, _):
        response = httpx.post(f"{url}/agents/weather/tools/getForecast", json={"latitude": 52.5, "longitude": 13.4})
    assert response.status_code == 200, response.text
    [(agent, caller)] = hook.seen
    assert agent == "weather"
    assert caller.agent is None
