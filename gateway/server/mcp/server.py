"""The SDK's low-level MCP `Server` whose tools are those of one gateway agent per request.

One `Server` serves every agent: its handlers ask `facts_of(ctx)` which agent the message is for (over HTTP
the endpoint puts the routed agent in the request's scope; over stdio it is fixed), so agents added by a hot
reload are served at once. The SDK's default server middleware (its OpenTelemetry spans, no-ops until a tracer
provider is installed) runs while a tracer provider is installed (`WhileTraced`): then a traced gateway runs the
SDK's own code; without one, nothing would record its spans. Inside them, innermost, `plain.PlainCalls` answers a
session's plain `tools/call` whose answer the door writes itself, without the kernel's pydantic passes.

In a session (`facts_of(ctx).session` names it: the `Mcp-Session-Id` of a 2025 request over HTTP, the one connection
over stdio) the tools `search_tools` finds join that session's `tools/list` (`found`), and the client hears
`notifications/tools/list_changed`; the handshake declares `tools.listChanged` for it. A stateless request
(2026-07-28) has no session: nothing is remembered or sent.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Awaitable, Callable, Mapping
from functools import cached_property
from typing import Any, NamedTuple

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError

from ...assembly import GatewayState
from ...kernel import __version__, tracing
from ...kernel.caller import UserToken, bind_caller, current_caller
from ...offer.toolsearch import SEARCH_TOOL
from ...safety.audit import Sends, watch_sends
from .found import FoundTools
from .listing import checked_agent, era_of, listing_page
from .plain import PlainCalls
from .results import ResultAside
from .routing import AGENT_SCOPE_KEY, ASIDE_SCOPE_KEY, FACTS_SCOPE_KEY, SESSION_SCOPE_KEY

logger = logging.getLogger("gateway.mcp")

Context = ServerRequestContext[Any, Any]


class MessageFacts(NamedTuple):
    """Whom and what one message is for (a named tuple: built in C, once per message)."""

    agent: str
    client: str | None
    """The client key's name (None without `clients`)."""
    session: str | None
    """The 2025 session the message belongs to (None: stateless)."""
    subject: str | None
    """The signed-in user (None without one)."""
    token: UserToken | None
    """That user's token."""
    aside: ResultAside | None = None
    """Where a call's structured content goes when the door writes the answer itself (see `results`)."""


FactsOf = Callable[[Context], MessageFacts]
AnswerCall = Callable[..., Awaitable[dict[str, Any] | None]]
"""`gateway.server.mcp.answering.answer_call`."""

current_agent: contextvars.ContextVar[str | None] = contextvars.ContextVar("gateway_mcp_agent", default=None)
"""The agent of the HTTP request being handled in this task (the SDK looks up input schemas before it runs any
handler, with no context to read the agent from)."""


def facts_from_request(ctx: Context) -> MessageFacts:
    """What the endpoint and the auth layer put in the scope of the HTTP request that carried this message: the
    routed agent, the client key's name, the signed-in user, and the session of a 2025 request (the SDK, or the
    door's inline path, has checked that the caller owns it). A request the inline path answers carries them
    already (`FACTS_SCOPE_KEY`: its session's, decided once, with the request's user token and aside)."""
    scope = getattr(ctx.request, "scope", None)
    if not isinstance(scope, dict):  # an ASGI scope is a dict
        raise MCPError(types.INVALID_PARAMS, "No agent: this server is reached at /mcp/{agent}.")
    facts = scope.get(FACTS_SCOPE_KEY)
    if facts is not None:
        return facts  # type: ignore[no-any-return]
    agent, client = scope.get(AGENT_SCOPE_KEY), scope.get("gateway.client")
    if not isinstance(agent, str):
        raise MCPError(types.INVALID_PARAMS, "No agent: this server is reached at /mcp/{agent}.")
    session = scope.get(SESSION_SCOPE_KEY) if era_of(ctx.protocol_version) == "legacy" else None
    subject = scope.get("gateway.subject")
    return MessageFacts(agent, client if isinstance(client, str) else None,
                        session if isinstance(session, str) and session else None,
                        subject if isinstance(subject, str) else None, user_token(scope), scope.get(ASIDE_SCOPE_KEY))


def user_token(scope: Mapping[str, Any]) -> UserToken | None:
    """The signed-in user's token the auth layer left in the request's scope, if any."""
    token = scope.get("gateway.token")
    return token if isinstance(token, UserToken) else None


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


_UNCHANGED = contextlib.nullcontext()
"""The caller context as it is (a `nullcontext` holds no state: one serves every call)."""


def build_mcp_server(state: GatewayState, facts_of: FactsOf = facts_from_request,
                     found: FoundTools | None = None) -> Server[Any]:
    """The low-level server: `tools/list` and `tools/call` of the agent `facts_of(ctx)` names.

    Parameters: facts_of: whom and what a message is for (over HTTP the request's scope; over stdio fixed);
    found: where each session's found tools are kept (the endpoint drops a session's entry when the session
    ends)."""
    found = found if found is not None else FoundTools()
    # `answer_call` and the call machinery it imports (the direct door's plans, the HTTP client, credentials) are
    # imported at the first call, not before the first listing (`gateway mcp`'s start); a closure, not an import
    # statement per call (which costs microseconds each time).
    answer: AnswerCall | None = None

    async def list_tools(ctx: Context, params: types.PaginatedRequestParams | None) -> Any:
        generation = state.current
        facts = facts_of(ctx)
        agent = checked_agent(generation, facts.agent)
        return listing_page(generation, agent, era_of(ctx.protocol_version), params.cursor if params else None,
                            found.listed(facts.session) if facts.session is not None else ())

    async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> Any:
        return await call(ctx, facts_of(ctx), params.name, params.arguments)

    async def call(ctx: Context, facts: MessageFacts, name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
        nonlocal answer
        if answer is None:
            from .answering import answer_call

            answer = answer_call
        agent, client, session, subject, token, aside = facts
        names = found.of(session) if session is not None and name == SEARCH_TOOL else None
        before = len(names) if names is not None else 0
        # The user of the request that carries this call: a 2025 session runs in a task of the request that opened
        # it, so its caller context is that request's (an older token; `AuthenticatedUser` keeps other users out).
        caller = current_caller()
        # Answered in the carrying request's own task (the inline paths), the context says so already: a binding
        # that would change nothing is not made.
        binding = _UNCHANGED if caller.subject == subject and caller.token is token \
            else bind_caller(subject=subject, token=token)
        # Answered in the request's task (`aside`), the calls it sends are counted there, for a request the
        # stopping instance cuts (`stopping`): entered here, where a call can be sent, not around every request.
        counting = _UNCHANGED if aside is None else _counted(aside)
        with binding, counting:
            result = await answer(state, agent, name, dict(arguments or {}),
                                  ctx.protocol_version, client, names, url_elicitation=_takes_url_elicitation(ctx),
                                  aside=aside)
        if result is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool {name!r} for agent {agent!r}.")
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
    # The SDK's public list: its own middleware while traced, then (innermost) the plain calls' (`plain`).
    server.middleware = [*(WhileTraced(middleware) for middleware in server.middleware),
                         PlainCalls(server, facts_of, call)]
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


def _counted(aside: ResultAside) -> Sends:
    sends = aside.sends = watch_sends()
    return sends


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
