"""A request cut because the instance stopped: answered with an error that says so, and whether its call was sent,
instead of uvicorn's bare plain-text 500. What every door shares; each door shapes the answer (`cut_doors`: the
OpenAI-shaped error of the chat, Responses and direct doors; `mcp.stopping`: the MCP door's JSON-RPC error).

On SIGTERM uvicorn gives the requests in flight `gateway serve --graceful-timeout` seconds, then cancels their
tasks and answers each one not yet answered with a plain-text 500: the caller cannot tell a stopped instance from a
failed call, nor whether the call reached the api. The request envelope (`gateway.server.envelope`), which holds
every request's frame and watches its answer's status already, catches that cancellation first, has the door
answer it (`CutRequests.answer`: 503, code `instance_stopped`), and raises it again. A door says it answers so by
putting its `AnswerCut` in the scope (`CUT_KEY`): nothing is wrapped around its requests, no frame and no second
status watch on the way of every call.

Whether a call was sent is counted with `watch_sends` (each call whose audit row was written before sending, in
the task that enters it and every task that task starts: a chat's run too), entered by a door only around the work
that can send a call (an MCP `tools/call`, a chat's or Responses request's run, a delegation on the direct door),
and put in the scope (`SENDS_KEY`); the direct door's one api call says it itself (`AgentCall.sent`, set where its
row is written before sending), and the door puts the call there instead: nothing in the scope means nothing was
sent. So the answer and the call's audit
row agree: a call sent is `running` or cancelled-after-sending there, one not sent is cancelled-before-sending.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
from starlette.types import Scope, Send

from ..kernel.calls import AgentCall
from ..safety.audit import Sends

logger = logging.getLogger("gateway.server")

DRAIN_SECONDS = 5.0
"""The most the app's shutdown waits for the requests in flight: by then uvicorn has cut them (its graceful timeout
is over), so they only unwind (the audit row's write, the answer); a request stuck past this does not hold the
process."""

CUT_KEY = "gateway.cut"
"""The scope's key of the door's `AnswerCut` (set by a door that answers a cut request itself)."""
SENDS_KEY = "gateway.sends"
"""The scope's key of the `Sends` a door entered around the work that can send a call, or of the one call it runs
(an `AgentCall`, whose `sent` says); absent: none sent."""

STREAM_TAIL_KEY = "gateway.stream_tail"
"""The scope's key of a streamed answer's own last events for a cut (`(sent) -> bytes`: the Responses door's
`response.failed`); absent: a streamed chat's error event."""

RUN_KEY = "gateway.run"
"""The scope's key of a chat's or Responses request's run (`chat._Run`), or of the run an approval's decision
resumes (`cut_doors.ResumeCut`): one the stopping instance cuts gets its chat row (`record_stopped(sent)`), which
its loop, never returning, does not write."""

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


def stopped_run_error(sent: int) -> str:
    """The error of a run's chat row when the stopping instance cut it (`sent`: how many of its tool calls were sent;
    each has its own row under the run's id)."""
    calls = "no tool call was sent" if not sent else \
        f"{sent} tool call{'s were' if sent > 1 else ' was'} sent (their rows, under this run's id, say how each " \
        "ended)"
    return f"The gateway instance stopped before the run ended: {calls}."


def sent_in(scope: Scope) -> Sent:
    """Whether the request's work sent a call, by the `Sends` its door put in the scope, or the one call it holds
    (`AgentCall.sent`: the direct door's); none: nothing could be."""
    sends: Any = scope.get(SENDS_KEY)
    if isinstance(sends, AgentCall):
        return "sent" if sends.sent else "not sent"
    return "sent" if isinstance(sends, Sends) and sends.count else "not sent"


AnswerCut = Callable[[Scope, int, Send], Awaitable[None]]
"""A door's answer to a request cut by the stopping instance: (its scope, the status it answered so far (0: none),
the connection's `send`). Called shielded, in the cancelled task, by the request envelope."""


class CutRequests:
    """The POSTs in flight (the request envelope counts them: `in_flight`), each answered by its door's `AnswerCut`
    when the stopping instance cuts it, and waited for (`drained`) by the app's lifespan, so that answer and the
    call's audit row are written before the process ends (uvicorn cancels the requests and goes straight on to the
    lifespan's shutdown: without the wait the process could end while a cut request is still unwinding, and its
    caller got a closed connection)."""

    __slots__ = ("in_flight", "idle")

    def __init__(self) -> None:
        self.in_flight = 0
        self.idle: anyio.Event | None = None
        """Set by the envelope when `in_flight` falls to 0 while `drained` waits."""

    @staticmethod
    async def answer(scope: Scope, status: int, send: Send) -> None:
        """Answer a request the stopping instance cut by its door's `AnswerCut` (none: the door says nothing, and
        uvicorn's answer stands), shielded (this task is being cancelled: the answer must go)."""
        answer_cut: Any = scope.get(CUT_KEY)
        if answer_cut is None:
            return
        with anyio.CancelScope(shield=True):
            try:
                await answer_cut(scope, status, send)
            except Exception:  # noqa: BLE001 - the connection may be gone: the cancellation goes on
                logger.debug("could not answer a request cut by the stopping instance", exc_info=True)

    async def drained(self, limit: float = DRAIN_SECONDS) -> None:
        """Wait until no request is in flight, at most `limit` seconds (for the app's lifespan, at its shutdown)."""
        if self.in_flight:
            self.idle = anyio.Event()
            with anyio.move_on_after(limit):
                await self.idle.wait()
