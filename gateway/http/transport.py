"""The httpx transport of the gateway's own httpx clients (LLM providers, OAuth token requests, injected
test transports): pyreqwest underneath, and a cap on every decoded body.

httpx decodes `Content-Encoding` itself, all of each network chunk at once, and stacks codings as the header
lists them, so a 6.8 KB answer that says `gzip, gzip` unpacks into gigabytes inside one call. Here the
decoding is the library's: reqwest decodes as the body streams and drops the `Content-Encoding` it undid, so
httpx has nothing left to decode. `CappedTransport` then

- refuses an answer that still carries a `Content-Encoding` (one the library does not undo, or several
  stacked) before httpx could decode it;
- stops every body at `max_body` bytes with `AnswerTooLarge` (an `httpx.DecodingError`), while it streams;
- names the host in connection errors and says whether the request may have run.

pyreqwest ships an httpx transport of its own (`pyreqwest.compatibility.httpx.HttpxTransport`), but it reads
ahead and in full buffers, which holds back a server-sent event stream until 64 KiB have arrived; the few
lines below hand each chunk on as it comes (no read-ahead, `read_chunk`).

Proxies come from the environment through reqwest (`HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY`): httpx clients
on this transport pass `trust_env=False`, or httpx would mount its own proxy transports beside it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import timedelta

import httpx
from pyreqwest.client import Client
from pyreqwest.exceptions import PyreqwestError
from pyreqwest.response import Response

from .library import ClientOptions, build_client, host_of, translate_error
from .wire import leftover_encoding, let_cancellation_land

DEFAULT_MAX_BODY = 64 * 1024 * 1024


class AnswerTooLarge(httpx.DecodingError):
    """A (decoded) body went past the transport's `max_body`."""


class CappedTransport(httpx.AsyncBaseTransport):
    """pyreqwest (or an injected `inner` transport) under httpx, bodies capped while they stream and decode.

    Args:
        inner: a transport that moves the bytes instead of pyreqwest (tests inject in-process ones).
        options: the connections' settings when `inner` is not given.
        max_body: bytes of one body, decoded, at which reading stops with `AnswerTooLarge`.
    """

    def __init__(self, inner: httpx.AsyncBaseTransport | None = None, *, options: ClientOptions | None = None,
                 max_body: int = DEFAULT_MAX_BODY) -> None:
        self.inner = inner
        self.max_body = max_body
        self._client: Client | None = build_client(options or ClientOptions()) if inner is None else None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        if self._client is not None:
            status, headers, stream = await self._send(self._client, request, url)
        else:
            assert self.inner is not None
            response = await self.inner.handle_async_request(request)
            status, headers, stream = response.status_code, response.headers, _InnerStream(response)
        coding = leftover_encoding(httpx.Headers(headers))
        if coding is not None:
            await stream.aclose()
            raise httpx.DecodingError(
                f"the answer from {host_of(url)} says `Content-Encoding: {coding}`, which the gateway does not "
                "decode (one of gzip, deflate, br or zstd, not stacked); its body was not read", request=request)
        return httpx.Response(status_code=status, headers=headers, request=request,
                              stream=_Capped(stream, self.max_body, url))

    async def _send(self, client: Client, request: httpx.Request,
                    url: str) -> tuple[int, httpx.Headers, httpx.AsyncByteStream]:
        # No read-ahead: the library would otherwise hold the answer back until 64 KiB of its body arrived.
        builder = client.request(request.method, url).headers(request.headers.multi_items())
        builder = builder.streamed_read_buffer_limit(0)
        content = await request.aread()
        if content:
            builder = builder.body_bytes(content)
        # httpx's read timeout, as the whole request's deadline (reqwest has no per-request read timeout);
        # clients that want a per-read one say so in `ClientOptions.read_timeout` and pass no timeout here.
        timeouts = request.extensions.get("timeout")
        total = timeouts.get("read") if isinstance(timeouts, dict) else None
        if isinstance(total, int | float):
            builder = builder.timeout(timedelta(seconds=total))
        stack = AsyncExitStack()
        try:
            response = await stack.enter_async_context(builder.build_streamed())
        except asyncio.CancelledError:
            await let_cancellation_land()
            raise
        except PyreqwestError as error:
            raise translate_error(error, url, total) from error
        return response.status, httpx.Headers(list(response.headers.items())), _ReqwestStream(response, stack)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
        if self.inner is not None:
            await self.inner.aclose()


class _ReqwestStream(httpx.AsyncByteStream):
    def __init__(self, response: Response, stack: AsyncExitStack) -> None:
        self._reader = response.body_reader
        self._stack = stack

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            try:
                chunk = await self._reader.read_chunk()
            except asyncio.CancelledError:
                await let_cancellation_land()
                raise
            if chunk is None:
                return
            yield bytes(chunk)

    async def aclose(self) -> None:
        await self._stack.aclose()


class _InnerStream(httpx.AsyncByteStream):
    """The body of an injected transport's answer, as it came (httpx would decode it next: not here)."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._response.is_stream_consumed:  # built whole (an in-process transport's answer)
            yield self._response.content
            return
        async for chunk in self._response.aiter_raw():
            yield chunk

    async def aclose(self) -> None:
        await self._response.aclose()


class _Capped(httpx.AsyncByteStream):
    def __init__(self, stream: httpx.AsyncByteStream, max_body: int, url: str) -> None:
        self._stream = stream
        self._max_body = max_body
        self._url = url

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        try:
            async for chunk in self._stream:
                seen += len(chunk)
                if seen > self._max_body:
                    raise AnswerTooLarge(f"the answer from {host_of(self._url)} exceeds {self._max_body} bytes")
                yield chunk
        except PyreqwestError as error:
            raise translate_error(error, self._url) from error

    async def aclose(self) -> None:
        await self._stream.aclose()
