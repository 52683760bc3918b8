"""aiohttp underneath: the executor's default way out, natively and as an httpx transport.

Per proxied call, httpcore + h11 + anyio cost about five times the CPU of aiohttp's C-accelerated client
(measured against the same 127.0.0.1 upstream: ~540 µs vs ~110 µs), and httpx's own request layers above
any transport (URL parsing and validation three times per call, header normalisation, the auth and redirect
generators) cost about as much again. So the executor's calls go through `AiohttpTransport.send`, which
takes the request already built by `gateway.http.request` (an encoded URL string, header pairs, bytes) and
answers an `AioResponse` with the attributes of `httpx.Response` that `gateway.http.client` and
`gateway.http.reading` use. `gateway.http.client` applies its redirect, retry and deadline rules to either.

The same object is also an httpx transport (`handle_async_request`), for what stays on httpx (OAuth token
requests); there httpx decodes `Content-Encoding`, and this module only moves bytes, keeping httpx's contract:

- the request goes out with exactly httpx's headers (aiohttp adds none of its own defaults) and its URL
  exactly as encoded (no re-quoting); no redirects, no cookies, no proxies from the environment;
- the body is streamed, undecoded; closing an unfinished response drops its connection;
- timeouts come from the request's `timeout` extension (connect, read, pool);
- aiohttp's errors become httpx's (`ConnectError`, `ConnectTimeout`, `ReadTimeout`, `RemoteProtocolError`,
  `ReadError`, `UnsupportedProtocol`), so callers catch what they always caught.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Iterable

import aiohttp
import httpx
from yarl import URL

# httpx sets Accept, Accept-Encoding, User-Agent itself; aiohttp must not add its own (nor a Content-Type for
# a body that has none).
_SKIP_AUTO_HEADERS = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")
KEEPALIVE_EXPIRY = 5.0  # httpx's default for idle pooled connections
MAX_HEADER_LINE = 65536  # aiohttp's default (8190) refuses headers httpx accepts (long Link or CSP headers)
CONNECT_TIMEOUT = 10.0
USER_AGENT = "gateway/0.1"
# What `send` advertises is what aiohttp decodes with the standard library alone (zlib).
ACCEPT_ENCODING = "gzip, deflate"
_EMPTY_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})  # httpx's rule: these say `Content-Length: 0`


def trust_context(ca_file: str | None = None) -> ssl.SSLContext:
    """httpx's trust store (certifi), plus the certificates in `ca_file` (an api's private CA)."""
    context = httpx.create_ssl_context()
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
    return context


class _AnyMethod(frozenset[str]):
    def __contains__(self, method: object) -> bool:
        return True


class _Request(aiohttp.ClientRequest):
    # httpx has decided Content-Length already (0 for a POST, PUT or PATCH without a body, none for a DELETE):
    # aiohttp's own rule (no body: `Content-Length: 0` unless GET, HEAD, OPTIONS or TRACE) must add nothing.
    GET_METHODS = _AnyMethod()


class AiohttpTransport(httpx.AsyncBaseTransport):
    """A pooled HTTP/1.1 transport on one `aiohttp.ClientSession` (made on first use, in the running loop)."""

    def __init__(self, *, max_connections: int = 20, ssl_context: ssl.SSLContext | None = None) -> None:
        self._max_connections = max_connections
        self._ssl = ssl_context
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _session_for_loop(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._session
        if session is not None and self._loop is loop and not session.closed:
            return session
        if session is not None and not session.closed and self._loop is not None and not self._loop.is_closed():
            # Used from another event loop (a second asyncio.run): connections can't move between loops.
            self._loop.call_soon_threadsafe(lambda s=session: asyncio.ensure_future(s.close()))
        if self._ssl is None:
            self._ssl = trust_context()  # the same trust store as httpx's own transport (certifi)
        connector = aiohttp.TCPConnector(limit=self._max_connections, limit_per_host=0, ssl=self._ssl,
                                         keepalive_timeout=KEEPALIVE_EXPIRY)
        self._session = aiohttp.ClientSession(
            connector=connector, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False, trust_env=False,
            skip_auto_headers=_SKIP_AUTO_HEADERS, requote_redirect_url=False, request_class=_Request,
            max_line_size=MAX_HEADER_LINE, max_field_size=MAX_HEADER_LINE, timeout=aiohttp.ClientTimeout(total=None))
        self._loop = loop
        return self._session

    async def send(self, method: str, url: str, headers: Iterable[tuple[str, str]], content: bytes | None,
                   timeout: float) -> AioResponse:
        """Send one request natively: `url` already percent-encoded (sent as it is), `timeout` seconds for
        each phase (connecting at most `CONNECT_TIMEOUT`). The answer's body is streamed, decoded."""
        session = self._session_for_loop()
        pairs = list(headers)
        named = {name.lower() for name, _ in pairs}
        if "user-agent" not in named:
            pairs.append(("User-Agent", USER_AGENT))
        if "accept-encoding" not in named:
            pairs.append(("Accept-Encoding", ACCEPT_ENCODING))
        if not content and method in _EMPTY_BODY_METHODS:
            pairs.append(("Content-Length", "0"))
        try:
            response = await session.request(
                method, URL(url, encoded=True), headers=pairs, data=content or None, allow_redirects=False,
                auto_decompress=True,
                timeout=aiohttp.ClientTimeout(total=None, connect=timeout, sock_connect=min(CONNECT_TIMEOUT, timeout),
                                              sock_read=timeout))
        except Exception as error:
            raise _httpx_error(error, None, connecting=True) from error
        return AioResponse(response)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._session_for_loop()
        timeouts = request.extensions.get("timeout") or {}
        timeout = aiohttp.ClientTimeout(total=None, connect=timeouts.get("pool"),
                                        sock_connect=timeouts.get("connect"), sock_read=timeouts.get("read"))
        content = await request.aread()
        try:
            response = await session.request(
                request.method,
                URL(str(request.url), encoded=True),
                headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw],
                data=content or None,
                allow_redirects=False,
                timeout=timeout,
            )
        except Exception as error:
            raise _httpx_error(error, request, connecting=True) from error
        return httpx.Response(
            response.status,
            headers=list(response.raw_headers),
            stream=_Body(response, request),
            extensions={"http_version": f"HTTP/{response.version.major}.{response.version.minor}".encode(),
                        "reason_phrase": (response.reason or "").encode("latin-1", "replace")},
        )

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()


class AioResponse:
    """An aiohttp response with the part of `httpx.Response`'s interface the executor reads: `status_code`,
    `reason_phrase`, case-insensitive `headers.get`, `aiter_bytes()` (decoded) and `aclose()`."""

    __slots__ = ("_response", "headers", "reason_phrase", "status_code")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status_code = response.status
        self.reason_phrase = response.reason or ""
        self.headers = response.headers

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except Exception as error:
            raise _httpx_error(error, None, connecting=False) from error

    async def aclose(self) -> None:
        _close(self._response)


class _Body(httpx.AsyncByteStream):
    """The response body as it arrives; a response closed before its end takes its connection with it."""

    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except Exception as error:
            raise _httpx_error(error, self._request, connecting=False) from error

    async def aclose(self) -> None:
        _close(self._response)


def _close(response: aiohttp.ClientResponse) -> None:
    if response.content.at_eof():
        response.release()  # read to the end: the connection goes back to the pool
    else:
        response.close()  # an unfinished body takes its connection with it


def _httpx_error(error: Exception, request: httpx.Request | None, *, connecting: bool) -> Exception:
    """aiohttp's error as the httpx error the callers handle (unknown errors pass through unchanged)."""
    message = str(error) or type(error).__name__
    kind: type[httpx.TransportError] | None
    if isinstance(error, aiohttp.ConnectionTimeoutError):
        kind = httpx.ConnectTimeout
    elif isinstance(error, aiohttp.ServerTimeoutError | TimeoutError):
        kind = httpx.ConnectTimeout if connecting and not isinstance(error, aiohttp.SocketTimeoutError) \
            else httpx.ReadTimeout
    elif isinstance(error, aiohttp.ClientConnectorError):
        kind = httpx.ConnectError
    elif isinstance(error, aiohttp.InvalidURL | aiohttp.NonHttpUrlClientError):
        kind = httpx.UnsupportedProtocol
    elif isinstance(error, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError | aiohttp.ClientResponseError):
        kind = httpx.RemoteProtocolError
    elif isinstance(error, aiohttp.ClientOSError | aiohttp.ClientConnectionError | OSError):
        kind = httpx.ReadError
    elif isinstance(error, aiohttp.ClientError):
        kind = httpx.TransportError
    else:
        return error
    return kind(message, request=request)
