"""HTTP/1.1 on asyncio, answers parsed by httptools (llhttp): the executor's way out.

Every proxied call pays for its client twice over (its CPU, and the loop turns before the request leaves and
after the answer lands). Against the same 127.0.0.1 upstream, one GET through aiohttp's `ClientSession` cost
163 µs of CPU and 267 µs of wall time; the exchange below costs 48 µs and 137 µs (`python -m bench.calls`
shows the same in its two bare-proxy rows). aiohttp's C parser is llhttp too: the difference is its request
machinery (URL objects, header multidicts, per-read timers, tracing hooks, connection keys), which a request
the executor has already built needs none of. So this module keeps only what such a request needs:

- keep-alive connections pooled per origin, the most recently used first; an idle connection expires after
  `KEEPALIVE_EXPIRY` (below the 5 s after which uvicorn's and Node's servers close theirs) or when its server
  hangs up; at most `max_connections` are busy at once;
- the request goes out as given (the URL already percent-encoded, the caller's headers) with what httpx
  would add: Host, User-Agent, Accept-Encoding, Content-Length; credentials in the URL become Basic auth;
  a CR or LF in any header refuses the request (no header injection);
- the answer is streamed with backpressure; gzip and deflate are decoded; 1xx answers are skipped; HEAD,
  204 and 304 have no body; a body without a length ends when the connection does; response headers are
  capped at `MAX_HEAD_BYTES`;
- one deadline per exchange (connecting: at most `CONNECT_TIMEOUT`); errors are httpx's (`ConnectError`,
  `ConnectTimeout`, `ReadTimeout`, `RemoteProtocolError`, `ReadError`, `LocalProtocolError`,
  `UnsupportedProtocol`, `DecodingError`), so callers catch what they always caught;
- a reused connection that fails before any byte of an answer arrived is retried once on a new connection
  when the method is idempotent (the server may have closed it just as the request left).
"""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections import deque
from collections.abc import AsyncIterator, Iterable
from urllib.parse import unquote

import httptools
import httpx

from .decoding import decode, decoders, flush

KEEPALIVE_EXPIRY = 4.0
CONNECT_TIMEOUT = 10.0
USER_AGENT = "gateway/0.1"
ACCEPT_ENCODING = "gzip, deflate"  # what zlib decodes, with the standard library alone
MAX_HEAD_BYTES = 256 * 1024  # status line and headers of one answer (aiohttp: 64 KiB per line)
HIGH_WATER = 256 * 1024  # unread body bytes at which the socket stops being read
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})  # sent again after a failure
_EMPTY_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})  # httpx's rule: these say `Content-Length: 0`
_DEFAULT_PORTS = {"http": 80, "https": 443}

Origin = tuple[str, str, int]  # scheme, host, port


def trust_context(ca_file: str | None = None) -> ssl.SSLContext:
    """httpx's trust store (certifi), plus the certificates in `ca_file` (an api's private CA)."""
    context = httpx.create_ssl_context()
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
    return context


class _Target:
    """What a URL's scheme and authority say, worked out once per authority."""

    __slots__ = ("authorization", "host_header", "origin")

    def __init__(self, scheme: str, authority: str) -> None:
        userinfo, at, hostport = authority.rpartition("@")
        self.authorization = None
        if at:
            user, _, password = userinfo.partition(":")
            token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")
            self.authorization = "Basic " + token
        if hostport.startswith("["):  # an IPv6 literal
            host, _, rest = hostport[1:].partition("]")
            port_text = rest[1:] if rest.startswith(":") else ""
        else:
            host, _, port_text = hostport.partition(":")
        if not host or (port_text and not port_text.isdigit()):
            raise httpx.UnsupportedProtocol(f"not a host and port: {hostport!r}")
        default = _DEFAULT_PORTS[scheme]
        port = int(port_text) if port_text else default
        shown = f"[{host}]" if ":" in host else host
        self.host_header = shown if port == default else f"{shown}:{port}"
        self.origin: Origin = (scheme, host, port)


def _split(url: str, targets: dict[tuple[str, str], _Target]) -> tuple[_Target, str]:
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in _DEFAULT_PORTS:
        raise httpx.UnsupportedProtocol(f"only http:// and https:// URLs are sent, not {url[:40]!r}")
    cut = len(rest)
    for mark in "/?#":
        found = rest.find(mark)
        if 0 <= found < cut:
            cut = found
    authority, path = rest[:cut], rest[cut:].partition("#")[0]
    target = targets.get((scheme, authority))
    if target is None:
        target = targets[(scheme, authority)] = _Target(scheme, authority)
    return target, path if path.startswith("/") else "/" + path


class Headers(dict[str, str]):
    """An answer's headers by lower-cased name; a repeated header's values joined with ", " (as httpx's
    `Headers.get` answers)."""

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return dict.get(self, key.lower(), default)


class Http1Response:
    """One answer: `status_code`, `reason_phrase`, `headers` (case-insensitive `get`), `aiter_bytes()`
    (decoded) and `aclose()`, the part of `httpx.Response` the executor reads."""

    __slots__ = ("_connection", "_decoders", "_released", "_wire", "headers", "reason_phrase", "status_code")

    def __init__(self, connection: _Connection, wire: Http1Wire) -> None:
        self._connection = connection
        self._wire = wire
        self._released = False
        self.status_code = connection.status
        self.reason_phrase = connection.reason.decode("latin-1")
        headers = Headers()
        for name, value in connection.raw_headers:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            headers[key] = headers[key] + ", " + text if key in headers else text
        self.headers = headers
        self._decoders = decoders(headers.get("content-encoding"))

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        connection = self._connection
        while True:
            chunk = connection.take_body()
            if chunk:
                for decoder in self._decoders:
                    chunk = decode(decoder, chunk)
                if chunk:
                    yield chunk
                continue
            if connection.complete:
                tail = b""
                for decoder in self._decoders:
                    tail = decode(decoder, tail) + flush(decoder)
                if tail:
                    yield tail
                return
            await connection.wait_for_body()

    async def aclose(self) -> None:
        if self._released:
            return
        self._released = True
        self._wire._release(self._connection)


