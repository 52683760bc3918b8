"""gateway.http.wire: the executor's requests on pyreqwest go out as built, what real servers answer (chunks,
no length, interim answers, HEAD, gzip, hang-ups, endless headers, extra bytes) comes back safely, and
connections are pooled safely; judged by a raw socket server on 127.0.0.1 that records the bytes it gets."""

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
from executor_helpers import executor_for, make_tool
from raw_server import Answer, RawServer, raw_answer

from gateway.http.library import ClientOptions
from gateway.http.wire import ReqwestWire, WireResponse, reason_for

pytestmark = pytest.mark.anyio

Serve = Callable[[Answer], RawServer]


async def _read(response: WireResponse) -> bytes:
    try:
        return b"".join([chunk async for chunk in response.aiter_bytes()])
    finally:
        await response.aclose()


async def _get(wire: ReqwestWire, url: str, method: str = "GET", content: bytes | None = None,
               headers: list[tuple[str, str]] | None = None, timeout: float = 5) -> tuple[WireResponse, bytes]:
    response = await wire.send(method, url, headers or [], content, timeout=timeout)
    return response, await _read(response)


@pytest.fixture
async def wire() -> ReqwestWire:
    wire = ReqwestWire()
    yield wire  # type: ignore[misc]
    await wire.aclose()


@pytest.mark.parametrize(("method", "content", "headers"), [
    ("GET", None, []), ("HEAD", None, []), ("DELETE", None, []), ("POST", None, []), ("PATCH", b"", []),
    ("POST", b'{"a": 1}', [("Content-Type", "application/json")]), ("PUT", b"x", [("X-Twice", "1")]),
])
async def test_the_request_goes_out_as_httpx_sends_it(serve: Serve, wire: ReqwestWire, method: str,
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
        # httpx says `Connection: keep-alive` and `Accept: */*`, HTTP/1.1's default and no preference; the
        # codings offered differ (reqwest decodes brotli and zstd too).
        return sorted(line.lower() for line in head.decode().split("\r\n")[1:]
                      if line.lower() not in ("connection: keep-alive", "accept: */*")
                      and not line.lower().startswith("accept-encoding:"))

    assert our_head.split(b"\r\n")[0] == httpx_head.split(b"\r\n")[0]  # the request line, URL as encoded
    assert lines(our_head) == lines(httpx_head) and our_body == httpx_body
    assert response.status_code == 200 and answer == (b"" if method == "HEAD" else b"ok")


async def test_gzip_and_deflate_are_decoded_and_stacked_or_unknown_codings_refused(serve: Serve,
                                                                                     wire: ReqwestWire) -> None:
    text = b"hello " * 5000
    answers = {
        b"/gzip": raw_answer(gzip.compress(text), "Content-Encoding: gzip", "Set-Cookie: a=1", "Set-Cookie: b=2",
                             status="418 I'm a teapot (Bearer s3cret)"),
        b"/zlib": raw_answer(zlib.compress(text), "Content-Encoding: deflate"),
        b"/stacked": raw_answer(gzip.compress(gzip.compress(text)), "Content-Encoding: gzip, gzip"),
        b"/compress": raw_answer(b"\x1f\x9dLZW", "Content-Encoding: compress"),
        b"/bad": raw_answer(b"not gzip at all", "Content-Encoding: gzip"),
    }
    server = serve(lambda head: answers[head.split(b" ")[1]])
    response, body = await _get(wire, f"{server.url}/gzip")
    # The standard reason phrase: an upstream's own can echo a credential.
    assert (response.status_code, response.reason_phrase, body) == (418, reason_for(418), text)
    assert response.headers.get("CONTENT-ENCODING") is None  # decoded, so no longer encoded
    assert response.headers.get("set-cookie") == "a=1, b=2"  # as httpx's Headers.get joins them
    assert (await _get(wire, f"{server.url}/zlib"))[1] == text
    for path in ("/stacked", "/compress"):  # refused before any of the body is read
        with pytest.raises(httpx.DecodingError, match="does not decode"):
            await wire.send("GET", f"{server.url}{path}", [], None, timeout=5)
    with pytest.raises(httpx.DecodingError):
        await _get(wire, f"{server.url}/bad")


async def test_a_decoded_body_is_produced_as_it_is_read(serve: Serve, wire: ReqwestWire) -> None:
    # 64 MiB of zeros in 64 KiB of gzip: reading the first chunk does not decode the rest.
    bomb = gzip.compress(b"\0" * (64 * 1024 * 1024), 9)
    server = serve(lambda head: raw_answer(bomb, "Content-Encoding: gzip"))
    response = await wire.send("GET", server.url, [], None, timeout=5)
    try:
        first = await anext(aiter(response.aiter_bytes()))
    finally:
        await response.aclose()
    assert 0 < len(first) <= 1024 * 1024


async def test_bodies_end_as_servers_end_them(serve: Serve, wire: ReqwestWire) -> None:
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
        serve: Serve, wire: ReqwestWire) -> None:
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


