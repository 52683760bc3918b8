"""`exchange.read_whole`: the body read by the door, and given again whole to the SDK when it hands a request on."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.server.mcp.exchange import read_whole

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
