"""A 2025 session's plain requests answered in the request's own task, on the SDK's public server kernel.

The SDK's session transport hands every message of a session through memory streams to the session's reader
and dispatcher tasks and the answer back the same way, and parses and validates each message as its union of
JSON-RPC models first. A request that needs nothing of the session's streams (`tools/call`, `tools/list` and
`ping`: the door answers in JSON, so nothing request-scoped reaches the client anyway) is answered here instead:

- the SDK's own transport checks come first: the same body limit, `TransportSecurityMiddleware` (Content-Type,
  Host and Origin), its Accept rule (`check_accept_headers`) and its JSON Content-Type (`exchange`);
- then the SDK's kernel, `ServerRunner.on_request`, the one every transport of the SDK dispatches through: the
  same validation of the method's params, the same middleware, handlers and result shaping, under a `Connection`
  that says what the session's handshake said (negotiated version, the client's capabilities). A plain `tools/call`
  is answered there by the server's innermost middleware without the kernel's pydantic passes (`plain`).

What is not plainly one of those (a notification, a `search_tools` call, which may announce a grown tool list
on the session's own stream, an unknown session, another identity's session, a body this does not read as one
well-formed JSON-RPC request, a chunked body without a Content-Length) goes to the SDK unchanged, so its answers
and errors stay its own. A client's `notifications/cancelled` for a request answered here cancels it here, as the
SDK's dispatcher would (the request is answered `REQUEST_CANCELLED`, as the SDK's 2025 transport answers it).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pydantic_core
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.runner import ServerRunner
from mcp.server.streamable_http import REQUEST_CANCELLED
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.dispatcher import as_request_id, coerce_request_id
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params, handler_exception_to_error_data
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import ErrorData, JSONRPCError, RequestId
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from ...asgi import send_json
from ...offer.toolsearch import SEARCH_TOOL
from .exchange import Headers, JSONExchange, TransportChecks, read_request, result_body
from .results import ResultAside
from .routing import ASIDE_SCOPE_KEY, FACTS_SCOPE_KEY
from .server import MessageFacts, user_token

logger = logging.getLogger("gateway.mcp")

INLINE_METHODS = frozenset({"tools/call", "tools/list", "ping"})
"""Requests that need nothing of the session's streams: answered here."""

Identity = tuple[str | None, str | None, str]
"""Whom a session belongs to: the client key's name, the signed-in user, the agent."""

_TRANSPORT = TransportContext(kind="jsonrpc", can_send_request=False)
"""What the SDK's session loop says of a message in JSON-response mode (no request-scoped channel)."""


@dataclass(eq=False)
class InlineSession:
    """What the handshake of one session said, and its requests being answered here."""

    identity: Identity
    runner: ServerRunner[Any]
    header: tuple[bytes, bytes]
    """The session's `Mcp-Session-Id`, as every answer carries it."""
    facts: tuple[str, str | None, str, str | None]
    """Whom its messages are for, the first fields of their `MessageFacts` (agent, client, session, user; the
    request's user token and aside are added per request): the identity a request must have to be answered here
    is the session's, so these are decided once."""
    running: dict[RequestId, _Running] = field(default_factory=dict)