async def test_a_head_answer_retires_its_connection(serve: Serve, wire: ReqwestWire) -> None:
    # llhttp can't be told an answer is to a HEAD: reusing the connection would read the next answer as a body.
    server = serve(lambda head: raw_answer(b"" if head.startswith(b"HEAD") else b"get", "X-Length-Of-Get: 3")
                   .replace(b"Content-Length: 0", b"Content-Length: 3"))
    response, body = await _get(wire, server.url, "HEAD")
    assert (response.status_code, body, response.headers.get("content-length")) == (200, b"", "3")
    assert (await _get(wire, server.url))[1] == b"get"


async def test_a_request_the_server_hung_up_on_says_it_may_have_run_and_a_post_goes_once(
        serve: Serve, wire: ReqwestWire) -> None:
    seen: list[int] = []

    def answer(head: bytes) -> bytes | None:
        seen.append(1)
        return None if len(seen) == 2 else raw_answer(b"ok")  # the second request: hung up on, unanswered

    server = serve(answer)
    await _get(wire, server.url, "POST", b"{}")
    with pytest.raises(httpx.RemoteProtocolError, match="may have run"):
        await _get(wire, server.url, "POST", b"{}")  # a POST is never sent twice
    assert len(seen) == 2
    assert (await _get(wire, server.url))[1] == b"ok"  # and the next call gets a new connection


async def test_a_malformed_answer_retires_its_connection(serve: Serve, wire: ReqwestWire) -> None:
    # Bytes beyond the declared length: the next call on that connection would read them as its answer.
    server = serve(lambda head: raw_answer(b"ok") + b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged"
                   if b"/extra" in head else raw_answer(b"fresh"))
    assert (await _get(wire, f"{server.url}/extra"))[1] == b"ok"
    await asyncio.sleep(0.05)
    assert (await _get(wire, f"{server.url}/next"))[1] == b"fresh"
    ports = [port for _, _, port in server.requests]
    assert len(ports) == 2 and ports[0] != ports[1]


async def test_a_server_hang_up_between_calls_is_noticed(serve: Serve, wire: ReqwestWire) -> None:
    server = serve(lambda head: raw_answer(b"bye", "Connection: close") if b"/bye" in head else raw_answer(b"hi"))
    assert (await _get(wire, f"{server.url}/bye"))[1] == b"bye"
    time.sleep(0.05)
    assert (await _get(wire, f"{server.url}/next", "POST", b"{}"))[1] == b"hi"  # not a stale-socket failure


async def test_errors_are_httpx_errors_that_name_the_host_and_say_whether_it_was_sent(
        serve: Serve, wire: ReqwestWire) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    silent = serve(lambda head: (time.sleep(1), raw_answer(b"late"))[1])
    cut = serve(lambda head: b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nonly this")
    gone = serve(lambda head: None)
    garbled = serve(lambda head: b"HTTP/1.1 2xx Who knows\r\n\r\n")
    with pytest.raises(httpx.ConnectError, match=f"127.0.0.1:{closed}.*refused.*not sent"):
        await _get(wire, f"http://127.0.0.1:{closed}/")
    with pytest.raises(httpx.ConnectError, match="nowhere.invalid.*not sent"):  # .invalid never resolves
        await _get(wire, "http://nowhere.invalid/")
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout, match="may have run"):
        await _get(wire, silent.url, timeout=0.2)
    assert time.monotonic() - started < 0.9  # the deadline, not the server, ended it
    with pytest.raises(httpx.RemoteProtocolError, match="broke off.*may have run"):
        await _get(wire, cut.url)
    with pytest.raises(httpx.RemoteProtocolError, match="may have run"):
        await _get(wire, gone.url)
    with pytest.raises(httpx.RemoteProtocolError, match="malformed"):
        await _get(wire, garbled.url)
    with pytest.raises(httpx.LocalProtocolError):
        await _get(wire, "ftp://127.0.0.1/x")


