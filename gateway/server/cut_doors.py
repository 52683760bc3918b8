"""The chat, Responses and direct doors' answer to a request cut by the stopping instance (`stopping`): a 503 with
the OpenAI-shaped error, code `instance_stopped`, and `gateway: {"sent", "may_have_run"}` beside it, where uvicorn
answered a bare plain-text 500. A streamed chat, whose 200 is sent already, gets the same error as its last event
(`{"error": {...}}` then `[DONE]`, as every streamed failure comes: `chat.streamed_error`), which the `openai` SDK
raises from its stream.

Whether a tool call was sent is `watch_sends`'s count over the request's task and the tasks it starts (a chat's
run), the same count the MCP door answers with; the call's audit row, written before sending, agrees.
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..asgi import StatusWatch, send_json
from ..safety.audit import Sends
from .api_errors import APIError, json_bytes
from .chat import sse, streamed_error
from .stopping import CutRequests, Sent, stopped_message


def stopped_error(sent: Sent) -> APIError:
    """The OpenAI-shaped error a request cut by the stopping instance is answered with."""
    return APIError(503, stopped_message(sent), code="instance_stopped",
                    extra={"gateway": {"sent": sent, "may_have_run": sent == "sent"}})


class _StreamWatch(StatusWatch):
    """A streamed answer's `send`: whether it is an event stream whose body has not ended (then the cut's error can
    still go in it)."""

    __slots__ = ("open_stream",)

    def __init__(self, send: Send) -> None:
        super().__init__(send)
        self.open_stream = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.open_stream = any(name == b"content-type" and value.startswith(b"text/event-stream")
                                   for name, value in message.get("headers", ()))
        elif not message.get("more_body", False):
            self.open_stream = False
        await super().__call__(message)


async def _answer_cut(scope: Scope, sends: Sends, watch: StatusWatch, send: Send) -> None:
    sent: Sent = "sent" if sends.count else "not sent"  # these doors answer in the request's task
    if watch.status == 0:
        await send_json(send, 503, json_bytes(stopped_error(sent).body()))
    elif isinstance(send, _StreamWatch) and send.open_stream:
        tail = sse(streamed_error(stopped_error(sent))) + b"data: [DONE]\n\n"
        await send({"type": "http.response.body", "body": tail, "more_body": False})


def http_cut_requests() -> CutRequests:
    """The HTTP doors' requests in flight (one for all of them: the app's lifespan waits for it once)."""
    return CutRequests(_answer_cut)


class CutDoor:
    """A door's ASGI app (a `Route`'s endpoint) whose requests cut by the stopping instance are answered so;
    `streams`: its answer may be an event stream (the chat door)."""

    __slots__ = ("app", "_serve", "cut", "streams")

    def __init__(self, app: ASGIApp, cut: CutRequests, *, streams: bool = False) -> None:
        self.app = app
        # The app's own method, called with the app (`CutRequests.answer`'s `serve` and `about`): no frame of a
        # bound method or closure between this door and the app on every call.
        self._serve: Any = type(app).__call__
        self.cut = cut
        self.streams = streams

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.cut.answer(self._serve, self.app, scope, receive, _StreamWatch(send) if self.streams else send)
