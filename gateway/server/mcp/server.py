"""The SDK's low-level MCP `Server` whose tools are those of one gateway agent per request.

One `Server` serves every agent: its handlers ask `agent_of(ctx)` which agent the message is for (over HTTP
the endpoint puts the routed agent in the request's scope; over stdio it is fixed), so agents added by a hot
reload are served at once. The SDK's default server middleware (its OpenTelemetry spans, no-ops until a tracer
provider is installed) runs while a tracer provider is installed (`WhileTraced`): then a traced gateway runs the
SDK's own code; without one, nothing would record its spans.

In a session (`session_of(ctx)` names it: the `Mcp-Session-Id` of a 2025 request over HTTP, the one connection
over stdio) the tools `search_tools` finds join that session's `tools/list` (`found`), and the client hears
`notifications/tools/list_changed`; the handshake declares `tools.listChanged` for it. A stateless request
(2026-07-28) has no session: nothing is remembered or sent.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError

from ...assembly import GatewayState
from ...kernel import __version__, tracing
from ...kernel.caller import UserToken, bind_caller, current_caller
from ...offer.toolsearch import SEARCH_TOOL
from .answering import answer_call, checked_agent
from .found import FoundTools
from .listing import era_of, listing_page
from .routing import AGENT_SCOPE_KEY, SESSION_SCOPE_KEY

logger = logging.getLogger("gateway.mcp")

Context = ServerRequestContext[Any, Any]
AgentOf = Callable[[Context], str]
ClientOf = Callable[[Context], "str | None"]
SessionOf = Callable[[Context], "str | None"]

current_agent: contextvars.ContextVar[str | None] = contextvars.ContextVar("gateway_mcp_agent", default=None)
"""The agent of the HTTP request being handled in this task (the SDK looks up input schemas before it runs any
handler, with no context to read the agent from)."""


def agent_from_request(ctx: Context) -> str:
    """The agent the endpoint routed the HTTP request that carried this message to."""
    request = ctx.request
    scope = getattr(request, "scope", None)
    agent = scope.get(AGENT_SCOPE_KEY) if isinstance(scope, dict) else None  # an ASGI scope is a dict
    if not isinstance(agent, str):
        raise MCPError(types.INVALID_PARAMS, "No agent: this server is reached at /mcp/{agent}.")
    return agent


def client_from_request(ctx: Context) -> str | None:
    """The client key's name the auth layer put in the HTTP request's scope (None without `clients`)."""
    scope = getattr(ctx.request, "scope", None)
    client = scope.get("gateway.client") if isinstance(scope, dict) else None
    return client if isinstance(client, str) else None


def user_of_request(ctx: Context) -> tuple[str | None, UserToken | None]:
    """The signed-in user (subject, token) the auth layer put in the HTTP request's scope; (None, None) without."""
    scope = getattr(ctx.request, "scope", None)
    if not isinstance(scope, dict):
        return current_caller().subject, current_caller().token  # stdio: the process's caller
    subject, token = scope.get("gateway.subject"), scope.get("gateway.token")
    return (subject if isinstance(subject, str) else None), (token if isinstance(token, UserToken) else None)


def session_from_request(ctx: Context) -> str | None:
    """The session of a 2025 request over HTTP (the SDK has checked that the caller owns it); None when stateless."""
    if era_of(ctx.protocol_version) == "modern":
        return None
    scope = getattr(ctx.request, "scope", None)
    session = scope.get(SESSION_SCOPE_KEY) if isinstance(scope, dict) else None  # the endpoint's, from its header
    return session if isinstance(session, str) and session else None


class GatewayServer(Server[Any]):
    """The SDK's server, whose handshake says that the tool list may change (a session's searches add to it), and
    whose `serverInfo` stamp (on every 2026-07-28 answer) is a copy of one flat dict, not a deep copy each time."""

    @property
    def server_info_stamp(self) -> dict[str, Any]:
        flat = self._flat_stamp
        return dict(flat) if flat is not None else super().server_info_stamp

    @cached_property
    def _flat_stamp(self) -> dict[str, Any] | None:
        """The SDK's stamp when no value in it is a list or an object (a shallow copy is then a whole one); the
        identity it describes is fixed once the server is built, as the SDK's own once-per-server dump assumes."""
        stamp = super().server_info_stamp
        return stamp if all(not isinstance(value, dict | list) for value in stamp.values()) else None

    def create_initialization_options(self, notification_options: NotificationOptions | None = None,
                                      experimental_capabilities: dict[str, dict[str, Any]] | None = None,
                                      extensions: dict[str, dict[str, Any]] | None = None) -> InitializationOptions:
        return super().create_initialization_options(notification_options or NotificationOptions(tools_changed=True),
                                                     experimental_capabilities, extensions)