async def test_a_line_break_in_a_header_is_refused_before_anything_is_sent(serve: Serve, wire: ReqwestWire) -> None:
    server = serve(lambda head: raw_answer(b"ok"))
    for headers in ([("X-Note", "a\r\nX-Injected: 1")], [("X-Note\r\nX-Injected", "1")], [("X-Note", "a\nb")]):
        with pytest.raises(httpx.LocalProtocolError):
            await _get(wire, server.url, headers=headers)
    assert server.requests == []


async def test_credentials_in_the_url_become_basic_auth(serve: Serve, wire: ReqwestWire) -> None:
    server = serve(lambda head: raw_answer(b"ok"))
    port = server.url.rsplit(":", 1)[1]
    await _get(wire, f"http://us%40er:p%3Ass@127.0.0.1:{port}/x")
    head = server.requests[0][0].decode()
    assert f"Authorization: Basic {base64.b64encode(b'us@er:p:ss').decode()}" in head.split("\r\n")
    assert f"Host: 127.0.0.1:{port}" in head.split("\r\n")  # the credentials are not part of Host


async def test_at_most_max_connections_are_busy_and_a_cancelled_waiter_gives_up_nothing(serve: Serve) -> None:
    server = serve(lambda head: (time.sleep(0.1), raw_answer(b"ok"))[1])
    wire = ReqwestWire(ClientOptions(max_connections=1))
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
        serve: Serve, wire: ReqwestWire) -> None:
    server = serve(lambda head: (time.sleep(0.3), raw_answer(b"slow"))[1] if b"/slow" in head
                   else raw_answer(b"fast"))
    await _get(wire, server.url)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await _get(wire, f"{server.url}/slow")
    assert (await _get(wire, server.url))[1] == b"fast"  # not the slow answer arriving late
    ports = [port for _, _, port in server.requests]
    assert ports[0] == ports[1] != ports[2]


