"""`exchange`: the body read by the door, and given again whole to the SDK when it hands a request on; the SDK
transport's verdict, asked once per set of header values."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.server.transport_security import TransportSecurityMiddleware

from gateway.server.mcp.endpoint import security_settings
from gateway.server.mcp.exchange import TransportChecks, body_in_one, read_request, read_whole

pytestmark = pytest.mark.anyio


def _receiver(messages: list[dict[str, Any]]) -> Any:
    pending = list(messages)

    async def receive() -> dict[str, Any]:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    return receive


async def _drain(receive: Any) -> list[dict[str, Any]]:
    got = []
    while True:
        message = await receive()
        got.append(message)
        if message["type"] != "http.request" or not message.get("more_body", False):
            return got


@pytest.mark.parametrize("parts", [[b'{"a": 1}'], [b'{"a"', b": 1", b"}"], [b"", b'{"a": 1}']])
async def test_a_body_in_one_or_several_messages_is_read_whole(parts: list[bytes]) -> None:
    messages = [{"type": "http.request", "body": part, "more_body": i + 1 < len(parts)} for i, part in enumerate(parts)]
    body, again = await read_whole(_receiver(messages), 100)
    assert body == b'{"a": 1}'
    assert await _drain(again) == [{"type": "http.request", "body": b'{"a": 1}', "more_body": False}]


async def test_a_body_past_the_limit_is_given_back_as_read_and_the_rest_follows() -> None:
    messages = [{"type": "http.request", "body": b"x" * 8, "more_body": True},
                {"type": "http.request", "body": b"y" * 8, "more_body": False}]
    body, again = await read_whole(_receiver(messages), 5)
    assert body is None
    assert await _drain(again) == [{"type": "http.request", "body": b"x" * 8, "more_body": True},
                                   {"type": "http.request", "body": b"y" * 8, "more_body": False}]
    body, again = await read_whole(_receiver(messages[1:]), 5)  # one message, past the limit
    assert body is None and (await again())["body"] == b"y" * 8


async def test_a_disconnect_before_the_end_is_given_back_after_what_was_read() -> None:
    body, again = await read_whole(_receiver([{"type": "http.request", "body": b"ab", "more_body": True}]), 100)
    assert body is None
    assert await again() == {"type": "http.request", "body": b"ab", "more_body": True}
    assert await again() == {"type": "http.disconnect"}


@pytest.mark.parametrize("parts", [[b'{"a": 1}'], [b'{"a"', b": 1", b"}"], [b"", b'{"a": 1}']])
async def test_a_first_message_read_already_is_read_whole_the_same(parts: list[bytes]) -> None:
    """`read_request` reads the first message itself (a body in one message needs no coroutine of `read_whole`)."""
    messages = [{"type": "http.request", "body": part, "more_body": i + 1 < len(parts)} for i, part in enumerate(parts)]
    whole = body_in_one(messages[0], _receiver([]), 100)
    assert (whole is None) is (len(parts) > 1)
    body, again = await read_whole(_receiver(messages[1:]), 100, messages[0])
    assert body == b'{"a": 1}'
    assert await _drain(again) == [{"type": "http.request", "body": b'{"a": 1}', "more_body": False}]


async def test_a_body_in_one_message_goes_through_read_request() -> None:
    checks = TransportChecks(TransportSecurityMiddleware(security_settings("127.0.0.1")), exact_json=True)
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    headers = {b"host": b"127.0.0.1:8080", b"content-type": b"application/json", b"accept": b"application/json",
               b"content-length": str(len(body)).encode()}
    scope = {"type": "http", "method": "POST", "headers": list(headers.items())}
    for _ in range(2):  # the verdict asked of the SDK, then known
        message, again = await read_request(checks, headers, scope, _receiver([
            {"type": "http.request", "body": body, "more_body": False}]), 100, json.loads)
        assert message == {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        assert await again() == {"type": "http.request", "body": body, "more_body": False}


async def test_a_transport_verdict_is_the_sdks_asked_once_then_known() -> None:
    checks = TransportChecks(TransportSecurityMiddleware(security_settings("127.0.0.1")), exact_json=True)
    good = {b"host": b"127.0.0.1:8080", b"content-type": b"application/json", b"accept": b"application/json"}
    rebinding = {**good, b"host": b"evil.test"}
    for headers, verdict in ((good, True), (rebinding, False)):
        scope = {"type": "http", "method": "POST", "headers": list(headers.items())}
        assert checks.known(headers) is None
        assert await checks.ask(scope, headers) is verdict
        assert checks.known(headers) is verdict
