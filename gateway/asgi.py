"""Small ASGI pieces shared by the doors, their middleware and the metrics middleware."""

from __future__ import annotations

from starlette.types import Message, Send


class StatusWatch:
    """A `send` that passes every message on and remembers the status of the answer (`default` until it starts)."""

    __slots__ = ("send", "status")

    def __init__(self, send: Send, default: int = 0) -> None:
        self.send = send
        self.status = default

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
        await self.send(message)


async def send_json(send: Send, status: int, body: bytes, *headers: tuple[bytes, bytes]) -> None:
    """One whole JSON answer (`headers`: beside its length and type)."""
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json"),
                            *headers]})
    await send({"type": "http.response.body", "body": body})
