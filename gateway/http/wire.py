"""The executor's way out: one request on an api's pooled pyreqwest client, its answer streamed.

`ReqwestWire.send` takes the request as `gateway.http.request` built it (the URL already percent-encoded, the
caller's headers) and answers with the part of `httpx.Response` that `gateway.http.client` and
`gateway.http.reading` read: `status_code`, `reason_phrase`, `headers`, `aiter_bytes()` and `aclose()` (and
`read_up_to`, the whole capped body in one coroutine, which `gateway.http.reading` prefers).

Bodies are decoded by the library as they stream, in chunks of at most the reader's buffer, so the caller's
cap on what it reads also caps what is decompressed. An answer whose `Content-Encoding` is still there after
the library (a coding it does not undo, or several stacked, as in `gzip, gzip`) is refused before its body
is read: a nested coding is how a few kilobytes unpack into gigabytes, and passing it on raw would hand the
model bytes it can't read.
"""

from __future__ import annotations

import asyncio
import http
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
from pyreqwest.client import Client
from pyreqwest.exceptions import PyreqwestError
from pyreqwest.http import HeaderMap
from pyreqwest.request import StreamRequest
from pyreqwest.response import Response

from .library import ClientOptions, build_client, host_of, translate_error
from .resolving import PinnedClients

_EMPTY_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})  # httpx's rule: these say `Content-Length: 0`


_PHRASES = {status.value: status.phrase for status in http.HTTPStatus}


def reason_for(status: int) -> str:
    """The standard reason phrase (the upstream's own is never shown: it can echo a credential); a dict lookup,
    not an `HTTPStatus` made per answer."""
    return _PHRASES.get(status, "")


async def let_cancellation_land() -> None:
    """pyreqwest answers a cancellation with a CancelledError of its own, without the cancellation's message,
    by which anyio's cancel scopes (the MCP SDK's, Starlette's) recognise theirs: one more turn of the loop lets
    a scope's repeated cancellation arrive, with the library's error as its context. A plain `Task.cancel()`
    does not repeat itself, and then the library's error goes on as it is."""
    await asyncio.sleep(0)


class AnswerHeaders:
    """An answer's headers as `httpx.Headers.get` reads them (case-insensitive, repeated values joined with
    ", "), straight from the library's header map: building an `httpx.Headers` per call costs more."""

    __slots__ = ("_map",)

    def __init__(self, header_map: HeaderMap) -> None:
        self._map = header_map

    def get(self, key: str, default: str | None = None) -> str | None:
        values = self._map.getall(key)
        if not values:
            return default
        return values[0] if len(values) == 1 else ", ".join(values)

    def items(self) -> list[tuple[str, str]]:
        return list(self._map.items())


def leftover_encoding(headers: httpx.Headers | AnswerHeaders) -> str | None:
    """A `Content-Encoding` the library left undecoded (None when the body is plain)."""
    coding: str | None = headers.get("content-encoding")
    if coding is None or coding.strip().lower() in ("", "identity"):
        return None
    return coding


