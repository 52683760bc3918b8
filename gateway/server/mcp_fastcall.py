"""`tools/call` on an established MCP session, answered where the HTTP request arrives.

On the SDK's path one `tools/call` is parsed and validated as a pydantic model, crosses two memory streams and two
tasks (the HTTP request's and the session's, which starts one more per request), runs the server middleware and is
validated and dumped again on its way back: 339 µs of server CPU per call measured in process, against 75 µs for
the same call on the plain HTTP door, and a third of the MCP door's latency.

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

What a call answered here does not see: a `notifications/cancelled` naming its id (closing the HTTP request
still cancels it), and the SDK's server middleware, which is empty unless OpenTelemetry tracing is installed;
`fast_calls` is not installed at all then, so traced calls keep their spans.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from mcp.server.streamable_http import StreamableHTTPServerTransport, check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

FastCall = Callable[[str, str, dict[str, Any], str, Request], Awaitable[dict[str, Any] | None]]
"""(agent, tool name, arguments, protocol version, request) -> the `CallToolResult` in wire form, or None when the
SDK should answer instead (an unknown tool: its error is the SDK's to word). Must not raise for a failed call."""

_VERSION_HEADER = "mcp-protocol-version"
_SESSION_HEADER = "mcp-session-id"
_CALL_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_PARAM_KEYS = frozenset({"name", "arguments"})


class FastCallSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, its sessions answering plain `tools/call` requests through `fast_call`."""

    def __init__(self, *args: Any, fast_call: FastCall | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fast_call = fast_call
        self.fast_calls = 0
        """Calls answered here so far (tests read it to see this path is taken, should the SDK's change)."""

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

    async def handle_post(scope: Scope, request: Request, receive: Receive, send: Send) -> None:
        call = await _plain_tools_call(transport, request)
        if call is None or manager.fast_call is None:
            await sdk_post(scope, request, receive, send)
            return
        request_id, name, arguments, version = call
        agent = str(scope.get("path_params", {}).get("agent", ""))
        result = await manager.fast_call(agent, name, arguments, version, request)
        if result is None:
            await sdk_post(scope, request, receive, send)  # the body is cached on `request`: the SDK reads it again
            return
        manager.fast_calls += 1
        await _respond(transport, request_id, result)(scope, receive, send)

    transport._handle_post_request = handle_post  # type: ignore[method-assign]


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
    try:
        message = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        return None
    if not isinstance(message, dict) or message.keys() - _CALL_KEYS or message.get("jsonrpc") != "2.0":
        return None
    request_id, params = message.get("id"), message.get("params")
    if message.get("method") != "tools/call" or type(request_id) not in (str, int):  # bool is not an id
        return None
    if not isinstance(params, dict) or params.keys() - _PARAM_KEYS:
        return None
    name, arguments = params.get("name"), params.get("arguments")
    if not isinstance(name, str) or not isinstance(arguments, dict | None):
        return None
    return request_id, name, dict(arguments or {}), version  # type: ignore[return-value]


def legacy_result(result: dict[str, Any]) -> dict[str, Any]:
    """A `CallToolResult` built by `gateway.server.mcp` as the SDK's `serialize_server_result` shapes it for a
    2024/2025 session: without the 2026 `resultType`. (Running the SDK's pydantic check and dump on every answer
    was a twentieth of an MCP call's CPU under load; tests hold the two equal.)"""
    return {key: value for key, value in result.items() if key != "resultType" and value is not None}


def _respond(transport: StreamableHTTPServerTransport, request_id: str | int, result: dict[str, Any]) -> Response:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "result": legacy_result(result)}
    try:
        body = orjson.dumps(message)
    except TypeError:  # what orjson refuses (integers past 64 bits): json.dumps takes it
        body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
    headers = {"Content-Type": "application/json"}
    if transport.mcp_session_id:
        headers[_SESSION_HEADER] = transport.mcp_session_id
    return Response(body, headers=headers)