async def test_an_idle_connection_expires_before_servers_drop_theirs(serve: Serve,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gateway.http.library.POOL_IDLE_SECONDS", 0.1)
    server = serve(lambda head: raw_answer(b"ok"))
    wire = ReqwestWire()
    await _get(wire, server.url)
    await _get(wire, server.url)
    await asyncio.sleep(0.2)
    await _get(wire, server.url)
    ports = [port for _, _, port in server.requests]
    assert ports[0] == ports[1] != ports[2]


async def test_many_concurrent_calls_share_at_most_max_connections(serve: Serve) -> None:
    server = serve(lambda head: (time.sleep(0.01), raw_answer(head.split(b" ")[1]))[1])
    wire = ReqwestWire(ClientOptions(max_connections=4))
    try:
        answers = await asyncio.gather(*(_get(wire, f"{server.url}/{i}") for i in range(60)))
    finally:
        await wire.aclose()
    assert [body for _, body in answers] == [f"/{i}".encode() for i in range(60)]  # each its own answer
    assert len({port for _, _, port in server.requests}) <= 4


async def test_a_tool_result_names_the_host_and_says_whether_the_request_may_have_run(serve: Serve) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    # Three bytes of five, then it hangs up: the request reached the server.
    malformed = serve(lambda head: b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nabc")
    tool = make_tool(method="POST")
    for base, host, said in ((f"http://127.0.0.1:{closed}", f"127.0.0.1:{closed}", "the request was not sent"),
                             ("http://nowhere.invalid", "nowhere.invalid", "the request was not sent"),
                             (malformed.url, malformed.url.removeprefix("http://"), "the request may have run")):
        async with executor_for(base, tool) as executor:
            result = await executor.execute(tool, {}, timeout=5)
        assert result.ok is False and result.error_type == "transport_error"
        assert host in (result.error or "") and said in (result.error or ""), result.error


async def test_an_anyio_cancel_scope_recognises_its_cancellation_of_a_call(serve: Serve, wire: ReqwestWire) -> None:
    # The MCP SDK cancels a handler through a cancel scope; a cancellation it does not recognise as its own
    # escapes the scope and fails the whole request (a 500 instead of "Request cancelled").
    import anyio

    server = serve(lambda head: (time.sleep(1), raw_answer(b"late"))[1])
    with anyio.CancelScope() as scope:
        asyncio.get_running_loop().call_later(0.2, scope.cancel)
        await wire.send("GET", server.url, [], None, timeout=5)
    assert scope.cancelled_caught
    assert (await _get(wire, server.url))[1] == b"late"  # the client goes on


async def test_one_deadline_covers_the_wait_for_a_free_connection(serve: Serve) -> None:
    server = serve(lambda head: raw_answer(b"x" * 8_000_000))  # far beyond what is read ahead: the slot stays held
    wire = ReqwestWire(ClientOptions(max_connections=1))
    try:
        holder = await wire.send("GET", server.url, [], None, timeout=5)
        started = time.monotonic()
        with pytest.raises(httpx.PoolTimeout, match="not sent"):
            await wire.send("GET", server.url, [], None, timeout=0.3)
        assert time.monotonic() - started < 2  # the call's deadline ended the wait, not the holder
        await holder.aclose()
        assert len((await _get(wire, server.url))[1]) == 8_000_000  # the slot came back
    finally:
        await wire.aclose()


async def test_the_capped_read_is_the_streamed_body_cut_where_the_reader_cuts_it(serve: Serve,
                                                                                   wire: ReqwestWire) -> None:
    """`read_capped` reads a `WireResponse` in one coroutine (`read_up_to`, no async generator): the same bytes
    as `aiter_bytes`, cut at the cap with `complete` False, whole with True (chunked, gzip, empty, big)."""
    from gateway.http.reading import read_capped

    big = b"".join(b"%08d" % i for i in range(500_000))  # 4 MB, read in many chunks
    answers = {
        b"/chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        b"/gzip": raw_answer(gzip.compress(big), "Content-Encoding: gzip"),
        b"/empty": b"HTTP/1.1 204 No Content\r\n\r\n",
        b"/big": raw_answer(big),
    }
    server = serve(lambda head: answers[head.split(b" ")[1]])
    for path, expected in ((b"/chunked", b"hello world"), (b"/gzip", big), (b"/empty", b""), (b"/big", big)):
        for cap in (len(expected) + 1, len(expected), 3_000_000, 7):
            response = await wire.send("GET", f"{server.url}{path.decode()}", [], None, timeout=5)
            try:
                read = await read_capped(response, cap)
            finally:
                await response.aclose()
            assert read.data == expected[:cap] and read.complete == (len(expected) <= cap), (path, cap)
    assert (await _get(wire, f"{server.url}/big"))[1] == big  # the generator's reading, for comparison


async def test_a_body_shorter_than_declared_fails_the_whole_read_as_it_fails_the_chunks(serve: Serve,
                                                                                        wire: ReqwestWire) -> None:
    """A body whose declared length is within the cap is read in one step (`read_up_to`); one that ends before its
    declared length is the same error there as chunk by chunk."""
    from gateway.http.reading import read_capped

    short = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nonly ten b"
    server = serve(lambda head: short)
    errors = []
    for cap in (1000, 50):  # within the cap: one read; past it: chunk by chunk
        with pytest.raises(httpx.HTTPError) as raised:  # the library may notice it as soon as the head arrives
            response = await wire.send("GET", server.url, [], None, timeout=5)
            try:
                await read_capped(response, cap)
            finally:
                await response.aclose()
        errors.append(str(raised.value).split(":", 1)[0])
    assert errors[0] == errors[1]
