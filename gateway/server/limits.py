"""Request size limit: a plain ASGI middleware answering 413 in OpenAI's error shape.

A declared `Content-Length` over the limit is refused before the body is read (one within it is passed on
untouched: the server frames the body by that length); a chunked body is counted as it arrives and refused
once it passes the limit, so no route ever buffers more than that.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import APIError


class _BodyTooLarge(APIError):
    """Raised from `receive` mid-body; the app's APIError handler answers it like any other error."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"The request body is larger than the limit of {limit} bytes.",
                         headers={"Connection": "close"})


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_body_bytes: int, *, exempt_prefixes: tuple[str, ...] = ()) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        # The MCP transport enforces its own limit and answers in JSON-RPC's shape.
        self.exempt_prefixes = exempt_prefixes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(self.exempt_prefixes):
            await self.app(scope, receive, send)
            return
        declared, chunked = _framing(scope)
        if declared is not None and not chunked:
            if declared > self.max_body_bytes:
                await self._refuse(scope, receive, send)
            else:  # the server reads no more than the declared length: nothing to count
                await self.app(scope, receive, send)
            return

        received = 0
        response_started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise _BodyTooLarge(self.max_body_bytes)
            return message

        async def watching_send(message: Message) -> None:
            nonlocal response_started
            if message["type"] == "http.response.start":
                response_started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, watching_send)
        except _BodyTooLarge as exc:
            if not response_started:
                await exc.response()(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        await _BodyTooLarge(self.max_body_bytes).response()(scope, receive, send)


def _framing(scope: Scope) -> tuple[int | None, bool]:
    """The declared Content-Length (None: absent or unreadable), and whether a Transfer-Encoding is present."""
    length: int | None = None
    chunked = False
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                length = None
        elif name == b"transfer-encoding":
            chunked = True
    return length, chunked
