"""A stateless 2026-07-28 request answered in its own task, on the SDK's public single-exchange pieces.

The SDK answers a 2026-07-28 POST (no session: the request carries its own envelope) in the request's task
already, but asks again per request what the door knows once: its transport checks read each header through a
Starlette `Headers` (a Python loop over every header per lookup, and a whole copy of them for the envelope's
header rung), its `Mcp-Param-*` header check walks the called tool's whole input schema for `x-mcp-header`
annotations (a schema compiled from an OpenAPI spec has none: the compiler drops `x-` keys), and its driver unwinds
each request's connection teardown, empty, under a shielded cancel scope. Here, in the SDK's order:

- its transport checks: the same body limit; `TransportSecurityMiddleware` (Content-Type, Host, Origin) and its
  Accept rule, asked once per set of those header values (`exchange.TransportChecks`);
- the body parsed by the SDK's parser (`json.loads`) and read as its `JSONRPCRequest` model reads it;
- its envelope ladder, `classify_inbound_request` (the `_meta` envelope, the routing headers, the version);
- its `Mcp-Param-*` rule, `validate_mcp_param_headers`, for a tool whose schema declares such headers (whether
  it does is asked of the SDK's `x_mcp_header_map` and `find_invalid_x_mcp_header` once per schema);
- then what the SDK's single-exchange driver `serve_one` does: its kernel (`ServerRunner.on_request`) under a
  `Connection` from the envelope, the connection's teardown unwound by its `aclose_shielded` (when anything was
  pushed on it), and the answer (or the error, mapped by its `modern_error_data`, with the HTTP status of its
  `ERROR_CODE_HTTP_STATUS`).

The kernel of a `tools/call`, `tools/list` or `ping` is kept per caller and envelope (`_kernel`), as a 2025 session
keeps its own: the `Connection` the SDK makes from an envelope is a function of the envelope's three values alone
(version, client info, capabilities: three pydantic validations, an event and an exit stack a request), and those
requests leave it as they found it: the kernel writes a connection only on `initialize`, and a low-level handler
or server middleware reaches no connection state through the SDK's public context. A kernel whose connection was
written all the same (its `state`, or anything pushed on its teardown) is unwound as `serve_one` unwinds it and
not kept. Every other method gets a connection of its own, as in the SDK.

What is not plainly a well-formed request that passes all of them (a notification, a refused envelope, a
repeated header, `subscriptions/listen`'s stream, a chunked body) goes to the SDK unchanged, so its answers and
errors stay its own: a test sends every kind of request both ways and compares the answers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any

from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.runner import ServerRunner, aclose_shielded, modern_error_data
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.dispatcher import as_request_id
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PARAM_HEADER_PREFIX,
    MCP_PROTOCOL_VERSION_HEADER,
    InboundLadderRejection,
    InboundModernRoute,
    classify_inbound_request,
    find_invalid_x_mcp_header,
    validate_mcp_param_headers,
    x_mcp_header_map,
)
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import JSONRPCError, RequestId
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from ...asgi import send_json
from .exchange import Headers, JSONExchange, TransportChecks, read_request, result_body
from .inline import Identity
from .results import ResultAside
from .routing import ASIDE_SCOPE_KEY, FACTS_SCOPE_KEY
from .server import MessageFacts, user_token

logger = logging.getLogger("gateway.mcp")

_KEPT_METHODS = frozenset({"tools/call", "tools/list", "ping"})
"""The requests whose kernel is kept per caller and envelope: the kernel writes no connection for them."""
_ENVELOPE_KEPT = 2048
"""The longest client info and capabilities (their text) whose kernel is kept: what is kept stays bounded."""
_PARAM_PREFIX = MCP_PARAM_HEADER_PREFIX.lower().encode("latin-1")
_VERSION, _METHOD, _NAME = (name.encode("latin-1") for name in (MCP_PROTOCOL_VERSION_HEADER, MCP_METHOD_HEADER,
                                                                  MCP_NAME_HEADER))
"""The routing headers the envelope ladder compares with the body (the only headers its rung reads)."""


class StatelessRequests:
    """Answers the 2026-07-28 requests the SDK would answer with one JSON message, through its own kernel."""

    def __init__(self, server: Server[Any], security: TransportSecurityMiddleware, max_body_bytes: int) -> None:
        self.server = server
        self.max_body_bytes = max_body_bytes
        self.checks = TransportChecks(security, exact_json=False)
        self._routing: dict[tuple[bytes | None, bytes | None, bytes | None], dict[str, str]] = {}
        """The routing headers as the ladder reads them (decoded, by name), by their raw values."""
        self._declaring: dict[int, tuple[Mapping[str, Any], bool]] = {}
        """Whether a tool's input schema declares `Mcp-Param-*` headers, by the schema's id (the schema is kept
        with its verdict, so its id names it while the entry lives)."""
        self._kernels: dict[tuple[Any, ...], tuple[ServerRunner[Any], _Teardown]] = {}
        """The kernel of each caller's envelope, with its connection's teardown (see the module's docstring)."""

    async def answer(self, headers: Headers, scope: Scope, receive: Receive, send: Send,
                     identity: Identity | None = None) -> Receive | None:
        """Answer the request if it is one answered here and return None; else the `receive` to hand the SDK
        (the body read here is given again first). `headers`: the request's, by lower-case name; `identity`: who
        asks, as the endpoint read it from the scope (the handlers' facts are then made from it, not read again)."""
        if scope.get("method") != "POST" or len(headers) != len(scope["headers"]):
            return receive  # a repeated header: the SDK decides which copy counts, or refuses a routing header's
        message, again = await read_request(self.checks, headers, scope, receive, self.max_body_bytes,
                                            _parsed)
        if message is None or "id" not in message:
            return again  # not one request (a notification is acknowledged by the SDK)
        request_id, method, params = as_request_id(message["id"]), message["method"], message.get("params")
        if request_id is None or method == "subscriptions/listen":
            return again  # what the SDK's JSONRPCRequest model refuses, or a stream: the SDK's to answer
        route = classify_inbound_request(message, headers=self._routing_headers(headers))
        if isinstance(route, InboundLadderRejection) or \
                (method == "tools/call" and params is not None and self._param_headers_refused(params, scope)):
            return again
        request = Request(scope, again)
        aside = scope[ASIDE_SCOPE_KEY] = ResultAside()  # this door writes the answer (see `results`)
        if identity is not None:  # (no session: what `server.facts_from_request` would read, made here)
            client, subject, agent = identity
            scope[FACTS_SCOPE_KEY] = MessageFacts(agent, client, None, subject, user_token(scope), aside)
        exchange = JSONExchange(TransportContext(kind="streamable-http", can_send_request=False,
                                                 headers=request.headers), request_id,
                                ServerMessageMetadata(request_context=request))
        key, runner, teardown = self._kernel(route, identity, method)
        connection = runner.connection
        try:
            # What the SDK's `serve_one` does: a kernel for this request's connection, whose teardown is then
            # unwound (shielded, bounded), here only when something was pushed on it (nothing of the gateway's
            # does: unwinding an empty stack under a shielded scope was the largest step left of this path).
            result = await runner.on_request(exchange, method, params)
        except Exception as error:  # noqa: BLE001 - the wire boundary: the SDK's modern entry maps it so
            failure: Exception | None = error
        else:
            failure = None
        finally:
            if teardown.pushed or connection.state:  # written after all: unwound, and the next request's is new
                if key is not None and self._kernels.get(key, (None,))[0] is runner:
                    del self._kernels[key]
                if teardown.pushed:
                    await aclose_shielded(connection)
        if failure is not None:
            await _send_error(request_id, failure, send)
        else:
            await send_json(send, 200, result_body(request_id, result, aside))
        return None

    def _kernel(self, route: InboundModernRoute, identity: Identity | None,
                method: str) -> tuple[tuple[Any, ...] | None, ServerRunner[Any], _Teardown]:
        """The kernel (and its connection's teardown) to answer `method` under the envelope `route` read: the one
        kept for this caller and envelope, for the methods that leave a connection as they found it; else a new
        one, as the SDK's `serve_one` makes per request (then no key)."""
        key: tuple[Any, ...] | None = None
        if method in _KEPT_METHODS:
            envelope = repr((route.client_info, route.client_capabilities))  # (of JSON values, their exact text)
            if len(envelope) <= _ENVELOPE_KEPT:
                key = (identity, route.protocol_version, envelope)
                kept = self._kernels.get(key)
                if kept is not None:
                    return key, kept[0], kept[1]
        connection = Connection.from_envelope(route.protocol_version, route.client_info, route.client_capabilities)
        connection.exit_stack = teardown = _Teardown()
        # {}: the lifespan state of the server (it keeps the SDK's default lifespan, whose state is empty).
        runner = ServerRunner(self.server, connection, {})
        if key is not None:
            if len(self._kernels) >= 1024:  # callers and their envelopes come and go
                self._kernels.clear()
            self._kernels[key] = (runner, teardown)
        return key, runner, teardown

    def _routing_headers(self, headers: Headers) -> dict[str, str]:
        """The routing headers the request has, decoded, by their names (as the SDK's `Headers` gives them)."""
        key = (headers.get(_VERSION), headers.get(_METHOD), headers.get(_NAME))
        routing = self._routing.get(key)
        if routing is None:
            routing = {name.decode("latin-1"): value.decode("latin-1")
                       for name, value in zip((_VERSION, _METHOD, _NAME), key, strict=True) if value is not None}
            if sum(map(len, routing.values())) <= 512:  # (longer values are decoded each time, never kept)
                if len(self._routing) >= 1024:  # tool names come and go with the clients' calls
                    self._routing.clear()
                self._routing[key] = routing
        return dict(routing)  # (a copy: what the ladder is given is its own)

    def _param_headers_refused(self, params: Mapping[str, Any], scope: Scope) -> bool:
        """The SDK's `Mcp-Param-*` rule for a `tools/call`: whether the headers disagree with the arguments."""
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or (arguments is not None and not isinstance(arguments, dict)):
            return False
        lookup = self.server.get_tool_input_schema
        if lookup is None:
            return True  # the SDK would list the tools to find the schema: its own path
        if not arguments and not any(key.startswith(_PARAM_PREFIX) for key, _ in scope["headers"]):
            return False
        try:
            schema = lookup(name)
        except Exception:  # noqa: BLE001 - fail open, as the SDK does: let it log and answer
            return True
        if schema is None or not self._declares_headers(schema):
            return False
        return validate_mcp_param_headers(schema, arguments or {}, Request(scope).headers) is not None

    def _declares_headers(self, schema: Mapping[str, Any]) -> bool:
        """Whether the SDK's rule can refuse anything for `schema`: it declares a valid `x-mcp-header`."""
        known = self._declaring.get(id(schema))
        if known is not None and known[0] is schema:
            return known[1]
        declares = find_invalid_x_mcp_header(schema) is None and bool(x_mcp_header_map(schema))
        if len(self._declaring) >= 4096:  # schemas of replaced generations go
            self._declaring.clear()
        self._declaring[id(schema)] = (schema, declares)
        return declares


class _Teardown(AsyncExitStack):
    """A connection's exit stack that says whether anything was pushed on it (through any of its public ways)."""

    pushed = False

    def push(self, exit: Any) -> Any:
        self.pushed = True
        return super().push(exit)

    def enter_context(self, cm: Any) -> Any:
        self.pushed = True
        return super().enter_context(cm)

    def callback(self, callback: Any, /, *args: Any, **kwds: Any) -> Any:
        self.pushed = True
        return super().callback(callback, *args, **kwds)

    async def enter_async_context(self, cm: Any) -> Any:
        self.pushed = True
        return await super().enter_async_context(cm)

    def push_async_exit(self, exit: Any) -> Any:
        self.pushed = True
        return super().push_async_exit(exit)

    def push_async_callback(self, callback: Any, /, *args: Any, **kwds: Any) -> Any:
        self.pushed = True
        return super().push_async_callback(callback, *args, **kwds)


_DECODER = json.JSONDecoder()
"""What `json.loads` decodes a text with when given no options (the SDK transport's parser)."""


def _parsed(body: bytes) -> Any:
    """The body as the SDK's transport parses it (`json.loads` of its UTF-8 text; what it refuses, a `ValueError`,
    a text with a byte-order mark included), without `json.loads`'s reading of its options per call."""
    return _DECODER.decode(body.decode())


async def _send_error(request_id: RequestId, failure: Exception, send: Send) -> None:
    """The SDK's modern answer to a failed request: its error data, the HTTP status its table gives the code."""
    error = JSONRPCError(jsonrpc="2.0", id=request_id, error=modern_error_data(failure))
    body = json.dumps(error.model_dump(mode="json", by_alias=True, exclude_none=True), separators=(",", ":"))
    await send_json(send, ERROR_CODE_HTTP_STATUS.get(error.error.code, 200), body.encode())
