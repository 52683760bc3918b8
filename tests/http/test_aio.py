"""gateway.http.aio: the aiohttp transport keeps httpx's contract (exact wire request, streamed undecoded
body, pooling, errors as httpx errors), against a raw socket server on 127.0.0.1 that records the bytes."""

from __future__ import annotations

import gzip
import socket
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from gateway.http.aio import AiohttpTransport

pytestmark = pytest.mark.anyio

Answer = Callable[[bytes], bytes | None]  # request head -> raw response (None: hang up without answering)


class _RawServer:
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


def _response(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@pytest.fixture
def serve() -> Iterator[Callable[[Answer], _RawServer]]:
    servers: list[_RawServer] = []

    def start(answer: Answer) -> _RawServer:
        servers.append(_RawServer(answer))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


async def test_the_request_goes_out_exactly_as_httpx_built_it(serve: Callable[[Answer], _RawServer]) -> None:
    server = serve(lambda head: _response(b'{"ok": true}', "Content-Type: application/json"))
    async with httpx.AsyncClient(transport=AiohttpTransport()) as client:
        response = await client.post(f"{server.url}/a%2Fb/c%20d?q=x%2By&q=2", content=b"raw bytes",
                                     headers={"X-Twice": "1", "User-Agent": "gateway/0.1"})
    assert response.status_code == 200 and response.json() == {"ok": True}
    head, body, _ = server.requests[0]
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /a%2Fb/c%20d?q=x%2By&q=2 HTTP/1.1"  # the encoded URL untouched
    sent = {line.split(":", 1)[0].lower(): line.split(":", 1)[1].strip() for line in lines[1:]}
    assert body == b"raw bytes"
    assert sent["user-agent"] == "gateway/0.1" and sent["x-twice"] == "1" and sent["content-length"] == "9"
    assert "content-type" not in sent  # aiohttp's application/octet-stream default is not added
    assert sent["accept-encoding"] == httpx.Client().headers["accept-encoding"]  # httpx's, not aiohttp's
    assert len(lines) - 1 == len(sent)  # no header twice


@pytest.mark.parametrize(("method", "content", "headers"), [
    ("GET", None, {}), ("HEAD", None, {}), ("OPTIONS", None, {}), ("DELETE", None, {}), ("POST", None, {}),
    ("POST", b'{"a": 1}', {"Content-Type": "application/json"}), ("PUT", b"x", {}), ("PATCH", b"", {}),
])
async def test_every_method_goes_out_as_httpx_own_transport_sends_it(
        serve: Callable[[Answer], _RawServer], method: str, content: bytes | None, headers: dict[str, str]) -> None:
    # HEAD's answer has no body on the wire (its Content-Length describes the GET).
    server = serve(lambda head: b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n" + (b"" if head.startswith(b"HEAD")
                                                                                    else b"ok"))
    sent = []
    for transport in (httpx.AsyncHTTPTransport(), AiohttpTransport()):
        async with httpx.AsyncClient(transport=transport) as client:
            response = await client.request(method, f"{server.url}/p?q=1", content=content, headers=headers)
        head, body, _ = server.requests[-1]
        sent.append((sorted(head.decode().split("\r\n")[1:]), head.split(b"\r\n")[0], body, response.content))
    assert sent[1] == sent[0]  # same request line, same headers, same body, same answer


async def test_gzip_is_decoded_by_httpx_and_reason_and_headers_come_through(
        serve: Callable[[Answer], _RawServer]) -> None:
    packed = gzip.compress(b"hello " * 100)
    server = serve(lambda head: _response(packed, "Content-Encoding: gzip", "Set-Cookie: a=1", "Set-Cookie: b=2",
                                          status="418 I'm a teapot"))
    async with httpx.AsyncClient(transport=AiohttpTransport()) as client:
        response = await client.get(server.url)
    assert response.status_code == 418 and response.reason_phrase == "I'm a teapot"
    assert response.text == "hello " * 100
    assert response.headers.get_list("set-cookie") == ["a=1", "b=2"]
    assert response.http_version == "HTTP/1.1"


async def test_connections_are_reused_an_unfinished_body_drops_its_connection(
        serve: Callable[[Answer], _RawServer]) -> None:
    big = _response(b"x" * 8_000_000)  # far beyond what aiohttp buffers: the connection is mid-body when closed
    server = serve(lambda head: big if b"/big" in head else _response(b"small"))
    async with httpx.AsyncClient(transport=AiohttpTransport()) as client:
        await client.get(server.url)
        await client.get(server.url)
        async with client.stream("GET", f"{server.url}/big") as response:
            async for _ in response.aiter_bytes():
                break  # closed before its end
        await client.get(server.url)
    ports = [port for _, _, port in server.requests]
    assert ports[0] == ports[1] == ports[2]
    assert ports[3] != ports[2]