class WireResponse:
    """One streamed answer; `aclose()` gives its connection back (or drops it when the body was left unread)."""

    __slots__ = ("_request", "_response", "_timeout", "_url", "headers", "status_code")

    def __init__(self, response: Response, request: StreamRequest, url: str, timeout: float) -> None:
        self._response = response
        self._request: StreamRequest | None = request
        self._url = url
        self._timeout = timeout
        self.status_code = response.status
        self.headers = AnswerHeaders(response.headers)

    @property
    def reason_phrase(self) -> str:
        """The standard phrase of the status (`reason_for`), looked up when asked: only a failure's message shows it."""
        return reason_for(self.status_code)

    async def _next_chunk(self, whole: bool = False) -> bytes | None:
        """The body's next chunk (None at its end), or with `whole` the rest of it, pyreqwest's errors as httpx's."""
        reader = self._response.body_reader
        try:
            chunk = await (reader.bytes() if whole else reader.read())
        except asyncio.CancelledError:
            await let_cancellation_land()
            raise
        except PyreqwestError as error:
            raise translate_error(error, self._url, self._timeout) from error
        return None if chunk is None else bytes(chunk)

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        while (chunk := await self._next_chunk()) is not None:
            yield chunk

    async def read_up_to(self, cap: int) -> tuple[bytes, bool]:
        """The body as `aiter_bytes` reads it, up to `cap` bytes (what arrived past it is cut off), and whether it
        was read to its end. A coroutine, not an async generator: every call reads one body, and an async
        generator is registered with the loop's hooks (a weak set, in Python) when it starts and dropped from it
        when it is collected.

        A body whose length the answer still declares within the cap is read whole, in one step: the library
        drops `Content-Length` from an answer it decodes (gzip, ...), so a declared length is the body's exact
        size as it arrives, and no decoding can make it larger than read (the cap holds as it does chunk by
        chunk); an answer that ends early is the library's error, as in the loop."""
        declared = self.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) <= cap:
            return await self._next_chunk(whole=True) or b"", True
        chunks: list[bytes] = []
        size = 0
        while True:
            data = await self._next_chunk()  # one place translates the library's errors (a coroutine a chunk)
            if data is None:
                return (chunks[0] if len(chunks) == 1 else b"".join(chunks)), True
            chunks.append(data)
            size += len(data)
            if size > cap:
                return b"".join(chunks)[:cap], False

    async def aclose(self) -> None:
        request, self._request = self._request, None
        if request is not None:
            await request.__aexit__(None, None, None)


class ReqwestWire:
    """Sends the executor's requests (`gateway.http.client.Wire`) on one api's pooled client."""

    def __init__(self, options: ClientOptions | None = None, *, client: Client | None = None,
                 pins: PinnedClients | None = None) -> None:
        """`pins`: host names are resolved and checked by the gateway, each sent on a client pinned to its checked
        address (`gateway.http.resolving`): for servers a spec names, not the operator's base_url."""
        self._client = client if client is not None else build_client(options or ClientOptions())
        self._pins = pins

    async def send(self, method: str, url: str, headers: list[tuple[str, str]], content: bytes | None,
                   timeout: float) -> WireResponse:
        """Send one request; `timeout` seconds cover the wait for a connection, the exchange and the body."""
        client = self._client
        if self._pins is not None:
            try:  # a name's lookup within the call's deadline too (a slow DNS server)
                async with asyncio.timeout(timeout):
                    client = await self._pins.client_for(url) or client
            except TimeoutError:
                raise httpx.ConnectTimeout(f"no address for {host_of(url)} within {timeout:g} s; "
                                           "the request was not sent") from None
        # `timedelta(0, seconds)`: a keyword would be a dict made for the call.
        builder = client.request(method, url).timeout(timedelta(0, timeout))
        try:
            builder = builder.headers(headers)  # the library copies them
            if content:
                builder = builder.body_bytes(content)
            elif method in _EMPTY_BODY_METHODS:
                # hyper sends no length for an empty body; some servers answer 411 to a POST without one.
                builder = builder.header("Content-Length", "0")
            request = builder.build_streamed()
            response = await request.__aenter__()  # its __aexit__ is WireResponse.aclose
        except asyncio.CancelledError:
            await let_cancellation_land()
            raise
        except PyreqwestError as error:
            translated = translate_error(error, url, timeout)
            if self._pins is not None and client is not self._client and isinstance(translated, httpx.ConnectError):
                self._pins.connect_failed(url, client)  # the name's next checked address, next time
            raise translated from error
        except ValueError as error:  # a header name or value the library refuses (a CR or LF in it)
            raise httpx.LocalProtocolError(f"the request to {host_of(url)} can't be sent: {error}") from None
        answer = WireResponse(response, request, url, timeout)
        coding = leftover_encoding(answer.headers)
        if coding is not None:
            await answer.aclose()
            raise httpx.DecodingError(
                f"the answer from {host_of(url)} says `Content-Encoding: {coding}`, which the gateway does not "
                "decode (one of gzip, deflate, br or zstd, not stacked); its body was not read")
        return answer

    async def aclose(self) -> None:
        await self._client.close()
        if self._pins is not None:
            await self._pins.aclose()
