"""What the door's own answers share, in both protocol eras: the SDK's transport checks, the body, one JSON answer.

The door answers some requests in their own task (`inline` for a 2025 session, `stateless` for 2026-07-28)
instead of through the SDK's transport, after the same checks that transport makes first:

- `TransportChecks`: the SDK's `TransportSecurityMiddleware` (Content-Type, Host, Origin) and its Accept rule
  (`check_accept_headers`). Both depend on four header values only, so each verdict is the SDK's own, asked
  once per set of those values;
- `read_request`: the body, within the SDK's body limit, parsed as one JSON-RPC message of the shape the SDK's
  `JSONRPCRequest` model reads, and a `receive` that gives the body again, for a request the door hands to the
  SDK after all; `send_json` and `result_body` write the answer;
- `JSONExchange`: the SDK's `DispatchContext` for a request answered with one JSON message (the SDK's transports
  in JSON-response mode: no request-scoped channel, so a handler's notifications and requests have no wire).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import RequestId
from starlette.requests import Request
from starlette.types import Message, Receive, Scope

from ...jsonwire import dumps
from .results import ResultAside

logger = logging.getLogger("gateway.mcp")

Headers = Mapping[bytes, bytes]
"""A request's headers by lower-case name (of a repeated name, the first)."""


class TransportChecks:
    """Whether the SDK's transport would let a POST through to its handlers: its security rule (Content-Type,
    Host, Origin), its Accept rule (JSON accepted) and, with `exact_json`, the 2025 transport's own Content-Type
    rule (`application/json` among the media types, not just a prefix)."""

    def __init__(self, security: TransportSecurityMiddleware, *, exact_json: bool) -> None:
        self.security = security
        self.exact_json = exact_json
        self._verdicts: dict[tuple[bytes | None, ...], bool] = {}

    async def passes(self, scope: Scope, headers: Headers) -> bool:
        key = (headers.get(b"content-type"), headers.get(b"host"), headers.get(b"origin"), headers.get(b"accept"))
        verdict = self._verdicts.get(key)
        if verdict is None:
            request = Request(scope)
            verdict = check_accept_headers(request)[0] and \
                await self.security.validate_request(request, is_post=True) is None
            if self.exact_json:
                media_types = (key[0] or b"").decode("latin-1").split(";")[0].split(",")
                verdict = verdict and "application/json" in map(str.strip, media_types)
            if len(self._verdicts) >= 256:  # a client making up header values gets asked each time
                self._verdicts.clear()
            self._verdicts[key] = verdict
        return verdict


async def read_request(checks: TransportChecks, headers: Headers, scope: Scope, receive: Receive, limit: int,
                       parse: Callable[[bytes], Any]) -> tuple[dict[str, Any] | None, Receive]:
    """The request's JSON-RPC message, read after the SDK transport's checks and by its parser (`parse`): a dict
    with `jsonrpc` 2.0, a string `method` and an object or no `params`; None for anything else (the SDK answers
    it). Either way, the `receive` to hand the SDK (what was read here is given again first)."""
    if not declared_length(headers, limit) or not await checks.passes(scope, headers):
        return None, receive  # the SDK answers it (413, 400, 421, 403, 406), or reads a chunked body under its limit
    body, again = await read_whole(receive, limit)
    if body is None:
        return None, again
    try:
        message = parse(body)
    except ValueError:
        return None, again
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str) \
            or not isinstance(message.get("params", {}), (dict, type(None))):
        return None, again  # what the SDK's JSONRPCRequest model refuses, or a response: the SDK's to answer
    return message, again


def result_body(request_id: RequestId, result: Any, aside: ResultAside | None = None) -> bytes:
    """A JSON-RPC answer with the SDK kernel's result (in its wire form already: checked and shaped by the kernel),
    and what a call put `aside` (see `results`)."""
    if aside is not None and aside.put(result):
        try:
            return b'{"jsonrpc":"2.0","id":%b,"result":%b}' % (dumps(request_id), dumps(result))
        except TypeError:  # something else that only the general writer takes (which does not take a fragment)
            aside.take_back(result)
    return b'{"jsonrpc":"2.0","id":%b,"result":%b}' % (dumps(request_id), dumps(result))


def declared_length(headers: Headers, limit: int) -> bool:
    """Whether the request declares a Content-Length within `limit` (a chunked body is the SDK's to read)."""
    length = headers.get(b"content-length")
    return bool(length and length.isdigit() and int(length) <= limit)


async def read_whole(receive: Receive, limit: int) -> tuple[bytes | None, Receive]:
    """The body (None when it ended otherwise, or outgrew `limit`) and a `receive` that gives what was read again,
    for the SDK."""
    message = await receive()
    if message["type"] == "http.request" and not message.get("more_body", False):  # the body in one message
        body = message.get("body", b"")
        return (body if len(body) <= limit else None), replay(body, receive)
    chunks: list[bytes] = []
    size = 0
    while True:
        if message["type"] != "http.request":  # (a disconnect): what was read, unfinished, then that message
            return None, replay(b"".join(chunks), receive, message, more_body=True)
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            break
        if size > limit:
            return None, replay(b"".join(chunks), receive, more_body=True)
        message = await receive()
    body = b"".join(chunks)
    return (body if size <= limit else None), replay(body, receive)


def replay(body: bytes, receive: Receive, after: Message | None = None, *, more_body: bool = False) -> Receive:
    """`receive` with the body already read given again first (and then `after`, a message read past it)."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": more_body}]
    if after is not None:
        pending.insert(0, after)

    async def again() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return again


@dataclass(eq=False)
class JSONExchange:
    """The SDK's `DispatchContext` for one request answered with one JSON message."""

    transport: TransportContext
    request_id: RequestId
    message_metadata: ServerMessageMetadata
    can_send_request: bool = False
    _cancel_requested: anyio.Event | None = None

    @property
    def cancel_requested(self) -> anyio.Event:
        if self._cancel_requested is None:  # made when asked for: most requests never are
            self._cancel_requested = anyio.Event()
        return self._cancel_requested

    async def send_raw_request(self, method: str, params: Mapping[str, Any] | None,
                               opts: CallOptions | None = None) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        logger.debug("dropped %s: a JSON answer carries no request-scoped messages", method)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        return None
