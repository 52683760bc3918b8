"""Retry and redirect policy of gateway.http.client (connect failures simulated with a transport)."""

from __future__ import annotations

import email.utils
import time

import httpx
import pytest
from executor_helpers import executor_for, make_tool

from gateway.catalog import BodyBinding
from gateway.http.client import _retry_after

pytestmark = pytest.mark.anyio


class _Refusing(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self.attempts: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.attempts.append(request.method)
        raise httpx.ConnectError("connection refused", request=request)


async def _run(transport: httpx.AsyncBaseTransport, tool, arguments):  # type: ignore[no-untyped-def]
    executor = executor_for("http://127.0.0.1:9", tool, transport=transport)
    try:
        return await executor.execute(tool, arguments, timeout=10)
    finally:
        await executor.aclose()


async def test_connect_errors_are_retried_for_get_only() -> None:
    get_transport, post_transport = _Refusing(), _Refusing()
    get_result = await _run(get_transport, make_tool(), {})
    post_tool = make_tool(method="POST", body=BodyBinding(media_type="application/json", argument="body"),
                          body_schema={"type": "object"})
    post_result = await _run(post_transport, post_tool, {"body": {}})
    assert get_result.error_type == post_result.error_type == "transport_error"
    assert get_transport.attempts == ["GET", "GET", "GET"]
    assert post_transport.attempts == ["POST"]


async def test_303_turns_into_get_and_redirect_loops_stop() -> None:
    seen: list[tuple[str, str, bytes]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path, request.content))
        if request.url.path == "/items":
            return httpx.Response(303, headers={"Location": "/done"})
        if request.url.path == "/loop":
            return httpx.Response(307, headers={"Location": "/loop"})
        return httpx.Response(200, json={"ok": True})

    tool = make_tool(method="POST", body=BodyBinding(media_type="application/json", argument="body"),
                     body_schema={"type": "object"})
    result = await _run(httpx.MockTransport(handler), tool, {"body": {"a": 1}})
    assert result.ok and seen == [("POST", "/items", b'{"a":1}'), ("GET", "/done", b"")]
    looping = await _run(httpx.MockTransport(handler), make_tool(path="/loop"), {})
    assert looping.error_type == "transport_error" and "too many redirects" in (looping.error or "")


def test_retry_after_seconds_and_http_date() -> None:
    assert _retry_after(httpx.Response(503, headers={"Retry-After": "7"})) == 7.0
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (_retry_after(httpx.Response(503, headers={"Retry-After": when})) or 0) <= 30
    assert _retry_after(httpx.Response(503, headers={"Retry-After": "soon"})) is None


@pytest.mark.parametrize("location", ["//evil.example/steal", "https://127.0.0.1:9/x", "http://127.0.0.1:10/x"])
async def test_redirects_to_any_other_origin_are_refused(location: str) -> None:
    hosts: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        hosts.append(f"{request.url.scheme}://{request.url.host}:{request.url.port}")
        return httpx.Response(302, headers={"Location": location})

    result = await _run(httpx.MockTransport(handler), make_tool(), {})
    assert result.error_type == "transport_error" and "another host" in (result.error or "")
    assert hosts == ["http://127.0.0.1:9"]
