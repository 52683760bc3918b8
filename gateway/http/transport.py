"""The httpx transport of the gateway's own httpx clients (LLM providers, OAuth token requests, injected
test transports): pyreqwest underneath, and a cap on every decoded body.

httpx decodes `Content-Encoding` itself, all of each network chunk at once, and stacks codings as the header
lists them, so a 6.8 KB answer that says `gzip, gzip` unpacks into gigabytes inside one call. Here the
decoding is the library's: `pyreqwest.compatibility.httpx.HttpxTransport` hands httpx bodies reqwest has
already decoded as they streamed, without their `Content-Encoding`. `CappedTransport` then

- refuses an answer that still carries a `Content-Encoding` (one the library does not undo, or several
  stacked) before httpx could decode it;
- stops every body at `max_body` bytes with `httpx.DecodingError`, while it streams;
- names the host in connection errors and says whether the request may have run.

Proxies come from the environment through reqwest (`HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY`): httpx clients
built on this transport pass `trust_env=False`, or httpx would mount its own proxy transports beside it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
from pyreqwest.compatibility.httpx import HttpxTransport
from pyreqwest.exceptions import PyreqwestError

from .library import ClientOptions, build_client, host_of, translate_error
from .wire import leftover_encoding

DEFAULT_MAX_BODY = 64 * 1024 * 1024


class BodyTooLarge(httpx.DecodingError):
    """A (decoded) body went past the transport's `max_body`."""


class CappedTransport(httpx.AsyncBaseTransport):
    """Wraps `inner` (default: pyreqwest with `options`): bodies capped while they stream and decode.

    Args:
        inner: the transport that moves the bytes (tests inject in-process ones).
        options: the connections' settings when `inner` is not given.
        max_body: bytes of one body, decoded, at which reading stops with `BodyTooLarge`.
    """

    def __init__(self, inner: httpx.AsyncBaseTransport | None = None, *, options: ClientOptions | None = None,
                 max_body: int = DEFAULT_MAX_BODY) -> None:
        self.inner = inner if inner is not None else HttpxTransport(build_client(options or ClientOptions()))
        self.max_body = max_body

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        try:
            response = await self.inner.handle_async_request(request)
        except httpx.TransportError as error:
            cause = error.__cause__
            if isinstance(cause, PyreqwestError):
                raise translate_error(cause, url) from cause
            raise
        coding = leftover_encoding(response.headers)
        if coding is not None:
            await response.aclose()
            raise httpx.DecodingError(
                f"the answer from {host_of(url)} says `Content-Encoding: {coding}`, which the gateway does not "
                "decode (one of gzip, deflate, br or zstd, not stacked); its body was not read", request=request)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_CappedStream(response, self.max_body, url),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class _CappedStream(httpx.AsyncByteStream):
    def __init__(self, response: httpx.Response, max_body: int, url: str) -> None:
        self._response = response
        self._max_body = max_body
        self._url = url

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        if self._response.is_stream_consumed:  # built whole (an in-process transport's answer)
            if len(self._response.content) > self._max_body:
                raise BodyTooLarge(f"the answer from {host_of(self._url)} exceeds {self._max_body} bytes")
            yield self._response.content
            return
        try:
            async for chunk in self._response.aiter_raw():
                seen += len(chunk)
                if seen > self._max_body:
                    raise BodyTooLarge(f"the answer from {host_of(self._url)} exceeds {self._max_body} bytes")
                yield chunk
        except httpx.TransportError as error:
            cause = error.__cause__
            if isinstance(cause, PyreqwestError):
                raise translate_error(cause, self._url) from cause
            raise

    async def aclose(self) -> None:
        await self._response.aclose()