def build_mcp_server(state: GatewayState, agent_of: AgentOf = agent_from_request,
                     client_of: ClientOf = client_from_request, session_of: SessionOf = session_from_request,
                     found: FoundTools | None = None) -> Server[Any]:
    """The low-level server: `tools/list` and `tools/call` of the agent `agent_of(ctx)` names.

    Parameters: session_of: the session a message belongs to (None: stateless); found: where each session's
    found tools are kept (the endpoint drops a session's entry when the session ends)."""
    found = found if found is not None else FoundTools()

    async def list_tools(ctx: Context, params: types.PaginatedRequestParams | None) -> Any:
        generation = state.current
        agent = checked_agent(generation, agent_of(ctx))
        session = session_of(ctx)
        return listing_page(generation, agent, era_of(ctx.protocol_version), params.cursor if params else None,
                            found.listed(session) if session is not None else ())

    async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> Any:
        agent = agent_of(ctx)
        session = session_of(ctx)
        names = found.of(session) if session is not None and params.name == SEARCH_TOOL else None
        before = len(names) if names is not None else 0
        # The user of the request that carries this call: a 2025 session runs in a task of the request that opened
        # it, so its caller context is that request's (an older token; `AuthenticatedUser` keeps other users out).
        subject, token = user_of_request(ctx)
        with bind_caller(subject=subject, token=token):
            result = await answer_call(state, agent, params.name, dict(params.arguments or {}),
                                       ctx.protocol_version, client_of(ctx), names,
                                       url_elicitation=_takes_url_elicitation(ctx))
        if result is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool {params.name!r} for agent {agent!r}.")
        if names is not None and len(names) > before:
            await _announce_list_changed(ctx)
        return result

    def tool_input_schema(name: str) -> Mapping[str, Any] | None:
        # The SDK checks `Mcp-Param-*` headers (2026-07-28) against this; without it, it runs a whole tools/list.
        agent = current_agent.get()
        toolset = state.current.runtime.toolsets.get(agent) if agent is not None else None
        agent_tool = toolset.get(name) if toolset is not None else None
        return agent_tool.input_schema if agent_tool is not None else None

    server = GatewayServer(
        "gateway",
        version=__version__,
        instructions="Tools of one gateway agent, compiled from OpenAPI specs.",
        get_tool_input_schema=tool_input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    server.middleware = [WhileTraced(middleware) for middleware in server.middleware]  # the SDK's public list
    return server


class WhileTraced:
    """One of the SDK's default middleware (its OpenTelemetry span per message), run only while a tracer provider
    is installed: without one its span records nothing, and what it costs per message is all of its work."""

    def __init__(self, inner: ServerMiddleware[Any]) -> None:
        self.inner = inner

    async def __call__(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        if tracing.enabled():
            return await self.inner(ctx, call_next)
        return await call_next(ctx)


def _takes_url_elicitation(ctx: Context) -> bool:
    """Whether the client declared URL-mode elicitation (it can send its user to a link and retry)."""
    try:
        capabilities = ctx.session.client_capabilities
    except Exception:  # noqa: BLE001 - no session state (a context built without one)
        return False
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and elicitation.url is not None


async def _announce_list_changed(ctx: Context) -> None:
    """Tell the client its tool list grew. Sent on the session's own stream (its GET): a client with none open
    does not hear it (the SDK keeps no event store here), but its next `tools/list` shows the tools all the same."""
    try:
        await ctx.session.send_tool_list_changed()
    except Exception:  # noqa: BLE001 - the search answered; a lost notice must not turn it into an error
        logger.warning("could not send notifications/tools/list_changed", exc_info=True)