class InlineSessions:
    """The sessions whose plain requests are answered here, by session id (added when the SDK opened them)."""

    def __init__(self, server: Server[Any], security: TransportSecurityMiddleware, max_body_bytes: int) -> None:
        self.server = server
        self.max_body_bytes = max_body_bytes
        self.sessions: dict[str, InlineSession] = {}
        self.checks = TransportChecks(security, exact_json=True)

    def opened(self, session_id: str, identity: Identity, initialize: bytes, answer: bytes) -> None:
        """Remember a session the SDK opened: `initialize` the request's body, `answer` the SDK's JSON answer."""
        try:
            params = json.loads(initialize)["params"]
            version = json.loads(answer)["result"]["protocolVersion"]
        except (ValueError, KeyError, TypeError):
            return  # not what this reads: the session's requests all go to the SDK
        if not isinstance(params, dict) or version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return
        connection = Connection.from_envelope(version, params.get("clientInfo"), params.get("capabilities"))
        connection.session_id = session_id
        # {}: the lifespan state of the server (it keeps the SDK's default lifespan, whose state is empty)
        client, subject, agent = identity
        self.sessions[session_id] = InlineSession(identity, ServerRunner(self.server, connection, {}),
                                                  (b"mcp-session-id", session_id.encode("latin-1")),
                                                  (agent, client, session_id, subject))

    def forget(self, session_id: str) -> None:
        self.sessions.pop(session_id, None)

    async def answer(self, session_id: str, identity: Identity, version: str | None, headers: Headers,
                     scope: Scope, receive: Receive, send: Send) -> Receive | None:
        """Answer the request if it is one answered here and return None; else the `receive` to hand the SDK
        (the body read here is given again first). `headers`: the request's, by lower-case name."""
        session = self.sessions.get(session_id)
        if session is None or session.identity != identity or scope.get("method") != "POST" or \
                (version is not None and version != session.runner.connection.protocol_version):
            return receive  # (without the header the SDK answers in the session's version all the same)
        message, again = await read_request(self.checks, headers, scope, receive, self.max_body_bytes,
                                            pydantic_core.from_json)  # the SDK's 2025 transport's own parser
        if message is None:
            return again
        method, params = message["method"], message.get("params")
        if "id" not in message:
            if method == "notifications/cancelled" and self._cancel(session, params):
                await send_json(send, 202, b"", session.header)
                return None
            return again
        request_id = as_request_id(message["id"])
        if request_id is None or method not in INLINE_METHODS:
            return again
        key = coerce_request_id(request_id)  # "7" and 7 are one id, as the SDK's dispatcher correlates them
        if key in session.running or \
                (method == "tools/call" and params is not None and params.get("name") == SEARCH_TOOL):
            return again
        await self._serve(session, Request(scope, again), request_id, key, method, params, send)
        return None

    async def _serve(self, session: InlineSession, request: Request, request_id: RequestId, key: RequestId,
                     method: str, params: dict[str, Any] | None, send: Send) -> None:
        exchange = JSONExchange(_TRANSPORT, request_id, ServerMessageMetadata(request_context=request,
                                                                            can_send_request=False))
        task = asyncio.current_task()
        assert task is not None
        running = session.running[key] = _Running(task, exchange)
        scope = request.scope
        aside = scope[ASIDE_SCOPE_KEY] = ResultAside()  # this door writes the answer (see `results`)
        scope[FACTS_SCOPE_KEY] = MessageFacts(*session.facts, user_token(scope), aside)
        error: ErrorData | None = None
        try:
            result = await session.runner.on_request(exchange, method, params)
        except asyncio.CancelledError:
            if not (running.cancelled and task.uncancel() == 0):
                raise  # not (only) the client's notification: whoever else cancelled it gets it
            error = _CANCELLED  # the client cancelled it: the SDK's 2025 transport answers so
        except Exception as failure:  # noqa: BLE001 - the wire boundary: the SDK dispatcher's own mapping
            error = handler_exception_to_error_data(failure)
            if error is None:
                logger.exception("handler for %r raised", method)
                error = ErrorData(code=0, message=str(failure))
        finally:
            del session.running[key]
        if running.cancelled and error is not _CANCELLED:  # delivered, but the call answered anyway: no answer
            task.uncancel()
            error = _CANCELLED
        if error is None:  # the result is the SDK's wire form already (checked and shaped by its kernel)
            body = result_body(request_id, result, aside)
        else:
            body = JSONRPCError(jsonrpc="2.0", id=request_id, error=error).model_dump_json(
                by_alias=True, exclude_unset=True).encode()
        await send_json(send, 200, body, session.header)

    @staticmethod
    def _cancel(session: InlineSession, params: Mapping[str, Any] | None) -> bool:
        request_id = cancelled_request_id_from_params(params)
        running = session.running.get(coerce_request_id(request_id)) if request_id is not None else None
        if running is None:
            return False  # not one of ours: the SDK's dispatcher looks for it
        if not running.cancelled:
            running.cancelled = True
            running.exchange.cancel_requested.set()  # as the SDK's dispatcher marks a request the peer cancelled
            running.task.cancel()  # it waits inside the call (it leaves `running` with no wait after the call)
        return True


class _Running:
    """A request being answered here: its task, cancelled (plain asyncio, as the disconnect watch cancels a
    request's task) when the client's `notifications/cancelled` names it. A cancel scope per call would cost
    every call for what few are ever cancelled."""

    __slots__ = ("cancelled", "exchange", "task")

    def __init__(self, task: asyncio.Task[Any], exchange: JSONExchange) -> None:
        self.task = task
        self.exchange = exchange
        self.cancelled = False


_CANCELLED = ErrorData(code=REQUEST_CANCELLED, message="Request cancelled")

