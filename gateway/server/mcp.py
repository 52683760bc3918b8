"""Each agent's tools as an MCP server, on the official `mcp` SDK's low-level `Server`.

One `Server` and one `StreamableHTTPSessionManager` serve every agent at `/mcp/{agent}`: the handlers
read the agent from the HTTP request that carried the message (the path), so agents added by a hot
reload are served at once, and a session opened at one agent's URL is refused at another's. The same
handlers serve one fixed agent over stdio (`gateway mcp AGENT`).

`tools/list` answers the agent's tools with their exact input and output schemas, rendered once per
runtime generation and protocol era (the 2025 protocol wants an object at the root of `outputSchema`
and of `structuredContent`, so a non-object output is wrapped as `{"result": ...}` there; 2026-07-28
takes any schema). `tools/call` goes through the same path as the direct HTTP call (approval hook,
fixed arguments, executor) and answers `structuredContent` for JSON bodies, `isError` for failures.
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.lowlevel.server import Server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.types import Message, Receive, Scope, Send

from .. import __version__
from ..dialects import mcp_structured_content, mcp_tool
from ..jsonwire import dumps_text
from ..messages import ToolResult
from ..observe import tracing
from ..toolsets import AgentTool
from .direct_call import run_direct_call
from .errors import APIError
from .mcp_fastcall import FastCallSessionManager, scope_header
from .state import GatewayState, Generation

logger = logging.getLogger("gateway.mcp")

_SESSION_HEADER = b"mcp-session-id"
PAGE_BYTES = 256 * 1024
_current_agent: contextvars.ContextVar[str | None] = contextvars.ContextVar("gateway_mcp_agent", default=None)

AgentOf = Callable[[Any], str]


def build_mcp_server(state: GatewayState, agent_of: AgentOf) -> Server[Any]:
    """The low-level MCP server whose tools are those of the agent `agent_of(ctx)` names."""

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> dict[str, Any]:
        generation = state.current
        agent = _checked_agent(generation, agent_of(ctx))
        era = "modern" if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS else "legacy"
        # Built once per runtime generation, agent and era: a new session's first listing costs no rendering.
        pages = generation.memo(("mcp-tools", agent, era), lambda: _pages(generation, agent, era))
        return pages[_page_index(params.cursor if params is not None else None, len(pages))]  # type: ignore

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> dict[str, Any]:
        agent = agent_of(ctx)
        result = await answer_call(state, agent, params.name, dict(params.arguments or {}), ctx.protocol_version,
                                   _client_of(ctx))
        if result is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool {params.name!r} for agent {agent!r}.")
        return result

    def tool_input_schema(name: str) -> dict[str, Any] | None:
        # Called by the SDK (2026-07-28 HTTP path) to check `Mcp-Param-*` headers; a direct lookup
        # instead of the SDK's fallback of running a whole tools/list per call.
        agent = _current_agent.get()
        if agent is None:
            return None
        toolset = state.current.runtime.toolsets.get(agent)
        agent_tool = toolset.get(name) if toolset is not None else None
        return agent_tool.input_schema if agent_tool is not None else None

    server: Server[Any] = Server(
        "gateway",
        version=__version__,
        instructions="Tools of one gateway agent, compiled from OpenAPI specs.",
        get_tool_input_schema=tool_input_schema,
        on_list_tools=list_tools,  # type: ignore[arg-type]
        on_call_tool=call_tool,  # type: ignore[arg-type]
    )
    if not _tracing_configured():
        # The SDK's OpenTelemetry middleware opens a (non-recording) span per message even with no tracer provider
        # installed: a twentieth of a tools/call's CPU time for spans nobody receives. The SDK's way to opt out.
        server.middleware = [m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)]
    return server


async def answer_call(state: GatewayState, agent: str, name: str, arguments: dict[str, Any], protocol_version: str,
                      client: str | None) -> dict[str, Any] | None:
    """One `tools/call`, its `CallToolResult` in wire form; None for a tool the agent doesn't have. Both the SDK's
    handler and the fast path of `mcp_fastcall` answer through here."""
    async with state.use() as generation:
        agent = _checked_agent(generation, agent)
        agent_tool = generation.toolset(agent).get(name)
        if agent_tool is None:
            return None
        try:
            result = await run_direct_call(state, generation, agent, agent_tool, arguments, client=client,
                                           door="mcp")
        except APIError as error:  # e.g. 503: the audit row could not be written, so no result goes out
            raise MCPError(types.INTERNAL_ERROR, error.message) from None
        return _call_result(agent_tool, result, modern=protocol_version in MODERN_PROTOCOL_VERSIONS)


def _tracing_configured() -> bool:
    """An OpenTelemetry SDK tracer provider is installed (opentelemetry-instrument, OTEL_PYTHON_TRACER_PROVIDER)."""
    return tracing.enabled()


def _checked_agent(generation: Generation, agent: str) -> str:
    if agent not in generation.runtime.manifest.agents:
        raise MCPError(types.INVALID_PARAMS, f"Agent {agent!r} no longer exists.")
    return agent


def _client_of(ctx_or_request: Any) -> str | None:
    """The client key's name the auth layer put in the HTTP request's scope (from an SDK context or the request)."""
    request = getattr(ctx_or_request, "request", ctx_or_request)
    client = request.scope.get("gateway.client") if request is not None else None
    return client if isinstance(client, str) else None


def _pages(generation: Generation, agent: str, era: str) -> list[dict[str, Any]]:
    """The agent's tools in pages of at most about PAGE_BYTES of JSON (clients cap one SSE event at 1 MiB;
    a thousand-operation API is several times that), each pointing to the next with a cursor."""
    pages: list[list[types.Tool]] = [[]]
    size = 0
    for agent_tool in generation.toolset(agent):
        item = mcp_tool(agent_tool)
        if era == "modern" and agent_tool.output_schema is not None:
            item["outputSchema"] = agent_tool.output_schema  # 2026-07-28 takes any schema: the exact one
        item_size = len(json.dumps(item, separators=(",", ":")))
        if pages[-1] and size + item_size > PAGE_BYTES:
            pages.append([])
            size = 0
        pages[-1].append(types.Tool.model_validate(item))
        size += item_size
    # Kept in wire form: the SDK copies a dict result instead of dumping the whole model on every listing.
    return [types.ListToolsResult(tools=tools, next_cursor=str(index + 1) if index + 1 < len(pages) else None)
            .model_dump(by_alias=True, mode="json", exclude_none=True) for index, tools in enumerate(pages)]


def _page_index(cursor: str | None, count: int) -> int:
    if cursor is None:
        return 0
    if cursor.isdigit() and 0 < int(cursor) < count:
        return int(cursor)
    raise MCPError(types.INVALID_PARAMS, f"Invalid cursor {cursor[:40]!r}; list again without a cursor.")


def _call_result(agent_tool: AgentTool, result: ToolResult, *, modern: bool) -> dict[str, Any]:
    """The `CallToolResult` in wire form. A dict, not the pydantic model: the SDK copies a dict as it is, where a
    model was built, validated and dumped again on every call (the SDK's result check still runs on the dict).

    The verdict is the call pipeline's, as on every door (a body that breaks the output schema is already an
    `invalid_output` failure); only the shaping is MCP's: a declared output schema makes clients require
    `structuredContent`, which a truncated body cannot give, so that one is an error here."""
    if not result.ok:
        return _wire_result(_error_text(result), None, is_error=True)
    body = result.body
    is_json = not isinstance(body, str) and (result.media_type or "json").endswith("json")
    text = body if isinstance(body, str) else dumps_text(body)
    if result.truncated:
        text += "\n[truncated]"
    schema = agent_tool.output_schema
    if schema is None:
        structured = body if is_json and (modern or isinstance(body, dict)) else None
        return _wire_result(text, structured)
    if result.truncated:
        message = (f"The API answered {result.status} but the body was truncated at the size limit, so it cannot "
                   f"be checked against the spec's output schema. The body:\n{text}")
        return _wire_result(message, None, is_error=True)
    # A declared output schema makes clients validate structuredContent (the pipeline checked it holds).
    return _wire_result(text, body if modern else mcp_structured_content(schema, body))


def _wire_result(text: str, structured: Any, *, is_error: bool = False) -> dict[str, Any]:
    wire: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if structured is not None:
        wire["structuredContent"] = structured
    wire["isError"] = is_error
    wire["resultType"] = "complete"  # required by 2026-07-28; the SDK drops it from a 2025 answer
    return wire


def _error_text(result: ToolResult) -> str:
    parts = [f"Error ({result.error_type or 'error'}): {result.error or 'the call failed'}"]
    if result.status is not None:
        parts.append(f"HTTP status: {result.status}")
    if result.body not in (None, ""):
        body = result.body if isinstance(result.body, str) else dumps_text(result.body)
        parts.append(f"Body: {body}")
    if result.approval_id:
        parts.append(f"Approval id: {result.approval_id}")
    return "\n".join(parts)


def _agent_from_request(ctx: Any) -> str:
    request = getattr(ctx, "request", None)
    if request is None:
        raise MCPError(types.INVALID_PARAMS, "No agent: this server is reached at /mcp/{agent}.")
    return str(request.path_params.get("agent") or request.scope.get("path_params", {}).get("agent", ""))


_MAX_REMEMBERED_SESSIONS = 10_000


class MCPEndpoint:
    """The ASGI app at `/mcp/{agent}`: checks the agent, binds sessions to it, hands over to the SDK."""

    def __init__(self, state: GatewayState, *, host: str | None = "127.0.0.1",
                 max_body_bytes: int = 4 * 1024 * 1024, json_response: bool = False) -> None:
        self.state = state
        self.server = build_mcp_server(state, _agent_from_request)
        self.manager = FastCallSessionManager(
            app=self.server,
            json_response=json_response,
            security_settings=_security_settings(host),
            max_request_body_size=max_body_bytes,
            # Traced servers keep the SDK's path for every call: its middleware makes the spans.
            fast_call=None if _tracing_configured() else self._fast_call,
        )
        self._session_agents: dict[str, str] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        agent = scope.get("path_params", {}).get("agent", "")
        if agent not in self.state.current.runtime.manifest.agents:
            known = ", ".join(sorted(self.state.current.runtime.manifest.agents)) or "none"
            await APIError(404, f"Unknown agent {agent!r}; the agents are: {known}.",
                           code="unknown_agent").response()(scope, receive, send)
            return
        session = scope_header(scope, _SESSION_HEADER)
        if session is not None and self._session_agents.get(session, agent) != agent:
            await APIError(404, f"Session {session[:16]}... belongs to another agent's endpoint.",
                           code="session_not_found").response()(scope, receive, send)
            return

        async def remember_session(message: Message) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", []):
                    if name.lower() == _SESSION_HEADER:
                        self._forget_dead_sessions()
                        self._session_agents[value.decode("latin-1")] = agent
            await send(message)

        token = _current_agent.set(agent)
        try:
            # Only a request without a session (initialize) can be answered with a new session's id.
            await self.manager.handle_request(scope, receive, send if session is not None else remember_session)
        finally:
            _current_agent.reset(token)
            if scope.get("method") == "DELETE" and session is not None:
                self._session_agents.pop(session, None)

    async def _fast_call(self, agent: str, name: str, arguments: dict[str, Any], protocol_version: str,
                         request: Any) -> dict[str, Any] | None:
        if agent not in self.state.current.runtime.manifest.agents:
            return None  # removed by a reload since the request arrived: the SDK's handler words the error
        return await answer_call(self.state, agent, name, arguments, protocol_version, _client_of(request))

    def _forget_dead_sessions(self) -> None:
        # The SDK has no public list of its open sessions; its registry is read when it is there. Should a later
        # SDK rename it, the map is only kept from growing without bound: a forgotten session's next request
        # is then checked by the SDK alone (any agent's endpoint), never refused wrongly.
        live = getattr(self.manager, "_server_instances", None)
        if isinstance(live, dict):
            for session in [s for s in self._session_agents if s not in live]:
                del self._session_agents[session]
        while len(self._session_agents) >= _MAX_REMEMBERED_SESSIONS:
            del self._session_agents[next(iter(self._session_agents))]  # the oldest first


def _security_settings(host: str | None) -> TransportSecuritySettings | None:
    """DNS-rebinding protection when bound to loopback: a web page must not reach a local gateway."""
    if host not in ("127.0.0.1", "localhost", "::1"):
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )


async def serve_stdio(state: GatewayState, agent: str) -> None:
    """One agent's tools over stdio, until the client closes stdin."""
    from mcp.server.stdio import stdio_server

    _checked_agent(state.current, agent)
    server = build_mcp_server(state, lambda ctx: agent)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
