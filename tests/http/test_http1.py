"""gateway.http.http1: the executor's HTTP/1.1 wire puts on the wire what httpx would, copes with what real
servers answer (chunks, no length, interim answers, HEAD, gzip, hang-ups, endless headers) and pools
connections safely; judged by a raw socket server on 127.0.0.1 that records the bytes it gets."""

from __future__ import annotations

import asyncio
import base64
import gzip
import socket
import time
import zlib
from collections.abc import Callable

import httpx
import pytest
from raw_server import Answer, RawServer, raw_answer

from gateway.http.http1 import Http1Response, Http1Wire

pytestmark = pytest.mark.anyio

Serve = Callable[[Answer], RawServer]


async def _read(response: Http1Response) -> bytes:
    try:
        return b"".join([chunk async for chunk in response.aiter_bytes()])
    finally:
        await response.aclose()


async def _get(wire: Http1Wire, url: str, method: str = "GET", content: bytes | None = None,
               headers: list[tuple[str, str]] | None = None, timeout: float = 5) -> tuple[Http1Response, bytes]:
    response = await wire.send(method, url, headers or [], content, timeout=timeout)
    return response, await _read(response)


@pytest.fixture
async def wire() -> Http1Wire:
    wire = Http1Wire()
    yield wire  # type: ignore[misc]
    await wire.aclose()


@pytest.mark.parametrize(("method", "content", "headers"), [
    ("GET", None, []), ("HEAD", None, []), ("DELETE", None, []), ("POST", None, []), ("PATCH", b"", []),
    ("POST", b'{"a": 1}', [("Content-Type", "application/json")]), ("PUT", b"x", [("X-Twice", "1")]),
])
async def test_the_request_goes_out_as_httpx_sends_it(serve: Serve, wire: Http1Wire, method: str,
                                                      content: bytes | None, headers: list[tuple[str, str]]) -> None:
    # HEAD's answer has no body on the wire (its Content-Length describes the GET).
    server = serve(lambda head: b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n" + (b"" if head.startswith(b"HEAD")
                                                                                    else b"ok"))
    url = f"{server.url}/a%2Fb/c%20d?q=x%2By&q=2"
    async with httpx.AsyncClient(headers={"User-Agent": "gateway/0.1", "Accept-Encoding": "gzip, deflate"}) as client:
        await client.request(method, url, content=content, headers=headers)
    response, answer = await _get(wire, url, method, content, headers)
    (httpx_head, httpx_body, _), (our_head, our_body, _) = server.requests

    def lines(head: bytes) -> list[str]:
        # httpx says `Connection: keep-alive` and `Accept: */*`, HTTP/1.1's default and no preference.
        return sorted(line for line in head.decode().split("\r\n")[1:]
                      if line.lower() not in ("connection: keep-alive", "accept: */*"))

    assert our_head.split(b"\r\n")[0] == httpx_head.split(b"\r\n")[0]  # the request line, URL as encoded
    assert lines(our_head) == lines(httpx_head) and our_body == httpx_body
    assert response.status_code == 200 and answer == (b"" if method == "HEAD" else b"ok")


async def test_gzip_and_deflate_are_decoded_reason_and_headers_come_through(serve: Serve, wire: Http1Wire) -> None:
    text = b"hello " * 5000
    raw_deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    answers = {
        b"/gzip": raw_answer(gzip.compress(text), "Content-Encoding: gzip", "Set-Cookie: a=1", "Set-Cookie: b=2",
                             status="418 I'm a teapot"),
        b"/zlib": raw_answer(zlib.compress(text), "Content-Encoding: deflate"),
        b"/raw": raw_answer(raw_deflate.compress(text) + raw_deflate.flush(), "Content-Encoding: deflate"),
        b"/br": raw_answer(b"\x0bstill br", "Content-Encoding: br"),
        b"/bad": raw_answer(b"not gzip at all", "Content-Encoding: gzip"),
    }
    server = serve(lambda head: answers[head.split(b" ")[1]])
    response, body = await _get(wire, f"{server.url}/gzip")
    assert (response.status_code, response.reason_phrase, body) == (418, "I'm a teapot", text)
    assert response.headers.get("CONTENT-ENCODING") == "gzip"
    assert response.headers.get("set-cookie") == "a=1, b=2"  # as httpx's Headers.get joins them
    assert (await _get(wire, f"{server.url}/zlib"))[1] == text
    assert (await _get(wire, f"{server.url}/raw"))[1] == text
    assert (await _get(wire, f"{server.url}/br"))[1] == b"\x0bstill br"  # not advertised, passed as it came
    response = await wire.send("GET", f"{server.url}/bad", [], None, timeout=5)
    with pytest.raises(httpx.DecodingError):
        await _read(response)


