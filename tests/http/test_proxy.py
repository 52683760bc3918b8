"""Proxies from the environment: a tool call to an api behind `HTTP_PROXY` goes through that proxy, and
`NO_PROXY` sends it straight. The proxy is a tiny forward proxy on 127.0.0.1 that records what it relays."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from executor_helpers import executor_for, make_tool
from raw_server import RawServer, raw_answer

pytestmark = pytest.mark.anyio


class ForwardProxy:
    """Relays absolute-form requests (`GET http://host/path HTTP/1.1`) to one upstream, whatever the host
    says (the host names in these tests resolve nowhere), and records each request line."""

    def __init__(self, upstream: RawServer) -> None:
        self.upstream_port = int(upstream.url.rsplit(":", 1)[1])
        self.lines: list[str] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn: socket.socket) -> None:
        with conn, socket.create_connection(("127.0.0.1", self.upstream_port)) as upstream:
            head = b""
            while b"\r\n\r\n" not in head:
                data = conn.recv(65536)
                if not data:
                    return
                head += data
            line, _, rest = head.partition(b"\r\n")
            method, target, version = line.decode().split(" ")
            self.lines.append(line.decode())
            path = "/" + target.split("://", 1)[1].partition("/")[2]  # absolute form -> origin form
            upstream.sendall(f"{method} {path} {version}\r\n".encode() + rest.replace(
                b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1))
            while data := upstream.recv(65536):
                conn.sendall(data)

    def close(self) -> None:
        self._sock.close()


@pytest.fixture
def upstream() -> Iterator[RawServer]:
    server = RawServer(lambda head: raw_answer(b'{"via": "upstream"}', "Content-Type: application/json",
                                               "Connection: close"))
    yield server
    server.close()


@pytest.fixture
def proxy(upstream: RawServer) -> Iterator[ForwardProxy]:
    relay = ForwardProxy(upstream)
    yield relay
    relay.close()


async def test_a_tool_call_goes_through_the_proxy_of_the_environment(
        proxy: ForwardProxy, upstream: RawServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    tool = make_tool()
    # `api.internal.invalid` resolves nowhere: only the proxy can reach it.
    async with executor_for("http://api.internal.invalid:8080/v1", tool) as executor:
        result = await executor.execute(tool, {})
    assert result.ok and result.body == {"via": "upstream"}, result.error
    assert proxy.lines == ["GET http://api.internal.invalid:8080/v1/items HTTP/1.1"]
    assert upstream.requests[0][0].startswith(b"GET /v1/items ")


async def test_no_proxy_sends_the_call_straight_to_the_api(
        proxy: ForwardProxy, upstream: RawServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    tool = make_tool()
    async with executor_for(f"{upstream.url}/v1", tool) as executor:
        result = await executor.execute(tool, {})
    assert result.ok and result.body == {"via": "upstream"}, result.error
    assert proxy.lines == []
    assert upstream.requests[0][0].startswith(b"GET /v1/items ")
