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
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .api_errors import APIError, json_bytes

HEAD_LIMIT = 1024 * 1024
"""Bytes a connection may send before a request's headers end (the envelope takes 32 KB of headers)."""


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

    def data_received(self, data: bytes) -> None:
        if self.refusing:
            return  # the rest of a head already refused
        if self.in_head:
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
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self.in_head, self.head_bytes = True, 0  # the next request on this connection starts its head
        super().on_message_complete()

    def refuse_head(self) -> None:
        error = APIError(431, f"The request's head (its target and headers) passed {HEAD_LIMIT:,} bytes before it "
                              "ended; send fewer or smaller headers.", code="request_header_fields_too_large")
        body = json_bytes(error.body())
        self.transport.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
                             b"connection: close\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        self.transport.close()