async def test_bodies_end_as_servers_end_them(serve: Serve, wire: Http1Wire) -> None:
    answers = {
        b"/chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        b"/hints": b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n" + raw_answer(b"after the hint"),
        b"/empty": b"HTTP/1.1 204 No Content\r\n\r\n",
        b"/until-close": b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nthe body ends with the connection",
    }
    server = serve(lambda head: answers[head.split(b" ")[1]])
    assert (await _get(wire, f"{server.url}/chunked"))[1] == b"hello world"
    response, body = await _get(wire, f"{server.url}/hints")
    assert (response.status_code, body, response.headers.get("link")) == (200, b"after the hint", None)
    response, body = await _get(wire, f"{server.url}/empty")
    assert (response.status_code, body) == (204, b"")
    assert (await _get(wire, f"{server.url}/until-close"))[1] == b"the body ends with the connection"
    assert (await _get(wire, f"{server.url}/chunked"))[1] == b"hello world"
    ports = [port for _, _, port in server.requests]
    assert ports[0] == ports[1] == ports[2] == ports[3]  # kept alive through chunks, hints and a 204
    assert ports[4] != ports[3]  # the connection that ended the body is not reused


async def test_connections_are_reused_and_an_unfinished_body_drops_its_connection(
        serve: Serve, wire: Http1Wire) -> None:
    big = raw_answer(b"x" * 8_000_000)  # far beyond what is buffered: the connection is mid-body when closed
    server = serve(lambda head: big if b"/big" in head else raw_answer(b"small"))
    await _get(wire, server.url)
    await _get(wire, server.url)
    response = await wire.send("GET", f"{server.url}/big", [], None, timeout=5)
    async for _ in response.aiter_bytes():
        break
    await response.aclose()
    assert (await _get(wire, server.url))[1] == b"small"
    response, body = await _get(wire, f"{server.url}/big")  # read whole, through the pauses of backpressure
    assert body == b"x" * 8_000_000
    ports = [port for _, _, port in server.requests]
    assert ports[0] == ports[1] == ports[2] and ports[3] != ports[2]


async def test_a_head_answer_retires_its_connection(serve: Serve, wire: Http1Wire) -> None:
    # llhttp can't be told an answer is to a HEAD: reusing the connection would read the next answer as a body.
    server = serve(lambda head: raw_answer(b"" if head.startswith(b"HEAD") else b"get", "X-Length-Of-Get: 3")
                   .replace(b"Content-Length: 0", b"Content-Length: 3"))
    response, body = await _get(wire, server.url, "HEAD")
    assert (response.status_code, body, response.headers.get("content-length")) == (200, b"", "3")
    assert (await _get(wire, server.url))[1] == b"get"


async def test_a_kept_alive_connection_its_server_dropped_is_retried_once_for_idempotent_methods(
        serve: Serve, wire: Http1Wire) -> None:
    seen: list[int] = []

    def answer(head: bytes) -> bytes | None:
        seen.append(1)
        return None if len(seen) == 2 else raw_answer(b"ok")  # the second request: hung up on, unanswered

    server = serve(answer)
    await _get(wire, server.url)
    assert (await _get(wire, server.url))[1] == b"ok"  # retried on a new connection
    ports = [port for _, _, port in server.requests]
    assert len(ports) == 3 and ports[0] == ports[1] != ports[2]

    seen.clear()
    await _get(wire, server.url, "POST", b"{}")
    with pytest.raises(httpx.RemoteProtocolError):
        await _get(wire, server.url, "POST", b"{}")  # a POST is never sent twice
    assert len(seen) == 2


async def test_a_server_hang_up_between_calls_is_noticed(serve: Serve, wire: Http1Wire) -> None:
    server = serve(lambda head: raw_answer(b"bye", "Connection: close") if b"/bye" in head else raw_answer(b"hi"))
    assert (await _get(wire, f"{server.url}/bye"))[1] == b"bye"
    time.sleep(0.05)
    assert (await _get(wire, f"{server.url}/next", "POST", b"{}"))[1] == b"hi"  # not a stale-socket failure


