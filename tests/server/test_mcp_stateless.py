"""`stateless`: the SDK's `Mcp-Param-*` rule holds for a tool whose schema declares such headers (the gateway's
compiled tools never do: the compiler drops `x-` keys), answered by the door as the SDK's transport answers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware

from gateway.server.mcp.endpoint import security_settings
from gateway.server.mcp.stateless import StatelessRequests

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
SCHEMA = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"},
                                           "size": {"type": "integer"}}}
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {}}


async def _call_tool(ctx: Any, params: Any) -> Any:
    return {"content": [{"type": "text", "text": f"{params.name} {params.arguments}"}], "isError": False,
            "resultType": "complete"}


def _server() -> Server[Any]:
    return Server("t", get_tool_input_schema=lambda name: SCHEMA if name == "sized" else None,
                  on_call_tool=_call_tool)


async def _post(app: Any, body: bytes, headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes, bool]:
    """(status, body, whether the door answered it) of one POST to `app(scope, receive, send, headers)`."""
    sent: list[dict[str, Any]] = []
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return pending.pop() if pending else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    raw = [(b"host", b"127.0.0.1:8080"), (b"content-type", b"application/json"),
           (b"content-length", str(len(body)).encode()), (b"accept", b"application/json, text/event-stream"),
           (b"mcp-protocol-version", MODERN.encode()), (b"mcp-method", b"tools/call"), *headers]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "root_path": "", "headers": raw,
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8080)}
    by_door = await app(scope, receive, send, dict(reversed(raw)))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:]), by_door


@pytest.mark.parametrize(("arguments", "headers", "agree"), [
    ({"region": "eu", "size": 3}, [(b"mcp-param-region", b"eu")], True),
    ({"region": "eu"}, [], False),  # the header is missing
    ({"region": "eu"}, [(b"mcp-param-region", b"us")], False),  # it disagrees
    ({"size": 3}, [(b"mcp-param-region", b"eu")], False),  # a header without its argument
    ({}, [(b"mcp-param-region", b"eu")], False),
    ({"region": "=?base64?ZXU=?="}, [(b"mcp-param-region", b"=?base64?PT9iYXNlNjQ/WlhVPT89?=")], True),
])
@pytest.mark.parametrize("tool", ["sized", "plain"])
async def test_param_headers_are_judged_as_the_sdk_judges_them(tool: str, arguments: dict[str, Any],
                                                               headers: list[tuple[bytes, bytes]],
                                                               agree: bool) -> None:
    server = _server()
    settings = security_settings("127.0.0.1")
    door = StatelessRequests(server, TransportSecurityMiddleware(settings), 4096)
    manager = StreamableHTTPSessionManager(app=server, json_response=True, security_settings=settings)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": tool, "arguments": arguments, "_meta": ENVELOPE}}).encode()
    headers = [(b"mcp-name", tool.encode()), *headers]

    async def by_door(scope: Any, receive: Any, send: Any, folded: Any) -> bool:
        rest = await door.answer(folded, scope, receive, send)
        if rest is not None:
            await manager.handle_request(scope, rest, send)
        return rest is None

    async def by_sdk(scope: Any, receive: Any, send: Any, folded: Any) -> bool:
        await manager.handle_request(scope, receive, send)
        return False

    async with manager.run():
        door_status, door_body, answered = await _post(by_door, body, headers)
        sdk_status, sdk_body, _ = await _post(by_sdk, body, headers)
    assert (door_status, json.loads(door_body)) == (sdk_status, json.loads(sdk_body))
    refused = tool == "sized" and not agree  # a tool without the declaration: nothing to disagree with
    assert answered is not refused  # a refusal is the SDK's own answer
    assert ("error" in json.loads(door_body)) is refused


def test_routing_headers_are_read_as_written_and_long_ones_never_kept() -> None:
    door = StatelessRequests(_server(), TransportSecurityMiddleware(security_settings("127.0.0.1")), 4096)
    headers = {b"mcp-protocol-version": b"2026-07-28", b"mcp-method": b"tools/call", b"mcp-name": b"caf\xe9"}
    expected = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "caf\xe9"}
    assert door._routing_headers(headers) == expected
    assert door._routing_headers(headers) == expected  # (kept)
    door._routing_headers(headers)["mcp-name"] = "changed"  # what the ladder is given is its own
    assert door._routing_headers(headers) == expected
    assert door._routing_headers({b"mcp-method": b"tools/list"}) == {"mcp-method": "tools/list"}
    long = {**headers, b"mcp-name": b"n" * 1000}
    assert door._routing_headers(long)["mcp-name"] == "n" * 1000
    assert all(len(key[2] or b"") <= 512 for key in door._routing)
