"""uvicorn's HTTP protocol (httptools), writing each response's head and body to the socket together.

uvicorn writes the status line and headers as soon as the app sends `http.response.start`, and the body when
it sends `http.response.body`: two `send` system calls and two TCP segments for every answer, though Starlette
sends both messages one right after the other. `CoalescingTransport` holds what is written during one turn of
the event loop and hands it to the real transport at the end of that turn (or before closing), so a response
leaves in one write. Nothing waits longer than the current turn: a streamed response's chunks still go out as
they are sent, and a finished response goes out the moment its last byte is sent (the app's return through its
middleware and uvicorn's bookkeeping are no reason for the client to wait; nor is its access line, logged on the
next turn). `http_protocol()` is the protocol class `gateway serve` gives uvicorn.
"""

from __future__ import annotations

import asyncio
from typing import Any


class CoalescingTransport:
    """A transport whose writes within one event-loop turn reach the real transport as one write."""

    __slots__ = ("_transport", "_loop", "_pending")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        pending = self._pending
        if pending is None:
            self._pending = [bytes(data)]
            self._loop.call_soon(self.flush)
        else:
            pending.append(bytes(data))

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def flush(self) -> None:
        """Hand what is held to the real transport (at the end of the turn, or before closing)."""
        pending = self._pending
        if pending is None:
            return
        self._pending = None
        if not self._transport.is_closing():
            self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def __getattr__(self, name: str) -> Any:
        # Everything else (is_closing, get_extra_info, pause_reading, abort, set_protocol, ...) is the real one's.
        return getattr(self._transport, name)


def http_protocol() -> type[asyncio.Protocol] | str:
    """uvicorn's httptools protocol writing through a `CoalescingTransport` ("auto" without httptools)."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is not installed: uvicorn's own choice (h11)
        return "auto"

    from .accesslog import AfterResponseLogger

    class CoalescingHttpToolsProtocol(HttpToolsProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # The access line is made and written after the answer has left (gateway.server.accesslog).
            self.access_logger = AfterResponseLogger(self.access_logger, self.loop)  # type: ignore[assignment]

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            # uvicorn's flow control keeps the real transport (pausing reads); writes go through the wrapper.
            self.transport = CoalescingTransport(transport, self.loop)  # type: ignore[assignment]

        def on_response_complete(self) -> None:
            # Called by uvicorn right after the last body write: the whole answer leaves now, not at the end of
            # the turn, after everything the app still runs on its way out.
            transport = self.transport
            if isinstance(transport, CoalescingTransport):
                transport.flush()
            super().on_response_complete()

    return CoalescingHttpToolsProtocol
