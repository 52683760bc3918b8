"""Cancel a request's work when its client goes away: the watch the request envelope runs
(`gateway.server.envelope.RequestEnvelope(watch=...)`), the one layer that holds a request's frame.

Starlette keeps running a plain (non-streaming) endpoint after the client disconnected, so a chat
whose caller gave up would go on calling the model and the tools. Once the request body has been
read, the watch listens for `http.disconnect` (from `WATCH_AFTER` into the request on, so a quick
request costs no watcher) and cancels the app; the cancellation reaches the loop and the tool call in
flight (which is recorded in the audit log and never retried, so no write is repeated). A disconnect
seen after the response is complete is the normal end of the request and cancels nothing.
"""

from __future__ import annotations

import asyncio

from starlette.types import Message, Receive, Send

WATCH_AFTER = 0.05
"""Seconds into a request before its watcher starts: a request answered sooner (most direct and MCP calls)
never pays for a watcher task, and a client leaving earlier is noticed at this point."""
_TIMER_SLACK = 0.001
"""A timer may fire this much early (uvloop counts in milliseconds): requests due by then are due now."""


class DisconnectWatch:
    """The watch itself, for the one layer that runs it (the request envelope): `start` registers a request, `end`
    and `settle` put its cancellation right once the app returned.

    Parameters: watch_after: seconds before a request's watcher starts (see `WATCH_AFTER`)."""

    __slots__ = ("watch_after", "_sweepers")

    def __init__(self, watch_after: float = WATCH_AFTER) -> None:
        self.watch_after = watch_after
        self._sweepers: dict[asyncio.AbstractEventLoop, _Sweeper] = {}

    def sweeper(self) -> _Sweeper:
        """The running loop's sweeper (made on its first request)."""
        loop = asyncio.get_running_loop()
        sweeper = self._sweepers.get(loop)
        if sweeper is None:
            # One app may be served by several loops in turn (test clients): forget those that are gone.
            for gone in [other for other in self._sweepers if other.is_closed()]:
                del self._sweepers[gone]
            sweeper = self._sweepers[loop] = _Sweeper(loop, self.watch_after)
        return sweeper

    def start(self, receive: Receive, send: Send) -> Watched:
        """Watch the request being served by the current task: the app gets the result's `receive` and `send`."""
        # Plain asyncio (a watcher task that cancels this one) rather than an anyio task group: most requests end
        # before anyone waits, and the group, its cancel scope and events cost every one of them.
        loop = asyncio.get_running_loop()
        sweeper = self._sweepers.get(loop) or self.sweeper()
        task = asyncio.current_task(loop)
        assert task is not None
        request = Watched(receive, send, task)
        request.pending = sweeper.add(request)
        return request


class Watched:
    """One watched request: the app's `receive` and `send`, and the watcher that cancels the app's task. Its
    `send` also keeps the answer's status (`status`, 0 until it starts), so the layer that runs the watch needs no
    second wrapper of its own to learn it.

    An object with flags rather than closures over events: every direct call passes through here, and most end
    before anyone waits, so an event is made only for a wait (the watcher's, or the app's past its body). The flags
    start as the class's values (no `__slots__`): a request sets only those that change, most of them none."""

    status = 0
    body_done = False
    disconnected = False
    response_done = False
    app_running = True
    cancelled = False
    watcher: asyncio.Future[None] | None = None
    _body_event: asyncio.Event | None = None
    _disconnect_event: asyncio.Event | None = None
    pending: dict[Watched, float] | None = None
    """The sweeper's queue this request waits in until its watcher is due."""

    def __init__(self, receive: Receive, send: Send, task: asyncio.Task[object]) -> None:
        self._receive = receive
        self._send = send
        self.task = task

    async def receive(self) -> Message:
        if self.body_done:
            # The watcher owns the real channel now; the app only ever learns of the disconnect.
            if not self.disconnected:
                if self._disconnect_event is None:
                    self._disconnect_event = asyncio.Event()
                await self._disconnect_event.wait()
            return {"type": "http.disconnect"}
        message = await self._receive()
        if message["type"] == "http.disconnect":
            self._set_disconnected()
            self._set_body_done()
        elif not message.get("more_body", False):
            self._set_body_done()
        return message

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self.status = int(message["status"])
        elif kind == "http.response.body" and not message.get("more_body", False):
            self.response_done = True
        await self._send(message)

    def ended_by_us(self) -> bool:
        """Asked of a `CancelledError` out of the app: whether it is the watch's own (the client left) and no one
        else's, so that the request just ends."""
        return self.cancelled and self.task.uncancel() == 0

    def end(self) -> None:
        """The app returned (or raised): no watcher is started for it any more, and a running one stops."""
        self.app_running = False
        pending = self.pending
        if pending is not None:
            pending.pop(self, None)  # ended before its watcher was due: its sweeper never sees it again
        if self.watcher is not None:
            self.watcher.cancel()

    def settle(self) -> None:
        """After an app that returned: a cancellation made as it returned was not delivered, take it back."""
        if self.cancelled:
            self.task.uncancel()

    def start_watching(self) -> None:
        if self.app_running:
            self.watcher = asyncio.ensure_future(self._watch())
            self.watcher.add_done_callback(_retrieve)

    async def _watch(self) -> None:
        if not self.body_done:
            if self._body_event is None:
                self._body_event = asyncio.Event()
            await self._body_event.wait()
        if self.disconnected:
            self._cancel_app()
            return
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self._set_disconnected()
                if not self.response_done:
                    self._cancel_app()
                return

    def _cancel_app(self) -> None:
        if self.app_running and not self.cancelled:
            self.cancelled = True
            self.task.cancel()

    def _set_body_done(self) -> None:
        self.body_done = True
        if self._body_event is not None:
            self._body_event.set()

    def _set_disconnected(self) -> None:
        self.disconnected = True
        if self._disconnect_event is not None:
            self._disconnect_event.set()


class _Sweeper:
    """Starts the watchers of one loop's requests once they are `delay` old, with one timer for all of them.

    Rather than a timer per request (`call_later`, then `cancel` when it ends) on every direct call: the requests
    all wait the same delay, so they are due in arrival order, and one ordered dict and one timer serve them all.
    A request that ends leaves the dict at once (most end before they are due), so a sweep visits only the
    requests still running."""

    __slots__ = ("loop", "delay", "pending", "timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, delay: float) -> None:
        self.loop = loop
        self.delay = delay
        self.pending: dict[Watched, float] = {}
        """Running requests whose watcher has not started -> when it is due, in arrival (and so due) order."""
        self.timer: asyncio.TimerHandle | None = None

    def add(self, request: Watched) -> dict[Watched, float]:
        """Watch `request` from `delay` on; the dict it waits in (the request takes itself out when it ends)."""
        due = self.loop.time() + self.delay
        self.pending[request] = due
        if self.timer is None:
            self.timer = self.loop.call_at(due, self._sweep)
        return self.pending

    def _sweep(self) -> None:
        self.timer = None
        pending = self.pending
        soon = self.loop.time() + _TIMER_SLACK
        due_now = []
        for request, due in pending.items():
            if due > soon:
                self.timer = self.loop.call_at(due, self._sweep)
                break
            due_now.append(request)
        for request in due_now:
            del pending[request]
            request.start_watching()


def _retrieve(watcher: asyncio.Future[None]) -> None:
    # A failed receive in the watcher ends only the watching; it must not be logged as never retrieved.
    if not watcher.cancelled():
        watcher.exception()
