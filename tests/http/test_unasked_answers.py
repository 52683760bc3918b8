"""An upstream that sends an answer nobody asked for, after the one it owed: with `reuse_connections: false` the
next request goes on a connection of its own and gets its own answer. HTTP/1.1 pairs answers with requests by
their order on a connection, so on a kept connection an unasked answer that arrives as the next request goes out
is read as that request's (one that arrives while the connection is idle the library notices and drops)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from executor_helpers import executor_for, make_tool
from raw_server import Answer, RawServer, raw_answer

pytestmark = pytest.mark.anyio


def _json(value: object) -> bytes:
    return raw_answer(json.dumps({"answer": value}).encode(), "Content-Type: application/json")


def _late_unasked_answers(serve: Callable[[Answer], RawServer]) -> RawServer:
    """Answers request n with its own answer; a connection's later request first gets, late, an answer to the
    request before it that nobody asked for."""
    server = serve(lambda head: None)

    def answer(head: bytes) -> bytes:
        n = len(server.requests)
        port = server.requests[-1][2]
        earlier = [i for i, (_, _, p) in enumerate(server.requests[:-1], 1) if p == port]
        unasked = _json(f"unasked, after {earlier[-1]}") if earlier else b""
        return unasked + _json(n)

    server.answer = answer
    return server


async def _two_calls(server: RawServer, **settings: object) -> list[object]:
    tool = make_tool()
    executor = executor_for(server.url, tool, **settings)
    try:
        return [(await executor.execute(tool, {})).body for _ in range(2)]
    finally:
        await executor.aclose()


async def test_without_reuse_the_second_request_gets_its_own_answer(serve: Callable[[Answer], RawServer]) -> None:
    server = _late_unasked_answers(serve)
    assert await _two_calls(server, reuse_connections=False) == [{"answer": 1}, {"answer": 2}]
    assert len({port for _, _, port in server.requests}) == 2  # a connection each


async def test_a_kept_connection_hands_the_unasked_answer_to_the_next_request(
        serve: Callable[[Answer], RawServer]) -> None:
    """Why the setting exists: with connections reused (the default), the next request reads the unasked answer."""
    server = _late_unasked_answers(serve)
    assert await _two_calls(server) == [{"answer": 1}, {"answer": "unasked, after 1"}]
