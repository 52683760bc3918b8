"""A raw socket server on 127.0.0.1 that records the bytes of each request and answers with given bytes:
the judge of what an HTTP client puts on the wire and of how it copes with answers real servers send."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

Answer = Callable[[bytes], bytes | None]  # request head -> raw response (None: hang up without answering)


class RawServer:
    """Answers each request on a connection with `answer(head)`; records heads, bodies and client ports."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[tuple[bytes, bytes, int]] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, address = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn, address[1]), daemon=True).start()

    def _serve(self, conn: socket.socket, port: int) -> None:
        buffer = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(buffer) < length:
                    buffer += conn.recv(65536)
                body, buffer = buffer[:length], buffer[length:]
                self.requests.append((head, body, port))
                raw = self.answer(head)
                if raw is None:
                    return
                try:
                    conn.sendall(raw)
                except OSError:  # the client hung up mid-answer (on purpose, in some tests)
                    return
                if b"connection: close" in raw.lower():
                    return

    def close(self) -> None:
        self._sock.close()


def raw_answer(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body
