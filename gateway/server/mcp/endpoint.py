"""The ASGI app of the MCP door: checks the agent and the caller, then hands the request to the SDK.

Mounted at every path of `routing.PATHS`. Before the SDK's `StreamableHTTPSessionManager` sees a request, the
endpoint resolves the agent (404 for an unknown one, 403 for one the client key may not use, read from the routed
agent and not the raw path, so it holds under a URL prefix), refuses a client's session past its cap (429), and puts
in the request's scope the agent for the handlers and, as the SDK's authenticated user, the identity the SDK binds a
new session to (see `sessions`). A session's `tools/call`, `tools/list` and `ping` from the identity that opened it
(`inline`), and a stateless 2026-07-28 request (`stateless`), are answered in the request's own task through the
SDK's transport checks and server kernel; everything else is the SDK's: JSON answers instead of one-event SSE
streams (the tools send no progress), DNS-rebinding protection on loopback, the body cap, session lookup and
ownership, the total session cap. The idle timeout is the ledger's, which sees the requests answered inline too: an
idle session is ended in the SDK with a DELETE in its owner's name (its public entry, as a client ends a session),
at the session's next request or by a sweep, whichever comes first.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.types import Message, Receive, Scope, Send

from ...asgi import StatusWatch
from ...assembly import GatewayState
from ..api_errors import APIError
from ..auth import AGENT, agent_forbidden
from ..stopping import CUT_KEY
from .found import FoundTools
from .inline import Identity, InlineSessions
from .routing import AGENT_SCOPE_KEY, SESSION_SCOPE_KEY, routed_agent
from .server import build_mcp_server, current_agent
from .sessions import SessionLedger, SessionLimits
from .stateless import StatelessRequests
from .stopping import answer_cut

logger = logging.getLogger("gateway.mcp")

_SESSION_HEADER = b"mcp-session-id"
_VERSION_HEADER = b"mcp-protocol-version"


class MCPEndpoint:
    def __init__(self, state: GatewayState, *, host: str | None = "127.0.0.1",
                 max_body_bytes: int = 4 * 1024 * 1024, limits: SessionLimits | None = None) -> None:
        """Parameters: state: the gateway's runtime; host: the bound address (loopback turns on the SDK's
        DNS-rebinding protection); max_body_bytes: the SDK's body cap; limits: session limits (default: the
        manifest's `gateway.mcp`, read when the endpoint is built)."""
        self.state = state
        self.limits = limits or state.current.runtime.manifest.gateway.mcp
        self.found = FoundTools(self.limits.max_sessions)
        """The tools each session's searches found (`found`): an entry ends with its session in the ledger."""
        self.sessions = SessionLedger(self.limits, on_end=self._ended, on_idle=self._idled)
        self.server = build_mcp_server(state, found=self.found)
        security = security_settings(host)
        self.manager = StreamableHTTPSessionManager(
            app=self.server,
            json_response=True,
            security_settings=security,
            max_request_body_size=max_body_bytes,
            session_idle_timeout=None,  # the ledger's (see `sessions`): requests answered inline hold a session too
            max_sessions=self.limits.max_sessions,
        )
        checks = TransportSecurityMiddleware(security)
        self.inline = InlineSessions(self.server, checks, max_body_bytes)
        """The sessions whose plain requests the door answers in their own task (see `inline`)."""
        self.stateless = StatelessRequests(self.server, checks, max_body_bytes)
        """The stateless 2026-07-28 requests the door answers through the SDK's kernel (see `stateless`)."""
        self._identities: dict[Identity, AuthenticatedUser] = {}
        self._owners: dict[str, Identity] = {}
        """Whose each open session is (for ending an idle one in the SDK as its owner)."""
        self._idle: list[tuple[str, Identity]] = []
        """Sessions the ledger ended for idleness, to be ended in the SDK too."""

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """The SDK's session manager, and the sweep that ends idle sessions, for the app's lifetime."""
        async with self.manager.run(), anyio.create_task_group() as group:
            group.start_soon(self._sweep)
            yield
            group.cancel_scope.cancel()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            agent = self._checked_agent(scope)
        except APIError as error:
            await error.response()(scope, receive, send)
            return
        client = scope.get("gateway.client")
        client = client if isinstance(client, str) else None
        subject = scope.get("gateway.subject")
        subject = subject if isinstance(subject, str) else None
        scope[AGENT_SCOPE_KEY] = agent
        scope["user"] = self._identity(client, subject, agent)
        identity = (client, subject, agent)
        token = current_agent.set(agent)
        try:
            scope[CUT_KEY] = answer_cut  # a POST the stopping instance cuts is told so (`stopping`, by the envelope)
            await self._dispatch(identity, scope, receive, send)
        finally:
            current_agent.reset(token)

    async def _dispatch(self, identity: Identity, scope: Scope, receive: Receive, send: Send) -> None:
        """Hand the request to whoever answers it: a session's inline answers, the stateless ones, or the SDK."""
        client = identity[0]
        headers = _headers(scope)
        session, version = headers.get(_SESSION_HEADER), headers.get(_VERSION_HEADER)
        version_text = version.decode("latin-1") if version is not None else None
        if session is not None:
            session_id = scope[SESSION_SCOPE_KEY] = session.decode("latin-1")
            await self._on_session(session_id, identity, version_text, headers, scope, receive, send)
        elif scope.get("method") == "POST" and (version_text is None or
                                                version_text in HANDSHAKE_PROTOCOL_VERSIONS):
            await self._opening(_owner(client, scope), identity, scope, receive, send)
        elif version_text in MODERN_PROTOCOL_VERSIONS:  # the stateless 2026-07-28 protocol
            rest = await self.stateless.answer(headers, scope, receive, send, identity)
            if rest is not None:
                await self.manager.handle_request(scope, rest, send)
        else:  # a request the SDK refuses anyway
            await self.manager.handle_request(scope, receive, send)

    def _identity(self, client: str | None, subject: str | None, agent: str) -> AuthenticatedUser:
        """Who the SDK binds a session to: the client key's name, the signed-in user (`gateway.auth`: two users
        of one client must not share a session) and the agent (a session is one agent's)."""
        identity = self._identities.get((client, subject, agent))
        if identity is None:
            if len(self._identities) >= 4096:  # keys, users and agents change; the next request makes it again
                self._identities.clear()
            owner = client or ""
            if subject is not None:
                owner = f"{owner}\x00{subject}"  # a separator no client name or claim value has
            identity = AuthenticatedUser(AccessToken(token="", client_id=owner, scopes=[], subject=agent))
            self._identities[(client, subject, agent)] = identity
        return identity

    def _checked_agent(self, scope: Scope) -> str:
        agents = self.state.current.runtime.manifest.agents
        # The agent the route's gate admitted (`auth.AgentGate`, from `routed_agent` too), read once: the gate has
        # just worked it out of the path or the query.
        agent = scope.get(AGENT)
        if not isinstance(agent, str):
            agent = routed_agent(scope)
        if agent is None:
            raise APIError(404, "No agent named: use /mcp/{agent} (or /mcp/{agent}/mcp, or /mcp?agent=NAME).",
                           code="unknown_agent")
        if agent not in agents:
            known = ", ".join(sorted(agents)) or "none"
            raise APIError(404, f"Unknown agent {agent!r}; the agents are: {known}.", code="unknown_agent")
        allowed = scope.get("gateway.agents")  # the auth layer's: the client key's agents (None: every agent)
        if isinstance(allowed, set) and agent not in allowed:
            raise agent_forbidden(agent, allowed)
        return agent

    async def _opening(self, owner: str, identity: Identity, scope: Scope, receive: Receive, send: Send) -> None:
        """A request that may open a session (an initialize): counted against the owner's cap first."""
        if not self.sessions.reserve(owner):
            cap, idle = self.limits.max_sessions_per_client, self.limits.session_idle_timeout
            logger.warning("refused a new MCP session for %s: %d open (the limit)", owner, cap)
            await APIError(429, f"This client has {cap} open MCP sessions, the limit (gateway.mcp."
                                f"max_sessions_per_client). End one with DELETE, or wait for an idle one to close "
                                f"({idle:g} s after its last request).", code="too_many_sessions",
                           headers={"Retry-After": str(max(1, round(idle)))}).response()(scope, receive, send)
            return
        if self._idle:  # what `reserve` found idle is over in the SDK before it counts this one in its total
            await self._end_idle()
        agent = identity[2]
        asked: list[bytes] = []  # the initialize's body and the SDK's answer: what the handshake said
        answered: list[bytes] = []
        opened: list[str] = []

        async def tee() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                asked.append(message.get("body", b""))
            return message

        async def remember(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                session_id = _message_header(message, _SESSION_HEADER)
                if session_id is not None:
                    opened.append(session_id)
                    self._owners[session_id] = identity
                    self.sessions.opened(session_id, owner, agent)
            elif message["type"] == "http.response.body" and opened:
                answered.append(message.get("body", b""))
            await send(message)

        try:
            await self.manager.handle_request(scope, tee, remember)
        finally:
            self.sessions.release(owner)
        if opened and opened[0] in self._owners:
            self.inline.opened(opened[0], identity, b"".join(asked), b"".join(answered))

    async def _on_session(self, session_id: str, identity: Identity, version: str | None,
                          headers: dict[bytes, bytes], scope: Scope, receive: Receive, send: Send) -> None:
        # Counted in flight; or, idle past its timeout, over in the ledger, and in the SDK before it answers (a 404).
        if self.sessions.request_started(session_id) or self._idle:
            await self._end_idle()
        status = 200  # what the door answers inline
        try:
            rest = await self.inline.answer(session_id, identity, version, headers, scope, receive, send)
            if rest is not None:
                watch = StatusWatch(send)
                try:
                    await self.manager.handle_request(scope, rest, watch)
                finally:
                    status = watch.status
        finally:
            gone = status == 404 or (scope.get("method") == "DELETE" and 200 <= status < 300)
            # (whose the request is matters only when the SDK said the session is over)
            self.sessions.request_ended(session_id, _owner(identity[0], scope) if gone else "", identity[2],
                                        gone=gone)

    def _ended(self, session_id: str) -> None:
        self.found.forget(session_id)
        self.inline.forget(session_id)
        self._owners.pop(session_id, None)

    def _idled(self, session_id: str) -> None:
        identity = self._owners.get(session_id)
        if identity is not None:
            self._idle.append((session_id, identity))

    async def _sweep(self) -> None:
        """End the sessions idle past their timeout (a session's next request finds it over anyway)."""
        while True:
            await anyio.sleep(min(5.0, max(0.05, self.sessions.limits.session_idle_timeout / 4)))
            try:
                self.sessions.sweep()
            except Exception:  # noqa: BLE001 - a sweep that fails must not end the endpoint: the next one tries again
                logger.exception("sweeping idle MCP sessions failed")
            await self._end_idle()

    async def _end_idle(self) -> None:
        """End in the SDK the sessions the ledger ended for idleness: a DELETE from their owner, as a client
        ends its session (the SDK's public entry; its session loop and streams close with it)."""
        while self._idle:
            session_id, (client, subject, agent) = self._idle.pop()
            scope: Scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "DELETE",
                            "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"",
                            "root_path": "", "client": None, "server": None,
                            "headers": [(b"host", b"127.0.0.1"), (b"mcp-session-id", session_id.encode("latin-1"))],
                            "user": self._identity(client, subject, agent)}

            async def receive() -> Message:
                return {"type": "http.request", "body": b"", "more_body": False}

            async def discard(message: Message) -> None:
                return None

            try:
                await self.manager.handle_request(scope, receive, discard)
            except Exception:  # noqa: BLE001 - the sweep goes on; the session is already over in the ledger
                logger.warning("could not end the idle MCP session %s", session_id[:16], exc_info=True)


def _owner(client: str | None, scope: Scope) -> str:
    """Whose cap a new session counts against: the client key, or without keys the peer's address."""
    if client is not None:
        return client
    peer: Any = scope.get("client")
    return f"peer:{peer[0]}" if peer else "peer:?"


def _headers(scope: Scope) -> dict[bytes, bytes]:
    """The request's headers by name (ASGI names are lower-case; of a repeated header the first counts), made
    without a Python step per header."""
    return dict(reversed(list(scope.get("headers", ()))))  # reversed: the first of a repeated name wins


def _message_header(message: Message, name: bytes) -> str | None:
    for key, value in message.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")  # type: ignore[no-any-return]
    return None


def security_settings(host: str | None) -> TransportSecuritySettings | None:
    """DNS-rebinding protection when bound to loopback: a web page must not reach a local gateway."""
    if host not in ("127.0.0.1", "localhost", "::1"):
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )
