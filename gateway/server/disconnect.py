"""Cancel a request's work when its client goes away, as a plain ASGI middleware.

Starlette keeps running a plain (non-streaming) endpoint after the client disconnected, so a chat
whose caller gave up would go on calling the model and the tools. Once the request body has been
read, this middleware listens for `http.disconnect` (from `WATCH_AFTER` into the request on, so a quick
request costs no watcher) and cancels the app; the cancellation reaches the loop and the tool call in
flight (which is recorded in the audit log and never retried, so no write is repeated). A disconnect
seen after the response is complete is the normal end of the request and cancels nothing.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

WATCH_AFTER = 0.05
"""Seconds into a request before its watcher starts: a request answered sooner (most direct and MCP calls)
never pays for a watcher task, and a client leaving earlier is noticed at this point."""


class DisconnectMiddleware:
    def __init__(self, app: ASGIApp, *, methods: frozenset[str] = frozenset({"POST"}),
                 watch_after: float = WATCH_AFTER) -> None:
        """Parameters: app: the ASGI app; methods: the requests to watch (those that start work);
        watch_after: seconds before a request's watcher starts (see `WATCH_AFTER`)."""
        self.app = app
        self.methods = methods
        self.watch_after = watch_after

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in self.methods:
            await self.app(scope, receive, send)
            return
        # Plain asyncio (a watcher task that cancels this one) rather than an anyio task group: the group,
        # its cancel scope and events were a twentieth of a proxied call's CPU time.
        task = asyncio.current_task()
        assert task is not None
        body_done = asyncio.Event()
        disconnected = asyncio.Event()
        response_done = False
        app_running = True
        cancelled = False

        def cancel_app() -> None:
            nonlocal cancelled
            if app_running and not cancelled:
                cancelled = True
                task.cancel()

        async def app_receive() -> Message:
            if body_done.is_set():
                # The watcher owns the real channel now; the app only ever learns of the disconnect.
                await disconnected.wait()
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.disconnect":
                disconnected.set()
                body_done.set()
            elif not message.get("more_body", False):
                body_done.set()
            return message

        async def app_send(message: Message) -> None:
            nonlocal response_done
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                response_done = True
            await send(message)

        async def watch() -> None:
            await body_done.wait()
            if disconnected.is_set():
                cancel_app()
                return
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    disconnected.set()
                    if not response_done:
                        cancel_app()
                    return

        watcher: asyncio.Future[None] | None = None

        def start_watching() -> None:
            nonlocal watcher
            if app_running:
                watcher = asyncio.ensure_future(watch())
                watcher.add_done_callback(_retrieve)

        timer = asyncio.get_running_loop().call_later(self.watch_after, start_watching)
        try:
            await self.app(scope, app_receive, app_send)
        except asyncio.CancelledError:
            if cancelled and task.uncancel() == 0:
                return  # our own cancellation (the client left), nobody else's: the request just ends
            raise
        finally:
            app_running = False
            timer.cancel()
            if watcher is not None:
                watcher.cancel()
        if cancelled:  # cancelled as the app returned: the cancellation was not delivered, take it back
            task.uncancel()


def _retrieve(watcher: asyncio.Future[None]) -> None:
    # A failed receive in the watcher ends only the watching; it must not be logged as never retrieved.
    if not watcher.cancelled():
        watcher.exception()
