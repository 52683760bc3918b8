from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpcore
import httpx
import pytest

from gateway._netbackend import FastBackend, fast_transport

pytestmark = pytest.mark.anyio


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so the pool reuses connections

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        body = f"{self.path} on {self.client_address[1]}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if self.path == "/then-hang-up":
            self.close_connection = True  # closes the socket without saying so in a header

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_the_transport_uses_the_fast_backend() -> None:
    pool = fast_transport()._pool
    assert isinstance(pool, httpcore.AsyncConnectionPool)
    assert isinstance(pool._network_backend, FastBackend)


async def test_connections_are_reused_and_a_server_hang_up_is_noticed(server: str) -> None:
    async with httpx.AsyncClient(transport=fast_transport()) as client:
        first = (await client.get(f"{server}/a")).text
        second = (await client.get(f"{server}/b")).text
        assert first.split(" on ")[1] == second.split(" on ")[1]  # same client port: one kept-alive connection
        assert (await client.get(f"{server}/then-hang-up")).status_code == 200
        time.sleep(0.05)  # the server's close reaches our socket
        after = await client.get(f"{server}/c")
        assert after.status_code == 200
        assert after.text.split(" on ")[1] != second.split(" on ")[1]  # a new connection, not a failed send
