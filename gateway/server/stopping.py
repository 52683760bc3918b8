"""A request cut because the instance stopped: answered with an error that says so, and whether its call was sent,
instead of uvicorn's bare plain-text 500. What every door shares; each door shapes the answer (`cut_doors`: the
OpenAI-shaped error of the chat, Responses and direct doors; `mcp.stopping`: the MCP door's JSON-RPC error).

On SIGTERM uvicorn gives the requests in flight `gateway serve --graceful-timeout` seconds, then cancels their
tasks and answers each one not yet answered with a plain-text 500: the caller cannot tell a stopped instance from a
failed call, nor whether the call reached the api. `CutRequests` catches that cancellation first, has the door
answer it (503, code `instance_stopped`), and raises it again.

Whether a call was sent is counted with `watch_sends` (each call whose audit row was written before sending, in
the request's task and every task it starts: a chat's run too), so the answer and the call's audit row agree: a
call sent is `running` or cancelled-after-sending there, one not sent is cancelled-before-sending.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
from starlette.types import Receive, Scope, Send

from ..asgi import StatusWatch
from ..safety.audit import Sends, watch_sends

logger = logging.getLogger("gateway.server")

DRAIN_SECONDS = 5.0
"""The most the app's shutdown waits for the requests in flight: by then uvicorn has cut them (its graceful timeout
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


def stopped_message(sent: Sent) -> str:
    """What a request cut by the stopping instance is told (every door says the same)."""
    return ("The gateway instance stopped before this request ended (it was shut down and its graceful "
            f"timeout, `gateway serve --graceful-timeout`, ran out). {_SAID[sent]}")


AnswerCut = Callable[[Scope, Sends, StatusWatch, Send], Awaitable[None]]
"""A door's answer to a request cut by the stopping instance: (its scope, the calls it sent, the status it answered
so far (0: none), the connection's `send`). Called shielded, in the cancelled task."""


class CutRequests:
    """A door's requests in flight: each one answered by the door's `AnswerCut` when the stopping instance cuts it,
    and waited for (`drained`) by the app's lifespan, so that answer and the call's audit row are written before
    the process ends (uvicorn cancels the requests and goes straight on to the lifespan's shutdown: without the
    wait the process could end while a cut request is still unwinding, and its caller got a closed connection)."""

    __slots__ = ("_in_flight", "_idle", "_answer_cut")

    def __init__(self, answer_cut: AnswerCut) -> None:
        self._in_flight = 0
        self._idle: anyio.Event | None = None
        self._answer_cut = answer_cut

    async def answer(self, serve: Callable[[Any, Scope, Receive, Send], Awaitable[None]], about: Any, scope: Scope,
                     receive: Receive, send: Send) -> None:
        """`serve(about, scope, receive, send)` (the door's answer to one request); if it is cancelled, the door's
        `AnswerCut` answers the caller first (a method and its object, not a bound method or a closure: nothing
        made per request, no frame more than the door's own)."""
        self._in_flight += 1
        watch = StatusWatch(send)
        try:
            with watch_sends() as sends:
                try:
                    await serve(about, scope, receive, watch)
                except anyio.get_cancelled_exc_class():
                    with anyio.CancelScope(shield=True):  # this task is being cancelled: the answer must go
                        try:
                            await self._answer_cut(scope, sends, watch, send)
                        except Exception:  # noqa: BLE001 - the connection may be gone: the cancellation goes on
                            logger.debug("could not answer a request cut by the stopping instance", exc_info=True)
                    raise
        finally:
            self._in_flight -= 1
            if self._in_flight == 0 and self._idle is not None:
                self._idle.set()

    async def drained(self, limit: float = DRAIN_SECONDS) -> None:
        """Wait until no request is in flight, at most `limit` seconds (for the app's lifespan, at its shutdown)."""
        if self._in_flight:
            self._idle = anyio.Event()
            with anyio.move_on_after(limit):
                await self._idle.wait()
