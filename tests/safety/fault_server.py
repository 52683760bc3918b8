"""An upstream that misbehaves on purpose, on 127.0.0.1: hangs, resets, 500s, endless bodies, redirects."""

from __future__ import annotations

import json
import socket
import socketserver
import struct
import threading
from collections import Counter

SPEC = """\
openapi: 3.0.3
info: {title: Faulty, version: "1"}
servers: [{url: "http://127.0.0.1:1"}]
paths:
  /hang: {get: {operationId: hang, responses: {"200": {description: ok}}}}
  /reset: {get: {operationId: reset, responses: {"200": {description: ok}}}}
  /fail: {get: {operationId: fail, responses: {"200": {description: ok}}}}
  /endless: {get: {operationId: endless, responses: {"200": {description: ok}}}}
  /redirect: {get: {operationId: redirect, responses: {"200": {description: ok}}}}
  /ok: {get: {operationId: ok, responses: {"200": {description: ok}}}}
  /write:
    post:
      operationId: write
      requestBody:
        content: {application/json: {schema: {type: object, properties: {n: {type: integer}}}}}
      responses: {"201": {description: created}}
"""


class FaultServer:
    """`with FaultServer() as faults:` ... `faults.url`, `faults.hits["/fail"]`; `redirect_to` for /redirect."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.arrived: dict[str, threading.Event] = {}
        self.release = threading.Event()
        self.redirect_to = "http://localhost:1/"
        self._lock = threading.Lock()
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                outer._handle(self.request)

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        self._server.allow_reuse_address = True
        self._server.daemon_threads = True
        self._server.server_bind()
        self._server.server_activate()
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def arrival(self, path: str) -> threading.Event:
        with self._lock:
            return self.arrived.setdefault(path, threading.Event())

    def __enter__(self) -> FaultServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()

    def _handle(self, sock: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return
            data += chunk
        path = data.split(b" ", 2)[1].decode().split("?")[0]
        with self._lock:
            self.hits[path] += 1
        self.arrival(path).set()
        if path in ("/hang", "/write"):
            self.release.wait(60)  # until the test ends: the gateway must give up (or be cancelled) first
            return
        if path == "/reset":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()  # RST instead of an answer
            return
        if path == "/fail":
            self._send(sock, 500, json.dumps({"error": "boom"}).encode())
        elif path == "/redirect":
            self._send(sock, 302, b"", [("Location", self.redirect_to)])
        elif path == "/endless":
            self._endless(sock)
        else:
            self._send(sock, 200, json.dumps({"ok": True}).encode())

    @staticmethod
    def _send(sock: socket.socket, status: int, body: bytes, headers: list[tuple[str, str]] = ()) -> None:
        head = [f"HTTP/1.1 {status} X", "Content-Type: application/json", f"Content-Length: {len(body)}",
                "Connection: close", *(f"{k}: {v}" for k, v in headers)]
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)

    def _endless(self, sock: socket.socket) -> None:
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"x" * 8192
        framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
        try:
            while not self.release.is_set():
                sock.sendall(framed)
        except OSError:
            return  # the gateway stopped reading and closed: that is the point
