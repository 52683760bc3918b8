"""The SDK's low-level MCP `Server` whose tools are those of one gateway agent per request.

One `Server` serves every agent: its handlers ask `agent_of(ctx)` which agent the message is for (over HTTP
the endpoint puts the routed agent in the request's scope; over stdio it is fixed), so agents added by a hot
reload are served at once. The SDK's default server middleware (its OpenTelemetry spans, no-ops until a tracer
provider is installed) stays in place: a traced and an untraced gateway run the same code.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from ... import __version__
from ..state import GatewayState
from .calls import answer_call, checked_agent
from .listing import era_of, listing_page
from .routing import AGENT_SCOPE_KEY

Context = ServerRequestContext[Any, Any]
AgentOf = Callable[[Context], str]
ClientOf = Callable[[Context], "str | None"]

current_agent: contextvars.ContextVar[str | None] = contextvars.ContextVar("gateway_mcp_agent", default=None)
"""The agent of the HTTP request being handled in this task (the SDK looks up input schemas before it runs any
handler, with no context to read the agent from)."""


def agent_from_request(ctx: Context) -> str:
    """The agent the endpoint routed the HTTP request that carried this message to."""
    request = ctx.request
    scope = getattr(request, "scope", None)
    agent = scope.get(AGENT_SCOPE_KEY) if isinstance(scope, Mapping) else None
    if not isinstance(agent, str):
        raise MCPError(types.INVALID_PARAMS, "No agent: this server is reached at /mcp/{agent}.")
    return agent


def client_from_request(ctx: Context) -> str | None:
    """The client key's name the auth layer put in the HTTP request's scope (None without `clients`)."""
    scope = getattr(ctx.request, "scope", None)
    client = scope.get("gateway.client") if isinstance(scope, Mapping) else None
    return client if isinstance(client, str) else None


def build_mcp_server(state: GatewayState, agent_of: AgentOf = agent_from_request,
                     client_of: ClientOf = client_from_request) -> Server[Any]:
    """The low-level server: `tools/list` and `tools/call` of the agent `agent_of(ctx)` names."""

    async def list_tools(ctx: Context, params: types.PaginatedRequestParams | None) -> Any:
        generation = state.current
        agent = checked_agent(generation, agent_of(ctx))
        return listing_page(generation, agent, era_of(ctx.protocol_version), params.cursor if params else None)

    async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> Any:
        agent = agent_of(ctx)
        result = await answer_call(state, agent, params.name, dict(params.arguments or {}), ctx.protocol_version,
                                   client_of(ctx))
        if result is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool {params.name!r} for agent {agent!r}.")
        return result

    def tool_input_schema(name: str) -> Mapping[str, Any] | None:
        # The SDK checks `Mcp-Param-*` headers (2026-07-28) against this; without it, it runs a whole tools/list.
        agent = current_agent.get()
        toolset = state.current.runtime.toolsets.get(agent) if agent is not None else None
        agent_tool = toolset.get(name) if toolset is not None else None
        return agent_tool.input_schema if agent_tool is not None else None

    return Server(
        "gateway",
        version=__version__,
        instructions="Tools of one gateway agent, compiled from OpenAPI specs.",
        get_tool_input_schema=tool_input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
