"""A real server on 127.0.0.1 that answers every request with a chunked body that never ends: `beat` again and
again (an SSE comment, a blank line, an empty delta), as a hostile model server keeps a stream open."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def endless(media: str, beat: bytes, every: float = 0.02) -> Iterator[str]:
    """A server that answers every request with `media` headers, then `beat` every `every` seconds, for ever."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: {media}\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
            try:
                while not stop.is_set():
                    conn.sendall(b"%x\r\n%s\r\n" % (len(beat), beat))
                    time.sleep(every)
            except OSError:
                return

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()
