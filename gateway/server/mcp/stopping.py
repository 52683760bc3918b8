"""An MCP request cut because the instance stopped: answered with a JSON-RPC error that says so, and whether the
call was sent, instead of uvicorn's bare 500.

On SIGTERM uvicorn gives the requests in flight `gateway serve --graceful-timeout` seconds, then cancels their
tasks and answers each one not yet answered with a plain-text 500, which the official client turns into
"Server returned an error response": the caller cannot tell a stopped instance from a failed call, nor whether
the call reached the api. Here the door catches that cancellation first and answers 503 with a JSON-RPC error
(-32603, as a call the gateway cannot record: `answering._unrecorded`), its data `{"status": 503, "code":
"instance_stopped", "sent": ...}`. Its id is null: the door has not read the request's (the SDK clients put the
request's own id on an error answered with a non-2xx status, as the spec lets a server that could not read it).

Whether the call was sent is counted with `watch_sends` (each call whose audit row was written before sending).
It counts only what runs in the request's own task, which is where a session's `tools/call` and every stateless
request are answered (`inline`, `stateless`; both mark the scope with the result's `ResultAside`); a request the
SDK's session manager answers runs in the session's task, so for it the answer says it does not know.

A cancellation whose client already went away (the disconnect watch) is answered the same way, to nobody:
uvicorn drops what is sent on a closed connection, and the request envelope still counts it as a client that left
(499). The cancellation is raised again in every case.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
import mcp_types as types
from starlette.types import Receive, Scope, Send

from ...asgi import StatusWatch
from ...safety.audit import watch_sends
from .exchange import send_json
from .routing import ASIDE_SCOPE_KEY

logger = logging.getLogger("gateway.mcp")

DRAIN_SECONDS = 5.0
"""The most the app's shutdown waits for the MCP POSTs in flight: by then uvicorn has cut them (its graceful timeout
is over), so they only unwind (the audit row's write, the answer); a request stuck past this does not hold the
process."""

Sent = Literal["sent", "not sent", "unknown"]

_SAID: dict[Sent, str] = {
    "sent": "The call was sent and may have run upstream: check before repeating a write (its audit row says "
            "how it ended, or `running` when the instance stopped before writing it).",
    "not sent": "The call was not sent: nothing ran upstream, and it can be sent again (to another instance).",
    "unknown": "Whether the call was sent is not known here: its audit row says (none, or `running`, or its "
               "outcome).",
}


def stopped_answer(sent: Sent) -> bytes:
    """The JSON-RPC error a request cut by the stopping instance is answered with."""
    message = ("The gateway instance stopped before this request ended (it was shut down and its graceful "
               f"timeout, `gateway serve --graceful-timeout`, ran out). {_SAID[sent]}")
    error = {"code": types.INTERNAL_ERROR, "message": message,
             "data": {"status": 503, "code": "instance_stopped", "sent": sent}}
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": error}, separators=(",", ":")).encode()


class CutRequests:
    """The door's POSTs in flight: each one answered with `stopped_answer` when the stopping instance cuts it, and
    waited for (`drained`) by the app's lifespan, so that answer and the call's audit row are written before the
    process ends (uvicorn cancels the requests and goes straight on to the lifespan's shutdown: without the wait
    the process could end while a cut request is still unwinding, and its caller got a closed connection)."""

    __slots__ = ("_in_flight", "_idle")

    def __init__(self) -> None:
        self._in_flight = 0
        self._idle: anyio.Event | None = None

    async def answer(self, serve: Callable[[Any, Scope, Receive, Send], Awaitable[None]], about: Any, scope: Scope,
                     receive: Receive, send: Send) -> None:
        """`serve(about, scope, receive, send)` (the door's answer to one POST); if it is cancelled before it
        answered, answer the caller with `stopped_answer` first."""
        self._in_flight += 1
        watch = StatusWatch(send)
        try:
            with watch_sends() as sends:
                try:
                    await serve(about, scope, receive, watch)
                except anyio.get_cancelled_exc_class():
                    if watch.status == 0:  # nothing answered yet (once it has started, only the connection can end)
                        in_task = ASIDE_SCOPE_KEY in scope  # answered in this task: `sends` saw its call
                        sent: Sent = ("sent" if sends.count else "not sent") if in_task else "unknown"
                        with anyio.CancelScope(shield=True):  # this task is being cancelled: the answer must go
                            try:
                                await send_json(send, 503, stopped_answer(sent))
                            except Exception:  # noqa: BLE001 - the connection may be gone: the cancellation goes on
                                logger.debug("could not answer a request cut by the stopping instance", exc_info=True)
                    raise
        finally:
            self._in_flight -= 1
            if self._in_flight == 0 and self._idle is not None:
                self._idle.set()

    async def drained(self, limit: float = DRAIN_SECONDS) -> None:
        """Wait until no POST is in flight, at most `limit` seconds (for the app's lifespan, at its shutdown)."""
        if self._in_flight:
            self._idle = anyio.Event()
            with anyio.move_on_after(limit):
                await self._idle.wait()
