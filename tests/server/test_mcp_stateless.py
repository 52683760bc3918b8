"""`stateless`: the SDK's `Mcp-Param-*` rule holds for a tool whose schema declares such headers (the gateway's
compiled tools never do: the compiler drops `x-` keys), answered by the door as the SDK's transport answers; the
kernel kept per caller and envelope answers as the SDK's own (the official `mcp` client and the SDK's transport are
the judges)."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware
from server_support import FORECAST

from gateway.server.mcp.endpoint import security_settings
from gateway.server.mcp.stateless import StatelessRequests

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
SCHEMA = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"},
                                           "size": {"type": "integer"}}}
FORECAST_ARGS = {"latitude": 52.52, "longitude": 13.41}
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


def _made_connections(monkeypatch: pytest.MonkeyPatch) -> list[Connection]:
    """Every connection the SDK's public factory makes from an envelope, in order."""
    made: list[Connection] = []
    factory = Connection.from_envelope

    def counted(*args: Any, **kwargs: Any) -> Connection:
        made.append(factory(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(Connection, "from_envelope", counted)
    return made


async def _who(ctx: Any, params: Any) -> Any:
    """A tool that answers what the kernel tells it of the caller's envelope."""
    session = ctx.session
    info = session.client_params.client_info.model_dump(mode="json", exclude_none=True) \
        if session.client_params else None
    capabilities = session.client_capabilities.model_dump(mode="json", exclude_none=True) \
        if session.client_capabilities else None
    return {"content": [{"type": "text", "text": json.dumps([info, capabilities, ctx.meta is not None])}],
            "isError": False, "resultType": "complete"}


def _envelope(name: str = "t", **capabilities: Any) -> dict[str, Any]:
    return {**ENVELOPE, "io.modelcontextprotocol/clientInfo": {"name": name, "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": capabilities}


async def _door_and_sdk(door: StatelessRequests, manager: StreamableHTTPSessionManager, made: list[Connection],
                        method: str, params: dict[str, Any], identity: Any = None) -> tuple[int, bytes, bytes]:
    """One request answered by the door (which must answer it) and by the SDK's own transport, with the same HTTP
    status: the connections the door made for it, and both bodies."""
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).encode()
    name = [(b"mcp-name", params["name"].encode())] if "name" in params else []

    def routed(scope: Any) -> None:
        scope["headers"] = [(key, method.encode()) if key == b"mcp-method" else (key, value)
                            for key, value in scope["headers"]]

    async def by_door(scope: Any, receive: Any, send: Any, folded: Any) -> bool:
        routed(scope)
        return await door.answer(dict(reversed(scope["headers"])), scope, receive, send, identity) is None

    async def by_sdk(scope: Any, receive: Any, send: Any, folded: Any) -> bool:
        routed(scope)
        await manager.handle_request(scope, receive, send)
        return False

    before = len(made)
    status, door_body, answered = await _post(by_door, body, name)
    assert answered, door_body
    by_the_door = len(made) - before
    sdk_status, sdk_body, _ = await _post(by_sdk, body, name)
    assert sdk_status == status
    return by_the_door, door_body, sdk_body


def _no_headers(name: str) -> None:
    return None  # (no tool declares `Mcp-Param-*` headers)


async def test_a_callers_kernel_is_kept_for_its_envelope_and_answers_as_the_sdk(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The stateless door keeps the kernel (and the connection the SDK makes of an envelope) per caller and
    envelope for `tools/call`, `tools/list` and `ping`, as a session keeps its own: one connection for a caller's
    requests, a new one for another caller or another envelope, and every answer the bytes of the SDK's own."""
    server = Server("t", get_tool_input_schema=_no_headers, on_call_tool=_who, on_list_tools=_no_tools)
    settings = security_settings("127.0.0.1")
    door = StatelessRequests(server, TransportSecurityMiddleware(settings), 4096)
    manager = StreamableHTTPSessionManager(app=server, json_response=True, security_settings=settings)
    alice, bob = ("alice", None, "weather"), ("bob", None, "weather")
    made = _made_connections(monkeypatch)
    async with manager.run():
        kept = [("tools/call", {"name": "who", "arguments": {}, "_meta": _envelope()}),
                ("tools/call", {"name": "who", "arguments": {"a": 1}, "_meta": _envelope()}),
                ("tools/list", {"_meta": _envelope()}),
                ("ping", {"_meta": _envelope()}),
                ("tools/call", {"name": "who", "_meta": {**_envelope(), "progressToken": 3}})]
        counts = []
        for method, params in kept:
            count, door_body, sdk_body = await _door_and_sdk(door, manager, made, method, params, alice)
            assert door_body == sdk_body
            counts.append(count)
        assert counts == [1, 0, 0, 0, 0]  # one connection for all of them (the SDK: one per request)
        said: list[str] = []
        for identity, params in [
                (bob, {"name": "who", "_meta": _envelope()}),  # another caller
                (alice, {"name": "who", "_meta": _envelope("other")}),  # another client
                (alice, {"name": "who", "_meta": _envelope(roots={})}),  # other capabilities
                (alice, {"name": "who", "_meta": {**_envelope(), "io.modelcontextprotocol/clientInfo": 5}})]:
            count, door_body, sdk_body = await _door_and_sdk(door, manager, made, "tools/call", params, identity)
            assert (count, door_body) == (1, sdk_body)
            said.append(json.loads(door_body).get("result", {}).get("content", [{"text": "null"}])[0]["text"])
        assert [json.loads(text) for text in said[:3]] == [
            [{"name": "t", "version": "1"}, {}, True], [{"name": "other", "version": "1"}, {}, True],
            [{"name": "t", "version": "1"}, {"roots": {}}, True]]  # what each request's own envelope says
        count, door_body, sdk_body = await _door_and_sdk(door, manager, made, "tools/call",
                                                         {"name": "who", "_meta": _envelope()}, alice)
        assert (count, door_body) == (0, sdk_body)  # alice's first kernel still kept
    assert all(connection.state == {} for connection in made)


async def _no_tools(ctx: Any, params: Any) -> Any:
    return types.ListToolsResult(tools=[])


async def test_a_written_connection_is_unwound_and_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection written after all (its `state`, or a callback pushed on its teardown) is unwound as the SDK's
    `serve_one` unwinds it, and the caller's next request gets a new one."""
    made = _made_connections(monkeypatch)
    unwound: list[str] = []

    async def writes(ctx: Any, params: Any) -> Any:
        if params.name == "state":
            made[-1].state["seen"] = True
        elif params.name == "teardown":
            made[-1].exit_stack.callback(unwound.append, "unwound")
        return {"content": [], "isError": False, "resultType": "complete"}

    server = Server("t", get_tool_input_schema=_no_headers, on_call_tool=writes)
    door = StatelessRequests(server, TransportSecurityMiddleware(security_settings("127.0.0.1")), 4096)

    async def call(name: str) -> None:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": name, "_meta": ENVELOPE}}).encode()

        async def by_door(scope: Any, receive: Any, send: Any, folded: Any) -> bool:
            return await door.answer(folded, scope, receive, send, ("a", None, "weather")) is None

        status, _, answered = await _post(by_door, body, [(b"mcp-name", name.encode())])
        assert answered and status == 200

    await call("plain")
    await call("plain")
    assert len(made) == 1
    await call("state")  # written: not kept
    await call("plain")
    assert len(made) == 2 and made[1].state == {}
    await call("teardown")
    assert unwound == ["unwound"]  # unwound at the end of its request
    await call("plain")
    assert len(made) == 3 and unwound == ["unwound"]


async def test_the_official_clients_stateless_calls_share_one_kernel(gw: tuple[str, Any],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The official client's default mode (stateless 2026-07-28, its envelope on every request): after its first
    `tools/call`, its calls and its listing make no connection of their own, and it reads what it read before."""
    url, _ = gw
    made = _made_connections(monkeypatch)
    async with Client(f"{url}/mcp/weather") as client:
        assert client.protocol_version == MODERN
        first = await client.call_tool("getForecast", FORECAST_ARGS)
        before = len(made)
        again = await client.call_tool("getForecast", FORECAST_ARGS)
        failed = await client.call_tool("getForecast", {"latitude": "north"})
        listed = await client.list_tools()
        assert len(made) == before
    assert first.structured_content == again.structured_content == FORECAST and again.is_error is False
    assert json.loads(again.content[0].text) == FORECAST  # type: ignore[union-attr]
    assert failed.is_error is True and "invalid_arguments" in failed.content[0].text  # type: ignore[union-attr]
    assert "getForecast" in {tool.name for tool in listed.tools}
