"""The request envelope: what every HTTP request of the gateway goes through before routing, in one middleware.

In order, for each request:

1. the caller's `traceparent` is continued (the request runs in the caller's trace; `gateway.kernel.tracing`);
2. headers past the limits are refused with 431, a path and query past theirs with 414 (`gateway.server.limits`);
3. a foreign `Host`, a cross-site `Origin` or a body that is not JSON is refused (`gateway.server.hosts`);
4. a body over the size limit is refused with 413 (`gateway.server.limits`): a declared `Content-Length` before
   the body is read, a chunked body once it passes the limit; the MCP door keeps its own limit;
5. with `watch` (the safety layer asks for it), a POST whose client goes away is cancelled
   (`gateway.server.disconnect`); a POST the stopping instance cuts is answered by its door (`gateway.server.stopping`);
6. after the answer, the request is counted by door and status (`/metrics`; 499 when its client left first) and
   its access line is written on the event loop's next turn (`gateway.server.accesslog`).

One layer rather than one middleware per concern: every request scans its headers once, watches its answer's
status once (the disconnect watch's `send` keeps it), and every suspension of a request (the upstream call of a
tool) resumes one frame here, not six.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from itertools import chain
from typing import TYPE_CHECKING

from opentelemetry import context as otel_context
from opentelemetry import propagate
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..asgi import StatusWatch
from ..kernel import tracing
from ..observe.metrics import door_of
from .accesslog import log_access
from .api_errors import APIError
from .disconnect import DisconnectWatch, Watched
from .hosts import PolicySource, refusal
from .limits import MAX_HEADER_BYTES, MAX_HEADERS, MAX_TARGET_BYTES, BodyTooLarge, HeadersTooLarge, TargetTooLong
from .stopping import CutRequests

if TYPE_CHECKING:
    from ..observe.metrics import Metrics


_TRACE = frozenset({b"traceparent", b"tracestate"})
CLIENT_LEFT = 499
"""The status a request is counted with (`/metrics`) when its client went away before the answer (nginx's code)."""


class RequestEnvelope:
    def __init__(self, app: ASGIApp, *, policy: PolicySource, max_body_bytes: int,
                 metrics: Metrics | None, access_log: logging.Logger | None = None,
                 exempt_prefixes: tuple[str, ...] = ("/mcp/",), watch: DisconnectWatch | None = None,
                 cut: CutRequests | None = None) -> None:
        """Parameters:
            app: the routed app.
            policy: the current `HostPolicy` (`policy.current`: a reload of agents.yaml replaces it).
            max_body_bytes: a request with a larger body gets 413.
            metrics: the gateway's `Metrics`, kept across reloads (None: nothing is counted).
            access_log: the logger of the access lines (`gateway.access`); None: no access log.
            exempt_prefixes: paths whose body limit is their own (the MCP transport answers in JSON-RPC's shape).
            watch: cancel a POST whose client goes away (`DisconnectWatch`); None: no watch.
            cut: the POSTs in flight, for the app's lifespan to wait for; each one the stopping instance cuts is
                answered by its door (`gateway.server.stopping`). None: counted here only.
        """
        self.app = app
        self.policy = policy
        self.max_body_bytes = max_body_bytes
        self.metrics = metrics
        self.access_log = access_log
        self.exempt_prefixes = exempt_prefixes
        self.watch = watch
        self.cut = cut if cut is not None else CutRequests()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw_headers = scope["headers"]
        # The headers' size and the few read here, without a Python step per header (the last of a repeated
        # header counts, as it did when they were read one by one).
        header_bytes = sum(map(len, chain.from_iterable(raw_headers)))
        headers = dict(raw_headers)
        length: int | None = None
        has_body = chunked = b"transfer-encoding" in headers
        value = headers.get(b"content-length")
        if value is not None:
            has_body = has_body or value.strip() not in (b"0", b"")
            try:
                length = int(value)
            except ValueError:
                length = None  # unreadable: what arrives is counted
        token = None
        if (b"traceparent" in headers or b"tracestate" in headers) and tracing.enabled():
            trace_headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in headers.items()
                             if name in _TRACE}
            token = otel_context.attach(propagate.extract(trace_headers))
        watched: Watched | None = None
        watch: StatusWatch | Watched | None = None
        left = False
        try:
            error: APIError | None = _oversized(scope, header_bytes) or refusal(
                self.policy.current, scope["method"], headers.get(b"host"), headers.get(b"origin"),
                headers.get(b"content-type"), has_body=has_body)
            counted = False
            if error is None and not scope["path"].startswith(self.exempt_prefixes):
                if length is None or chunked:  # no length to trust: what arrives is counted
                    receive = _counting(receive, self.max_body_bytes)
                    counted = True
                elif length > self.max_body_bytes:  # the server reads no more than a declared length
                    error = BodyTooLarge(self.max_body_bytes)
            if error is not None:
                watch = StatusWatch(send)
                await error.response()(scope, receive, watch)
                return
            if scope["method"] != "POST":
                watch = StatusWatch(send)
                await self._app(scope, receive, watch, watch, counted)
                return
            # A POST: counted in flight, and answered by its door if the stopping instance cuts it (`stopping`).
            app_send: Send
            if self.watch is None:
                watch = app_send = StatusWatch(send)
            else:  # the disconnect watch, in this layer's frame: its `send` keeps the status too (no second wrapper)
                watch = watched = self.watch.start(receive, send)
                receive, app_send = watched.receive, watched.send
            cut = self.cut
            cut.in_flight += 1
            try:
                await self._app(scope, receive, app_send, watch, counted)
            except asyncio.CancelledError:
                if watched is not None and watched.ended_by_us():
                    left = True
                    return  # the client left and the watch cancelled the request: it just ends
                # Cut by the stopping instance (uvicorn's graceful timeout ran out): the door tells its caller so,
                # through the status watch (counted and logged as what it is), before the cancellation goes on.
                await cut.answer(scope, watch.status, app_send)
                raise
            finally:
                if watched is not None:
                    watched.end()
                cut.in_flight -= 1
                if cut.idle is not None and not cut.in_flight:
                    cut.idle.set()
            if watched is not None:
                watched.settle()
        finally:
            # A client that left has no answer, whatever the app sent after.
            status = watch.status if watch is not None and not left else 0
            metrics = self.metrics
            if metrics is not None:
                # A client that left is no fault of the gateway's: counted as nginx does (499), not as a 500 that
                # would page the operator; 500: the request raised unanswered.
                metrics.count_request(door_of(scope["path"]), status or (CLIENT_LEFT if left else 500))
            if self.access_log is not None:  # `log_access` asks whether the logger is enabled (once per line)
                asyncio.get_running_loop().call_soon(log_access, self.access_log, scope, status)
            if token is not None:
                otel_context.detach(token)

    def _app(self, scope: Scope, receive: Receive, send: Send, watch: StatusWatch | Watched,
             counted: bool) -> Awaitable[None]:
        """The routed app's coroutine (no frame of this method's waits for it); a counted body past the limit is
        answered 413 unless the answer began."""
        if not counted:
            return self.app(scope, receive, send)
        return _refuse_too_large(self.app(scope, receive, send), scope, receive, send, watch)


async def _refuse_too_large(app: Awaitable[None], scope: Scope, receive: Receive, send: Send,
                            watch: StatusWatch | Watched) -> None:
    try:
        await app
    except BodyTooLarge as exc:
        if watch.status == 0:  # nothing answered yet
            await exc.response()(scope, receive, send)


def _counting(receive: Receive, limit: int) -> Receive:
    """`receive` for a body of no declared length (chunked): counted as it arrives, `BodyTooLarge` past `limit`."""
    received = 0

    async def counting_receive() -> Message:
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > limit:
                raise BodyTooLarge(limit)
        return message

    return counting_receive


def _oversized(scope: Scope, header_bytes: int) -> APIError | None:
    """431 or 414 for a request whose headers or target pass the limits."""
    count = len(scope["headers"])
    if count > MAX_HEADERS or header_bytes > MAX_HEADER_BYTES:
        return HeadersTooLarge(count, header_bytes)
    target = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
    if target > MAX_TARGET_BYTES:
        return TargetTooLong(target)
    return None
