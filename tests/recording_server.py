"""A real HTTP server on 127.0.0.1 that records every request it receives and answers as scripted.

Used by the executor's tests and the corpus judge: what arrives here is exactly what went on the wire.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit


@dataclass
class Recorded:
    method: str
    target: str
    """The raw request target (path and query, exactly as sent)."""
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def raw_query(self) -> str:
        return urlsplit(self.target).query

    @property
    def query(self) -> list[tuple[str, str]]:
        return parse_qsl(self.raw_query, keep_blank_values=True)

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None

    def header_names(self) -> set[str]:
        return {key.lower() for key, _ in self.headers}

    @property
    def cookies(self) -> dict[str, str]:
        raw = self.header("cookie") or ""
        pairs = [p.strip().split("=", 1) for p in raw.split(";") if "=" in p]
        return {k: unquote(v) for k, v in pairs}

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    status: int = 200
    body: bytes | str | Any = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    endless: bool = False
    """Stream chunks forever (until the client goes away)."""
    trickle: float = 0.0
    """With `endless`: a small chunk every this many seconds instead of big ones back to back."""


Responder = Callable[[Recorded], Reply]


class RecordingServer:
    """`with RecordingServer() as server:` ... `server.url`, `server.requests`, `server.route(prefix, fn)`."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.requests: list[Recorded] = []
        self.routes: list[tuple[str, Responder]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self._server.server_address[1]}"

    def route(self, prefix: str, responder: Responder | Reply) -> None:
        """Answer requests whose path starts with `prefix` (latest route wins)."""
        fn = responder if callable(responder) else (lambda _r, reply=responder: reply)
        self.routes.insert(0, (prefix, fn))

    def reply_for(self, request: Recorded) -> Reply:
        for prefix, fn in self.routes:
            if request.path.startswith(prefix):
                return fn(request)
        return Reply(200, {"ok": True})

    def record(self, request: Recorded) -> None:
        with self._lock:
            self.requests.append(request)

    @property
    def last(self) -> Recorded:
        return self.requests[-1]

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    def __enter__(self) -> RecordingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler_for(server: RecordingServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # header and body are separate writes: avoid 40 ms delayed-ACK stalls

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _handle(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            request = Recorded(self.command, self.path, list(self.headers.items()), body)
            server.record(request)
            reply = server.reply_for(request)
            if reply.delay:
                time.sleep(reply.delay)
            payload = reply.body
            headers = dict(reply.headers)
            if not isinstance(payload, (bytes, str)):
                payload = json.dumps(payload)
                headers.setdefault("Content-Type", "application/json")
            if isinstance(payload, str):
                payload = payload.encode("utf-8")
                headers.setdefault("Content-Type", "text/plain; charset=utf-8")
            self.send_response(reply.status)
            for key, value in headers.items():
                self.send_header(key, value)
            if reply.endless:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chunk = b"x" * (16 if reply.trickle else 65536)
                try:
                    while True:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        if reply.trickle:
                            self.wfile.flush()
                            time.sleep(reply.trickle)
                except OSError:
                    self.close_connection = True
                return
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                try:
                    self.wfile.write(payload)
                except OSError:
                    self.close_connection = True

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle

    return Handler
