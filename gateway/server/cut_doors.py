"""The chat, Responses and direct doors' answer to a request cut by the stopping instance (`stopping`): a 503 with
the OpenAI-shaped error, code `instance_stopped`, and `gateway: {"sent", "may_have_run"}` beside it, where uvicorn
answered a bare plain-text 500. A streamed answer, whose 200 is sent already, ends with its own failure: a streamed
chat gets the same error as its last event (`{"error": {...}}` then `[DONE]`, as every streamed failure comes:
`chat.streamed_error`), which the `openai` SDK raises from its stream; a streamed Responses request gets the
Responses API's `response.failed` (`responses.cut_tail`), its Response `failed` with the error in it.

A chat's or Responses request's run cut so gets its chat row in the audit (status `stopped`, how many of its tool
calls were sent: `chat._Run.record_stopped`), which its loop, never returning, does not write. So does a run an
approval's decision resumes (`POST /approvals/{id}` and the console's approve button: a `ResumeDoor`, the `CutDoor`
whose `ResumeCut` holds the resumed run), whose decider gets the same 503.

Whether a tool call was sent is `watch_sends`'s count over the work that can send one (the direct call's pipeline;
a chat's or Responses request's handler and the run it starts), the same count the MCP door answers with; the
call's audit row, written before sending, agrees.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..asgi import send_json
from ..kernel.caller import bind_caller
from ..safety.approvals import run_owner
from ..safety.audit import watch_sends
from .api_errors import APIError, json_bytes
from .chat import sse, streamed_error
from .stopping import CUT_KEY, RUN_KEY, SENDS_KEY, STREAM_TAIL_KEY, Sent, sent_in, stopped_message, stopped_run_error

if TYPE_CHECKING:
    from ..safety.audit import AuditLog
    from ..store import RunRecord


def stopped_error(sent: Sent) -> APIError:
    """The OpenAI-shaped error a request cut by the stopping instance is answered with."""
    return APIError(503, stopped_message(sent), code="instance_stopped",
                    extra={"gateway": {"sent": sent, "may_have_run": sent == "sent"}})


async def answer_cut(scope: Scope, status: int, send: Send) -> None:
    """The direct call's (and an unstreamed chat's or Responses request's) answer to a cut: the 503, unless the
    answer began (then only the connection can end)."""
    if status == 0:
        await send_json(send, 503, json_bytes(stopped_error(sent_in(scope)).body()))


def _chat_tail(sent: Sent) -> bytes:
    return sse(streamed_error(stopped_error(sent))) + b"data: [DONE]\n\n"


class _StreamWatch:
    """A streaming door's `send` for one request: whether it is an event stream whose body has not ended (then the
    cut's answer can still go in it), and the door's answer to a cut (`answer_cut`, put in the scope)."""

    __slots__ = ("send", "open_stream")

    def __init__(self, send: Send) -> None:
        self.send = send
        self.open_stream = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.open_stream = any(name == b"content-type" and value.startswith(b"text/event-stream")
                                   for name, value in message.get("headers", ()))
        elif not message.get("more_body", False):
            self.open_stream = False
        await self.send(message)

    async def answer_cut(self, scope: Scope, status: int, send: Send) -> None:
        sent = sent_in(scope)
        try:
            if status == 0:
                await send_json(send, 503, json_bytes(stopped_error(sent).body()))
            elif self.open_stream:
                tail: Callable[[Sent], bytes] = scope.get(STREAM_TAIL_KEY) or _chat_tail
                await send({"type": "http.response.body", "body": tail(sent), "more_body": False})
        finally:  # the caller first; then the chat's row, also when the answer could not go
            run: Any = scope.get(RUN_KEY)
            if run is not None:
                sends: Any = scope.get(SENDS_KEY)
                await run.record_stopped(sends.count if sends is not None else 0)


class CutDoor:
    """The chat and Responses doors' ASGI app (a `Route`'s endpoint), whose requests cut by the stopping instance
    are answered so (`stopping`: the request envelope calls the answer the door puts in the scope); the calls their
    runs send are counted (`watch_sends`, entered before the run's tasks start, which inherit it)."""

    __slots__ = ("app", "_serve")

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        # The app's own method, called with the app: no frame of a bound method or closure between this door and
        # the app.
        self._serve: Any = type(app).__call__

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watch = _StreamWatch(send)
        scope[CUT_KEY] = watch.answer_cut
        with watch_sends() as sends:
            scope[SENDS_KEY] = sends
            await self._serve(self.app, scope, receive, watch)


class ResumeCut:
    """The chat run an approval's decision resumes, for `stopping`: `ResumeDoor` puts it in the scope (`RUN_KEY`)
    and makes it the current one for the decision's work, which tells it when the run's loop goes on
    (`resume_begins`) and when its row is written (`resume_recorded`); a resume the stopping instance cuts in
    between gets its chat row, status `stopped`, as a chat request's run does (the resumed loop, never returning,
    writes none). Carried as `watch_sends` carries its count, in a context variable: the safety layer's deciding
    and resuming functions pass nothing along for it, and a decision taken without a door (`gateway approvals
    approve`) finds none."""

    __slots__ = ("audit", "run", "started", "_token")

    def __init__(self) -> None:
        self.audit: AuditLog | None = None
        self.run: RunRecord | None = None
        self.started = 0.0
        self._token: Token[ResumeCut | None] | None = None

    def __enter__(self) -> ResumeCut:
        self._token = _resuming.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _resuming.reset(self._token)
            self._token = None

    async def record_stopped(self, sent: int) -> None:
        run, self.run = self.run, None
        if run is None or self.audit is None:
            return
        with bind_caller(client=run.client, **run_owner(run)):  # the run's owner's row, as its other rows are
            await self.audit.record_chat(agent=run.agent, status="stopped", run_id=run.id, client=run.client,
                                         latency_ms=(time.perf_counter() - self.started) * 1000,
                                         error=stopped_run_error(sent))


_resuming: ContextVar[ResumeCut | None] = ContextVar("gateway_resume_cut", default=None)


def resume_begins(run: RunRecord, audit: AuditLog) -> None:
    """The chat run an approval's decision resumes goes on: the door's `ResumeCut` (none: no door, no cut to
    answer) holds it until its row is written by `audit` (`resume_recorded`)."""
    cut = _resuming.get()
    if cut is not None:
        cut.audit, cut.run, cut.started = audit, run, time.perf_counter()


def resume_recorded() -> None:
    """The resumed run's row is written: a cut from now on writes none."""
    cut = _resuming.get()
    if cut is not None:
        cut.run = None


class ResumeDoor(CutDoor):
    """An approval's decision, on the API (`POST /approvals/{id}`) and the console's form alike: a `CutDoor` (its
    cut answered with the 503, whose OpenAI-shaped error the console's script shows as it shows its own errors)
    whose resumed chat run, cut by the stopping instance, gets its `stopped` row (`ResumeCut`)."""

    __slots__ = ()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        with ResumeCut() as cut:
            scope[RUN_KEY] = cut
            await CutDoor.__call__(self, scope, receive, send)