async def test_errors_are_httpx_errors(serve: Serve, wire: Http1Wire) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    silent = serve(lambda head: (time.sleep(1), raw_answer(b"late"))[1])
    cut = serve(lambda head: b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nonly this")
    gone = serve(lambda head: None)
    garbled = serve(lambda head: b"HTTP/1.1 2xx Who knows\r\n\r\n")
    endless = serve(lambda head: b"HTTP/1.1 200 OK\r\n" + b"X-Filler: " + b"y" * 400_000 + b"\r\n\r\n")
    with pytest.raises(httpx.ConnectError):
        await _get(wire, f"http://127.0.0.1:{closed}/")
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        await _get(wire, silent.url, timeout=0.2)
    assert time.monotonic() - started < 0.9  # the deadline, not the server, ended it
    response = await wire.send("GET", cut.url, [], None, timeout=5)
    with pytest.raises(httpx.RemoteProtocolError, match="before the end of the body"):
        await _read(response)
    with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
        await _get(wire, gone.url)
    with pytest.raises(httpx.RemoteProtocolError, match="malformed"):
        await _get(wire, garbled.url)
    with pytest.raises(httpx.RemoteProtocolError, match="headers exceed"):
        await _get(wire, endless.url)
    with pytest.raises(httpx.UnsupportedProtocol):
        await _get(wire, "ftp://127.0.0.1/x")


async def test_a_line_break_in_a_header_is_refused_before_anything_is_sent(serve: Serve, wire: Http1Wire) -> None:
    server = serve(lambda head: raw_answer(b"ok"))
    for headers in ([("X-Note", "a\r\nX-Injected: 1")], [("X-Note\r\nX-Injected", "1")], [("X-Note", "a\nb")]):
        with pytest.raises(httpx.LocalProtocolError):
            await _get(wire, server.url, headers=headers)
    with pytest.raises(httpx.LocalProtocolError):
        await _get(wire, f"{server.url}/a b")
    assert server.requests == []


async def test_credentials_in_the_url_become_basic_auth(serve: Serve, wire: Http1Wire) -> None:
    server = serve(lambda head: raw_answer(b"ok"))
    port = server.url.rsplit(":", 1)[1]
    await _get(wire, f"http://us%40er:p%3Ass@127.0.0.1:{port}/x")
    head = server.requests[0][0].decode()
    assert f"Authorization: Basic {base64.b64encode(b'us@er:p:ss').decode()}" in head.split("\r\n")
    assert f"Host: 127.0.0.1:{port}" in head.split("\r\n")  # the credentials are not part of Host


async def test_at_most_max_connections_are_busy_and_a_cancelled_waiter_gives_up_nothing(serve: Serve) -> None:
    server = serve(lambda head: (time.sleep(0.1), raw_answer(b"ok"))[1])
    wire = Http1Wire(max_connections=1)
    try:
        holder = await wire.send("GET", server.url, [], None, timeout=5)  # holds the only slot, unread
        waiting = asyncio.ensure_future(_get(wire, server.url))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        cancelled = asyncio.ensure_future(_get(wire, server.url))
        await asyncio.sleep(0.01)
        cancelled.cancel()
        await _read(holder)
        assert (await asyncio.wait_for(waiting, 5))[1] == b"ok"
        assert (await asyncio.wait_for(_get(wire, server.url), 5))[1] == b"ok"  # the slot came back
        assert len({port for _, _, port in server.requests}) == 1  # one connection, taken in turns
    finally:
        await wire.aclose()


async def test_a_call_cancelled_mid_exchange_does_not_leave_its_connection_in_the_pool(
        serve: Serve, wire: Http1Wire) -> None:
    server = serve(lambda head: (time.sleep(0.3), raw_answer(b"slow"))[1] if b"/slow" in head
                   else raw_answer(b"fast"))
    await _get(wire, server.url)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await _get(wire, f"{server.url}/slow")
    assert (await _get(wire, server.url))[1] == b"fast"  # not the slow answer arriving late
    ports = [port for _, _, port in server.requests]
    assert ports[0] == ports[1] != ports[2]


async def test_an_idle_connection_expires_before_servers_drop_theirs(serve: Serve, wire: Http1Wire,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gateway.http.http1.KEEPALIVE_EXPIRY", 0.1)
    server = serve(lambda head: raw_answer(b"ok"))
    await _get(wire, server.url)
    await _get(wire, server.url)
    await asyncio.sleep(0.2)
    await _get(wire, server.url)
    ports = [port for _, _, port in server.requests]
    assert ports[0] == ports[1] != ports[2]


async def test_many_concurrent_calls_share_at_most_max_connections(serve: Serve) -> None:
    server = serve(lambda head: (time.sleep(0.01), raw_answer(head.split(b" ")[1]))[1])
    wire = Http1Wire(max_connections=4)
    try:
        answers = await asyncio.gather(*(_get(wire, f"{server.url}/{i}") for i in range(60)))
    finally:
        await wire.aclose()
    assert [body for _, body in answers] == [f"/{i}".encode() for i in range(60)]  # each its own answer
    assert len({port for _, _, port in server.requests}) <= 4
