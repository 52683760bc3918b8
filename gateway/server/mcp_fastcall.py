"""MCP `tools/call` over Streamable HTTP, answered where the HTTP request arrives, after the SDK's own checks.

On the SDK's path one `tools/call` of a 2025 session is parsed and validated as a pydantic model, crosses two
memory streams and two tasks (the HTTP request's and the session's, which starts one more per request), runs the
server middleware and is validated and dumped again on its way back: 339 µs of server CPU per call measured in
process, against 75 µs for the same call on the plain HTTP door, and a third of the MCP door's latency.

Everything up to the last step stays the SDK's. The session manager still routes by protocol era, finds the
session by its id and checks the credential that opened it, and caps the body; the session's transport still
checks `Host` and `Origin` (DNS rebinding), refuses a terminated session and counts the request against the
session's idle timeout. Only then, in place of the transport's POST handler, a request that is exactly a
`tools/call` of a tool the agent has (JSON-RPC 2.0, an integer or string id, `params` holding just `name` and
`arguments`, a 2024/2025 protocol version header naming the handshake era, this session's id, `Accept` and
`Content-Type` as the SDK requires them) is run here, and its result is shaped as the SDK's
`serialize_server_result` shapes it for those versions (tests hold the two equal). Anything else (initialize,
notifications, `tools/list`, a call carrying `_meta` such as a progress token, an unknown tool, a malformed
message) is left to the SDK's handler unchanged, errors included.

The stateless 2026-07-28 protocol has no session: every request carries its envelope (`params._meta`) and
routing headers, and the SDK's `handle_modern_request` checks them per request before running a fresh
dispatcher for it (312 µs in process against 137 µs for a 2025 call answered here). For a `tools/call`,
`_answer_modern_call` makes the same checks with the SDK's own functions (transport security, Accept, the
duplicated-header and envelope ladders of `mcp.shared.inbound`, the per-version params check of
`mcp_types.methods`, the `Mcp-Param-*` header check against the tool's input schema) and answers only when every
one passes; the result gets what the SDK's pipeline adds to a 2026 answer (`resultType`, the `serverInfo` stamp).
Any failed check hands the request, body replayed, to the SDK, which answers it as it always does.

A `notifications/cancelled` naming a 2025 session's call running here cancels it and gets the SDK's answer
(-32800, "Request cancelled"). What a call answered here does not see is the SDK's server middleware, which is
empty unless OpenTelemetry tracing is installed; `fast_calls` is not installed at all then, so traced calls keep
their spans.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

import orjson
from mcp.server.streamable_http import StreamableHTTPServerTransport, check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.inbound import (
    MCP_PARAM_HEADER_PREFIX,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp_types.methods import validate_client_request
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from ..jsonwire import dumps

FastCall = Callable[[str, str, dict[str, Any], str, Request], Awaitable[dict[str, Any] | None]]
"""(agent, tool name, arguments, protocol version, request) -> the `CallToolResult` in wire form, or None when the
SDK should answer instead (an unknown tool: its error is the SDK's to word). Must not raise for a failed call."""

_VERSION_HEADER = "mcp-protocol-version"
_SESSION_HEADER = "mcp-session-id"
_CALL_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_PARAM_KEYS = frozenset({"name", "arguments"})
_MODERN_PARAM_KEYS = frozenset({"name", "arguments", "_meta"})
_MCP_PARAM_PREFIX = MCP_PARAM_HEADER_PREFIX.lower().encode("latin-1")
_REQUEST_CANCELLED = -32800


class FastCallSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, its sessions answering plain `tools/call` requests through `fast_call`."""

    def __init__(self, *args: Any, fast_call: FastCall | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fast_call = fast_call
        self.fast_calls = 0
        """Calls answered here so far (tests read it to see this path is taken, should the SDK's change)."""
        self.security = TransportSecurityMiddleware(self.security_settings)  # the SDK's Host/Origin check, built once

    async def _handle_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The SDK's entry behind its body cap (which has read the whole body already). A request of the stateless
        # era is tried here first; should a later SDK rename this method, nothing calls it: the SDK answers all.
        if (self.fast_call is None or not self.json_response or scope.get("method") != "POST"
                or scope_header(scope, b"mcp-protocol-version") not in MODERN_PROTOCOL_VERSIONS
                or scope_header(scope, b"mcp-method") != "tools/call"):  # the routing header the SDK holds to the body
            await super()._handle_request(scope, receive, send)
            return
        body, replay = await _buffered(receive)
        if not await _answer_modern_call(self, scope, body, receive, send):
            await super()._handle_request(scope, replay, send)

    def _admit_session(self, requestor: Any) -> StreamableHTTPServerTransport | None:
        # The one place the SDK creates a session's transport. Should a later SDK rename it, nothing calls this
        # and every request takes the SDK's path: slower, never wrong.
        transport = super()._admit_session(requestor)
        if transport is not None and self.fast_call is not None and self.json_response:
            _answer_tools_calls(self, transport)
        return transport


def _answer_tools_calls(manager: FastCallSessionManager, transport: StreamableHTTPServerTransport) -> None:
    sdk_post = getattr(transport, "_handle_post_request", None)
    if sdk_post is None:  # not the transport this module was written against: leave it alone
        return

    # The calls of this session running here, by request id: a `notifications/cancelled` naming one cancels it, as
    # the SDK cancels the handlers it runs (the notification itself still goes to the SDK, which answers 202).
    running: dict[str | int, asyncio.Task[Any]] = {}
    cancelled: set[asyncio.Task[Any]] = set()

    async def handle_post(scope: Scope, request: Request, receive: Receive, send: Send) -> None:
        call = await _plain_tools_call(transport, request)
        if call is None or manager.fast_call is None:
            if running:
                _cancel_named(await request.body(), running, cancelled)
            await sdk_post(scope, request, receive, send)
            return
        request_id, name, arguments, version = call
        agent = str(scope.get("path_params", {}).get("agent", ""))
        task = asyncio.current_task()
        assert task is not None
        running[request_id] = task
        try:
            result = await manager.fast_call(agent, name, arguments, version, request)
        except asyncio.CancelledError:
            if task not in cancelled:
                raise
            task.uncancel()  # the client's cancellation, answered as the SDK answers it; the request goes on
            await _respond_cancelled(transport, request_id)(scope, receive, send)
            return
        finally:
            running.pop(request_id, None)
            cancelled.discard(task)
        if result is None:
            await sdk_post(scope, request, receive, send)  # the body is cached on `request`: the SDK reads it again
            return
        manager.fast_calls += 1
        await _respond(transport, request_id, result)(scope, receive, send)

    transport._handle_post_request = handle_post  # type: ignore[method-assign]


def _cancel_named(body: bytes, running: dict[str | int, asyncio.Task[Any]], cancelled: set[asyncio.Task[Any]]) -> None:
    """Cancel the running call a `notifications/cancelled` body names, if it is one of `running`."""
    if b"notifications/cancelled" not in body:
        return
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return
    if not isinstance(message, dict) or message.get("method") != "notifications/cancelled" or "id" in message:
        return
    params = message.get("params")
    if not isinstance(params, dict):
        return
    request_id = params.get("requestId")
    task = running.get(request_id) if type(request_id) in (str, int) else None
    if task is not None and task not in cancelled:
        cancelled.add(task)
        task.cancel()


async def _plain_tools_call(transport: StreamableHTTPServerTransport,
                            request: Request) -> tuple[str | int, str, dict[str, Any], str] | None:
    """(id, tool name, arguments, protocol version) of a request this module answers, else None."""
    headers = request.headers
    version = headers.get(_VERSION_HEADER)
    if version not in HANDSHAKE_PROTOCOL_VERSIONS or headers.get(_SESSION_HEADER) != transport.mcp_session_id:
        return None
    if headers.get("content-type", "").split(";", 1)[0].strip().lower() != "application/json":
        return None
    if not check_accept_headers(request)[0]:
        return None
    call = _tools_call(await request.body(), _PARAM_KEYS)
    if call is None:
        return None
    return call.id, call.name, dict(call.arguments or {}), version  # type: ignore[return-value]


class _ToolsCall(NamedTuple):
    message: dict[str, Any]
    id: str | int
    params: dict[str, Any]
    name: str
    arguments: dict[str, Any] | None


def _tools_call(body: bytes, param_keys: frozenset[str]) -> _ToolsCall | None:
    """A body that is exactly one JSON-RPC `tools/call` request with nothing but `param_keys` in its params."""
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(message, dict) or message.keys() - _CALL_KEYS or message.get("jsonrpc") != "2.0":
        return None
    request_id, params = message.get("id"), message.get("params")
    if message.get("method") != "tools/call" or type(request_id) not in (str, int):  # bool is not an id
        return None
    if not isinstance(params, dict) or params.keys() - param_keys:
        return None
    name, arguments = params.get("name"), params.get("arguments")
    if not isinstance(name, str) or not isinstance(arguments, dict | None):
        return None
    return _ToolsCall(message, request_id, params, name, arguments)


async def _answer_modern_call(manager: FastCallSessionManager, scope: Scope, body: bytes, receive: Receive,
                              send: Send) -> bool:
    """Answer a stateless-era `tools/call` that passes every check the SDK makes; False (nothing sent) otherwise."""
    request = Request(scope)
    if await manager.security.validate_request(request, is_post=True):
        return False
    if not check_accept_headers(request)[0]:
        return False
    call = _tools_call(body, _MODERN_PARAM_KEYS)
    if call is None:
        return False
    message, request_id, params, name, arguments = call
    headers = request.headers
    if find_duplicated_routing_header(headers.items()) is not None:
        return False
    verdict = classify_inbound_request(message, headers=dict(headers))
    if isinstance(verdict, InboundLadderRejection):
        return False
    version = verdict.protocol_version
    try:
        validate_client_request("tools/call", version, params)
    except (ValidationError, KeyError, ValueError):
        return False
    if (arguments or any(key.startswith(_MCP_PARAM_PREFIX) for key, _ in scope["headers"])) and \
            _mcp_param_problem(manager, name, arguments or {}, request):
        return False
    agent = str(scope.get("path_params", {}).get("agent", ""))
    result = await manager.fast_call(agent, name, dict(arguments or {}), version, request)  # type: ignore[misc]
    if result is None:
        return False
    manager.fast_calls += 1
    answer = {"jsonrpc": "2.0", "id": request_id, "result": modern_result(result, manager.app.server_info_stamp)}
    await Response(dumps(answer), media_type="application/json")(scope, receive, send)
    return True


def _mcp_param_problem(manager: FastCallSessionManager, name: str, arguments: dict[str, Any],
                       request: Request) -> bool:
    """`Mcp-Param-*` headers that disagree with the arguments, checked as the SDK checks them (a tool whose schema
    can't be looked up is not checked, as there)."""
    lookup = getattr(manager.app, "get_tool_input_schema", None)
    if lookup is None:
        return True  # the SDK would list the tools to find the schema: let it
    try:
        schema = lookup(name)
    except Exception:  # noqa: BLE001 - the SDK logs and skips the check; its path does that
        return True
    return schema is not None and validate_mcp_param_headers(schema, arguments, request.headers) is not None


def modern_result(result: dict[str, Any], server_info: dict[str, Any]) -> dict[str, Any]:
    """A `CallToolResult` built by `gateway.server.mcp` as the SDK's pipeline answers it at 2026-07-28: with its
    `resultType` and the server's `serverInfo` stamp in `_meta` (tests hold the two equal)."""
    shaped = {key: value for key, value in result.items() if value is not None}
    shaped.setdefault("resultType", "complete")
    shaped["_meta"] = {**(shaped.get("_meta") or {}), "io.modelcontextprotocol/serverInfo": server_info}
    return shaped


def legacy_result(result: dict[str, Any]) -> dict[str, Any]:
    """A `CallToolResult` built by `gateway.server.mcp` as the SDK's `serialize_server_result` shapes it for a
    2024/2025 session: without the 2026 `resultType`. (Running the SDK's pydantic check and dump on every answer
    was a twentieth of an MCP call's CPU under load; tests hold the two equal.)"""
    return {key: value for key, value in result.items() if key != "resultType" and value is not None}


def _respond(transport: StreamableHTTPServerTransport, request_id: str | int, result: dict[str, Any]) -> Response:
    return _json_rpc(transport, {"jsonrpc": "2.0", "id": request_id, "result": legacy_result(result)})


def _respond_cancelled(transport: StreamableHTTPServerTransport, request_id: str | int) -> Response:
    # The SDK's answer to a request cancelled while its handler ran.
    return _json_rpc(transport, {"jsonrpc": "2.0", "id": request_id,
                                 "error": {"code": _REQUEST_CANCELLED, "message": "Request cancelled"}})


def _json_rpc(transport: StreamableHTTPServerTransport, message: dict[str, Any]) -> Response:
    body = dumps(message)
    headers = {"Content-Type": "application/json"}
    if transport.mcp_session_id:
        headers[_SESSION_HEADER] = transport.mcp_session_id
    return Response(body, headers=headers)


def scope_header(scope: Scope, name: bytes) -> str | None:
    """The first value of a request header, by its lower-case name (one pass over the ASGI scope's list)."""
    for key, value in scope.get("headers", []):
        if key == name:  # ASGI header names are lower-case
            return value.decode("latin-1")
    return None


async def _buffered(receive: Receive) -> tuple[bytes, Receive]:
    """The request's body, and a `receive` that gives the same messages again (then whatever comes next)."""
    received: list[Message] = []
    while True:
        message = await receive()
        received.append(message)
        if message["type"] != "http.request" or not message.get("more_body", False):
            break

    async def replay() -> Message:
        return received.pop(0) if received else await receive()

    return b"".join(m.get("body", b"") for m in received if m["type"] == "http.request"), replay
