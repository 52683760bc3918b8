"""A TCP proxy on 127.0.0.1 in front of a real server, that can stop answering: a hung server as its clients meet it
behind a load balancer (the connection is accepted, nothing ever comes back), or one whose replies are late.

`silence()`: from then on, every byte either way is swallowed, on the connections open before and on new ones (they
are accepted and never reach the server). `hold()`: on the connections open then, what clients send still reaches
the server and its replies are kept back until `speak()` (connections opened later work as usual: a reply that is
late, not a server that is gone). `refuse()`: a server that is down: the port stops listening (connections are
refused) and the connections open then are closed. `speak()` sends held replies on, ends a silence (what was
swallowed stays lost: those clients have given up on those connections) and listens again after a refusal.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from shared_servers import free_port

OPEN, SILENT, HELD, REFUSED = "open", "silent", "held", "refused"


class QuietProxy:
    def __init__(self, port: int) -> None:
        """A proxy to 127.0.0.1:`port`, on a free port of its own (`self.port`)."""
        self.target = port
        self.port = free_port()
        self.mode = OPEN
        self.unheard = bytearray()
        """What clients sent while the proxy was silent (how often a client asked)."""
        self.unheard_connections = 0
        """Connections made while the proxy was silent (a client trying again on a new one)."""
        self.accepted = 0
        """Connections clients opened through the proxy, in any mode."""
        self._loop = asyncio.new_event_loop()
        self._spoke: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def silence(self) -> None:
        self._set(SILENT)

    def hold(self) -> None:
        self._set(HELD)

    def speak(self) -> None:
        if self.mode == REFUSED:
            asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(10)
        self._set(OPEN)

    def refuse(self) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for writer in list(self._writers):
                writer.close()
            self.mode = REFUSED

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)

    def _set(self, mode: str) -> None:
        def change() -> None:
            self.mode = mode
            assert self._spoke is not None
            if mode == OPEN:
                self._spoke.set()
            else:
                self._spoke.clear()
        self._loop.call_soon_threadsafe(change)

    @contextmanager
    def running(self) -> Iterator[QuietProxy]:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(10)
        try:
            yield self
        finally:
            self._loop.call_soon_threadsafe(lambda: self._server.close() if self._server else None)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    async def _serve(self) -> None:
        self._spoke = asyncio.Event()
        self._spoke.set()
        self._server = await asyncio.start_server(self._accepted, "127.0.0.1", self.port)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self.mode == SILENT:  # accepted, never answered: read and drop until the client gives up
            self.unheard_connections += 1
            while data := await reader.read(65536):
                self.unheard += data
            writer.close()
            return
        opened_while_held = self.mode == HELD
        to_reader, to_writer = await asyncio.open_connection("127.0.0.1", self.target)
        self._writers.update((writer, to_writer))
        await asyncio.gather(self._pump(reader, to_writer, replies=False),
                             self._pump(to_reader, writer, replies=not opened_while_held), return_exceptions=True)
        for w in (writer, to_writer):
            w.close()
            self._writers.discard(w)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, replies: bool) -> None:
        """Bytes from `reader` to `writer`; `replies`: the server's, kept back while the proxy holds."""
        assert self._spoke is not None
        while data := await reader.read(65536):
            if self.mode == SILENT:
                if not replies:
                    self.unheard += data
                continue
            if replies and self.mode == HELD:
                await self._spoke.wait()
            writer.write(data)
            await writer.drain()
        writer.close()