async def test_a_server_hang_up_between_calls_is_noticed(serve: Callable[[Answer], _RawServer]) -> None:
    server = serve(lambda head: _response(b"bye", "Connection: close") if b"/bye" in head else _response(b"hi"))
    async with httpx.AsyncClient(transport=AiohttpTransport()) as client:
        assert (await client.get(f"{server.url}/bye")).text == "bye"
        time.sleep(0.05)
        assert (await client.post(f"{server.url}/next", content=b"{}")).text == "hi"  # not a stale-socket failure


async def test_errors_become_httpx_errors(serve: Callable[[Answer], _RawServer]) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    silent = serve(lambda head: (time.sleep(1), _response(b"late"))[1])
    cut = serve(lambda head: b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nonly this")
    gone = serve(lambda head: None)
    async with httpx.AsyncClient(transport=AiohttpTransport()) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://127.0.0.1:{closed}/")
        with pytest.raises(httpx.ReadTimeout):
            await client.get(silent.url, timeout=httpx.Timeout(0.2))
        with pytest.raises(httpx.RemoteProtocolError):
            await client.get(cut.url)
        with pytest.raises(httpx.RemoteProtocolError):
            await client.get(gone.url)
        with pytest.raises(httpx.UnsupportedProtocol):
            await AiohttpTransport().handle_async_request(httpx.Request("GET", "ftp://127.0.0.1/x"))


@pytest.mark.parametrize(("method", "content", "headers"), [
    ("GET", None, []), ("HEAD", None, []), ("DELETE", None, []), ("POST", None, []), ("PATCH", b"", []),
    ("POST", b'{"a": 1}', [("Content-Type", "application/json")]), ("PUT", b"x", [("X-Twice", "1")]),
])
async def test_the_native_send_goes_out_as_httpx_sends_it(
        serve: Callable[[Answer], _RawServer], method: str, content: bytes | None,
        headers: list[tuple[str, str]]) -> None:
    # The executor's own path (no httpx above aiohttp) must put the same request on the wire as an httpx
    # client with our User-Agent; only Accept-Encoding differs: what aiohttp decodes with zlib alone.
    server = serve(lambda head: b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n" + (b"" if head.startswith(b"HEAD")
                                                                                    else b"ok"))
    url = f"{server.url}/a%2Fb/c%20d?q=x%2By&q=2"
    async with httpx.AsyncClient(headers={"User-Agent": "gateway/0.1", "Accept-Encoding": "gzip, deflate"}) as client:
        await client.request(method, url, content=content, headers=headers)
    transport = AiohttpTransport()
    try:
        response = await transport.send(method, url, headers, content, timeout=5)
        answer = b"".join([chunk async for chunk in response.aiter_bytes()])
        await response.aclose()
    finally:
        await transport.aclose()
    (httpx_head, httpx_body, _), (our_head, our_body, _) = server.requests

    def lines(head: bytes) -> list[str]:
        # httpx says `Connection: keep-alive` and `Accept: */*`, HTTP/1.1's default and no preference.
        return sorted(line for line in head.decode().split("\r\n")[1:]
                      if line.lower() not in ("connection: keep-alive", "accept: */*"))

    assert our_head.split(b"\r\n")[0] == httpx_head.split(b"\r\n")[0]  # the request line, URL as encoded
    assert lines(our_head) == lines(httpx_head) and our_body == httpx_body
    assert response.status_code == 200 and answer == (b"" if method == "HEAD" else b"ok")


async def test_the_native_send_decodes_gzip_and_maps_errors(serve: Callable[[Answer], _RawServer]) -> None:
    packed = gzip.compress(b"hello " * 100)
    server = serve(lambda head: _response(packed, "Content-Encoding: gzip", status="418 I'm a teapot"))
    transport = AiohttpTransport()
    try:
        response = await transport.send("GET", server.url, [], None, timeout=5)
        assert response.status_code == 418 and response.reason_phrase == "I'm a teapot"
        assert response.headers.get("CONTENT-ENCODING") == "gzip"
        assert b"".join([chunk async for chunk in response.aiter_bytes()]) == b"hello " * 100
        await response.aclose()
        closed = socket.create_server(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        closed.close()
        with pytest.raises(httpx.ConnectError):
            await transport.send("GET", f"http://127.0.0.1:{port}/", [], None, timeout=5)
    finally:
        await transport.aclose()