class _Connection(asyncio.Protocol):
    """One keep-alive connection, one exchange at a time; llhttp calls the `on_*` methods as it parses."""

    def __init__(self, origin: Origin, loop: asyncio.AbstractEventLoop) -> None:
        self.origin = origin
        self.loop = loop
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reused = False  # has finished an exchange before this one
        self.idle_since = 0.0
        self.in_exchange = False  # between sending a request and the pool taking the connection back
        self.paused = False
        self._reset_exchange(head_only=False)

    def _reset_exchange(self, *, head_only: bool) -> None:
        self.head_only = head_only
        self.status = 0
        self.reason = b""
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.head_bytes = 0
        self.headers_done = False
        self.complete = False
        self.keep_alive = False
        self.eof_ends_body = False
        self.bytes_seen = False
        self.error: Exception | None = None
        self.body: deque[bytes] = deque()
        self.buffered = 0
        self.waiter: asyncio.Future[None] | None = None
        self.timer: asyncio.TimerHandle | None = None

    # -- the exchange, as the wire drives it

    async def exchange(self, head: bytes, content: bytes | None, head_only: bool, timeout: float) -> None:
        """Send one request and wait for its answer's headers (the body follows as it arrives)."""
        self._reset_exchange(head_only=head_only)
        transport = self.transport
        if transport is None or self.closed or transport.is_closing():
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        self.in_exchange = True
        self.timer = self.loop.call_later(timeout, self._timed_out, timeout)
        if content and len(content) < 16384:
            transport.write(head + content)  # one segment for a small request
        else:
            transport.write(head)
            if content:
                transport.write(content)
        await self._wait(lambda: self.headers_done)

    async def wait_for_body(self) -> None:
        await self._wait(lambda: bool(self.body) or self.complete)

    async def _wait(self, ready) -> None:  # type: ignore[no-untyped-def]
        while not ready():
            if self.error is not None:
                raise self.error
            self.waiter = self.loop.create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        if self.error is not None and not self.complete:
            raise self.error

    def take_body(self) -> bytes:
        body = self.body
        if not body:
            return b""
        chunk = body.popleft() if len(body) == 1 else b"".join(body)
        body.clear()
        self.buffered = 0
        self.resume()
        return chunk

    def resume(self) -> None:
        if self.paused and self.transport is not None and not self.closed:
            self.paused = False
            self.transport.resume_reading()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: Exception) -> None:
        if self.complete or self.error is not None:
            return
        self.error = error
        self._stop_timer()
        self.close()
        self._wake()

    def _timed_out(self, timeout: float) -> None:
        self.timer = None
        self._fail(httpx.ReadTimeout(f"no complete answer within {timeout:g} s"))

    def _stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if not self.in_exchange or self.complete or self.error is not None:
            self.close()  # bytes nobody asked for (between exchanges): the connection can't be trusted
            return
        self.bytes_seen = True
        if not self.headers_done:
            self.head_bytes += len(data)
            if self.head_bytes > MAX_HEAD_BYTES:
                self._fail(httpx.RemoteProtocolError(f"the answer's headers exceed {MAX_HEAD_BYTES} bytes"))
                return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(httpx.RemoteProtocolError("the server switched protocols"))
        except httptools.HttpParserError as error:
            self._fail(httpx.RemoteProtocolError(f"malformed answer: {error}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.in_exchange or self.complete or self.error is not None:
            return  # idle, or the exchange is over
        if self.headers_done and self.eof_ends_body and exc is None:
            self._finish(keep_alive=False)  # a body without a length ends with its connection
        elif isinstance(exc, OSError):
            self._fail(httpx.ReadError(str(exc) or type(exc).__name__))
        elif self.headers_done:
            self._fail(httpx.RemoteProtocolError("the server hung up before the end of the body"))
        else:
            self._fail(httpx.RemoteProtocolError("Server disconnected without sending a response."))

    # -- llhttp's callbacks

    def on_status(self, reason: bytes) -> None:
        self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self.raw_headers.append((name, value))

    def on_headers_complete(self) -> None:
        if self.complete:  # a second answer to one request: the connection can't be trusted
            self.keep_alive = False
            return
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # an interim answer (100 Continue, 103 Early Hints): the real one follows
            self.raw_headers, self.reason, self.head_bytes = [], b"", 0
            return
        self.status = status
        self.headers_done = True
        names = {name.lower() for name, _ in self.raw_headers}
        self.eof_ends_body = (b"content-length" not in names and b"transfer-encoding" not in names
                              and status not in (204, 304))
        if self.head_only:
            # llhttp can't be told that a HEAD answer has no body: take the headers and retire the connection.
            self._finish(keep_alive=False)
        self._wake()

    def on_body(self, body: bytes) -> None:
        if self.complete:  # a HEAD answer's body, which llhttp expects
            return
        self.body.append(body)
        self.buffered += len(body)
        if self.buffered >= HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self.headers_done and not self.complete:
            self._finish(keep_alive=self.parser.should_keep_alive())

    def _finish(self, *, keep_alive: bool) -> None:
        self.complete = True
        self.keep_alive = keep_alive and not self.closed
        self._stop_timer()
        self._wake()


class Http1Wire:
    """Sends the executor's requests (`gateway.http.client.Wire`) on pooled HTTP/1.1 connections."""

    def __init__(self, *, max_connections: int = 20, ssl_context: ssl.SSLContext | None = None) -> None:
        self._max_connections = max_connections
        self._ssl = ssl_context
        self._idle: dict[Origin, list[_Connection]] = {}
        self._targets: dict[tuple[str, str], _Target] = {}
        self._busy = 0
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._closed = False

    async def send(self, method: str, url: str, headers: Iterable[tuple[str, str]], content: bytes | None,
                   timeout: float) -> Http1Response:
        """Send one request: `url` already percent-encoded (sent as it is), `timeout` seconds for the whole
        exchange (connecting at most `CONNECT_TIMEOUT`). The answer's body is streamed, decoded."""
        target, path = _split(url, self._targets)
        head = _head(method, path, target, headers, content)
        head_only = method == "HEAD"
        await self._acquire()
        try:
            for attempt in (1, 2):
                connection = await self._connection(target.origin, timeout)
                try:
                    await connection.exchange(head, content, head_only, timeout)
                except (httpx.RemoteProtocolError, httpx.ReadError):
                    connection.close()
                    if attempt == 1 and connection.reused and not connection.bytes_seen and method in IDEMPOTENT:
                        continue  # a kept-alive connection its server had just closed: once more, on a new one
                    raise
                except BaseException:
                    connection.close()  # cancelled or timed out mid-exchange: the connection can't be reused
                    raise
                return Http1Response(connection, self)
            raise AssertionError("unreachable")
        except BaseException:
            self._release_slot()
            raise

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()

    # -- the pool

    async def _acquire(self) -> None:
        if self._busy >= self._max_connections:
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._release_slot()  # handed a slot just as we gave up: pass it on
                elif waiter in self._waiting:
                    self._waiting.remove(waiter)
                raise
            return  # the slot was handed over by `_release_slot`
        self._busy += 1

    def _release_slot(self) -> None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the busy count stays: the slot moves to the waiter
                return
        self._busy -= 1

    def _release(self, connection: _Connection) -> None:
        connection._stop_timer()
        connection.in_exchange = False
        if connection.complete and connection.keep_alive and not connection.closed and not self._closed:
            connection.body.clear()  # what the reader left unread of a finished body
            connection.resume()
            connection.reused = True
            connection.idle_since = connection.loop.time()
            self._idle.setdefault(connection.origin, []).append(connection)
        else:
            connection.close()  # an unread or unfinished body takes its connection with it
        self._release_slot()

    async def _connection(self, origin: Origin, timeout: float) -> _Connection:
        loop = asyncio.get_running_loop()
        idle = self._idle.get(origin)
        while idle:
            connection = idle.pop()
            if not connection.closed and connection.loop is loop \
                    and loop.time() - connection.idle_since < KEEPALIVE_EXPIRY:
                return connection
            connection.close()
        scheme, host, port = origin
        context = None
        if scheme == "https":
            if self._ssl is None:
                self._ssl = trust_context()  # the same trust store as httpx's own transport (certifi)
            context = self._ssl
        connect_timeout = min(CONNECT_TIMEOUT, timeout)
        try:
            async with asyncio.timeout(connect_timeout):
                _, connection = await loop.create_connection(
                    lambda: _Connection(origin, loop), host, port, ssl=context,
                    server_hostname=host if context is not None else None)
        except TimeoutError as error:
            raise httpx.ConnectTimeout(f"no connection to {host}:{port} within {connect_timeout:g} s") from error
        except (OSError, ssl.SSLError) as error:
            raise httpx.ConnectError(str(error) or type(error).__name__) from error
        return connection


def _head(method: str, path: str, target: _Target, headers: Iterable[tuple[str, str]],
          content: bytes | None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1\r\nHost: {target.host_header}\r\n"]
    named = set()
    for name, value in headers:
        named.add(name.lower())
        lines.append(f"{name}: {value}\r\n")
    if "user-agent" not in named:
        lines.append(f"User-Agent: {USER_AGENT}\r\n")
    if "accept-encoding" not in named:
        lines.append(f"Accept-Encoding: {ACCEPT_ENCODING}\r\n")
    if target.authorization and "authorization" not in named:
        lines.append(f"Authorization: {target.authorization}\r\n")
    if content:
        lines.append(f"Content-Length: {len(content)}\r\n")
    elif method in _EMPTY_BODY_METHODS:
        lines.append("Content-Length: 0\r\n")
    lines.append("\r\n")
    text = "".join(lines)
    # Each line ends in the one CRLF it was given (the first holds two): any other came from a name or value.
    if text.count("\n") != len(lines) + 1 or text.count("\r") != len(lines) + 1 or " " in path:
        raise httpx.LocalProtocolError("a header name or value, or the URL, holds a line break or space")
    return text.encode()
