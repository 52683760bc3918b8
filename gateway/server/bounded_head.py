"""uvicorn's httptools protocol, with a bound on what a request may send before its headers end.

The envelope refuses headers past 32 KB and targets past 16 KB (`gateway.server.limits`), but only once the
parser has handed it a whole request head. httptools joins the pieces of one long header value (and uvicorn
those of one long target) with `bytes +=`, which copies everything so far for each piece: one 128 MB header
held the event loop, and so every other caller, for over 20 seconds before the envelope could say 431
(`python -m bench.stall --only headers_big`). h11 has a bound of its own (`h11_max_incomplete_event_size`) but
costs more per request; so `gateway serve` runs this subclass of uvicorn's httptools protocol (passed as
`http=`, the way uvicorn takes a protocol class), which counts the bytes of a request head as they arrive and
answers 431 and closes the connection once they pass `HEAD_LIMIT`, far above any head the envelope would take
and far below one whose joining costs time.

It also bounds how long that may take. uvicorn arms its keep-alive timer only after an answer and drops it at a
request's first byte, so a connection that sends nothing, half a head, or a body slower than it announced was held
for ever (slowloris: every such connection a file descriptor, until the process has none left for its callers and
its upstreams). A request's head must be whole `HEAD_SECONDS` after the connection opens or the head's first byte
(else 408 and close; an idle connection that never sent a byte is closed), and its body `BODY_SECONDS` after its
head (else the connection is closed: the app reading it sees the client gone).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .api_errors import APIError, json_bytes

HEAD_LIMIT = 1024 * 1024
"""Bytes a connection may send before a request's headers end (the envelope takes 32 KB of headers)."""
HEAD_SECONDS = 30.0
"""Seconds from a connection's opening (or a head's first byte) to the end of the request's head."""
BODY_SECONDS = 60.0
"""Seconds from the end of a request's head to the end of its body (2 MB at most: `gateway.server.limits`)."""


def server_options() -> dict[str, Any]:
    """What `uvicorn.run` / `uvicorn.Config` is given so that a request's head is bounded before it is parsed."""
    return {"http": BoundedHeadProtocol}


class BoundedHeadProtocol(HttpToolsProtocol):
    """Counts the bytes received while a request's head is incomplete; past `HEAD_LIMIT`, 431 and close. A client
    that pipelines the oversized head behind requests still being answered gets those answers whole first: the 431
    waits for the last of them (written at once, it would land inside an answer being written)."""

    head_bytes = 0
    in_head = True
    refusing = False
    """The head passed the limit while earlier requests of the connection were still being answered."""
    due: float | None = None
    """When the head (or the body) being received is overdue, on the loop's clock; None between requests."""
    overdue: Any = None
    """What to do then: `head_overdue` or `body_overdue`."""
    timer: asyncio.TimerHandle | None = None
    """The connection's one timer. A deadline is kept as a number each phase writes (no timer armed and cancelled
    per request, which cost about 2% of a call's instructions): the timer wakes when the earliest deadline may have
    passed, acts if it has, and sleeps again until the next."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.loop_time = asyncio.get_running_loop().time
        self.expect(HEAD_SECONDS, self.head_overdue)
        self.timer = asyncio.get_running_loop().call_later(HEAD_SECONDS, self.check)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.refusing:
            return  # the rest of a head already refused
        if self.in_head:
            if self.due is None:  # a head's first bytes after an answer (uvicorn's keep-alive timer ends here)
                self.expect(HEAD_SECONDS, self.head_overdue)
            self.head_bytes += len(data)
            if self.head_bytes > HEAD_LIMIT:
                if self.answering():
                    self.refusing = True
                    self.transport.pause_reading()
                else:
                    self.refuse_head()
                return
        super().data_received(data)

    def answering(self) -> bool:
        """Whether an earlier request of this connection is still being answered (or waits its turn)."""
        return bool(self.pipeline) or (self.cycle is not None and not self.cycle.response_complete)

    def on_response_complete(self) -> None:
        super().on_response_complete()  # starts the next pipelined request, if any, and resumes reading
        if self.refusing:
            if self.answering():
                self.transport.pause_reading()
            else:
                self.refuse_head()

    def on_headers_complete(self) -> None:
        self.in_head = False
        self.expect(BODY_SECONDS, self.body_overdue)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self.due = None
        self.in_head, self.head_bytes = True, 0  # the next request on this connection starts its head
        super().on_message_complete()

    def expect(self, seconds: float, overdue: Any) -> None:
        self.due, self.overdue = self.loop_time() + seconds, overdue

    def check(self) -> None:
        """The timer: act on a deadline that has passed, then sleep until the next one may have."""
        self.timer = None
        if self.transport.is_closing():
            return
        now = self.loop_time()
        if self.due is not None and now >= self.due:
            overdue, self.due = self.overdue, None
            overdue()
            if self.transport.is_closing():
                return
        wait = self.due - now if self.due is not None else HEAD_SECONDS
        self.timer = asyncio.get_running_loop().call_later(max(wait, 0.001), self.check)

    def head_overdue(self) -> None:
        if self.refusing:
            return
        if self.answering():  # pipelined behind answers still being written: the wait is the gateway's
            self.expect(HEAD_SECONDS, self.head_overdue)
        elif self.head_bytes == 0:
            self.transport.close()  # never said anything: nothing to answer
        else:
            self.write_refusal(408, "Request Timeout", APIError(
                408, f"The request's head did not end within {HEAD_SECONDS:g} seconds.", code="request_timeout"))

    def body_overdue(self) -> None:
        # The app may be answering already: it learns the client is gone (and stops) rather than racing a 408.
        self.transport.close()

    def refuse_head(self) -> None:
        self.write_refusal(431, "Request Header Fields Too Large", APIError(
            431, f"The request's head (its target and headers) passed {HEAD_LIMIT:,} bytes before it ended; send "
            "fewer or smaller headers.", code="request_header_fields_too_large"))

    def write_refusal(self, status: int, reason: str, error: APIError) -> None:
        body = json_bytes(error.body())
        self.transport.write(f"HTTP/1.1 {status} {reason}\r\n".encode() + b"content-type: application/json\r\n"
                             b"connection: close\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        self.transport.close()
