"""Waiters told by Redis that a slot was handed to them: one pub/sub subscription per process, no polling.

A call waiting for an api's slot across instances (`gateway.store.redis_slot_queue`) queues a ticket in Redis and waits
here. The script that frees a slot hands it to the next waiter and publishes `<state> <seconds> <ticket>` on one
channel ("ok": the slot is the ticket's; "open": the api's breaker opened, paused that many seconds): every
instance's one subscription hears it and wakes the waiter holding that ticket, if it is here.

A message published while the subscription is down is lost (pub/sub keeps nothing), so each time the subscription
is (re)made every waiter here is told to look for itself ("check"), and the lease keeper tells a waiter to look
when a renewal finds its ticket gone from the queue; a waiter never depends on one message alone.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import redis
import redis.asyncio as aioredis

from .postgres_schema import safe_url
from .redis_scripts import answer_within

logger = logging.getLogger("gateway.safety")

CHECK = ("check", 0.0)
"""What a waiter is told when it should look at its ticket itself (a message may have been lost)."""
RESUBSCRIBE = 0.5
"""Seconds between two tries to subscribe again after the subscription failed."""

Told = tuple[str, float]
"""(state, seconds): ("ok", 0), ("open", seconds until a probe may pass) or `CHECK`."""


class Wakeups:
    """The waiters of this process, by ticket, and the subscription that wakes them.

    Parameters:
        client: the Redis client (`RedisCounters.client`); the subscription takes one connection of its own.
        url: names the server in warnings.
        channel: where the scripts publish hand-overs.
    """

    def __init__(self, client: aioredis.Redis, url: str, channel: str) -> None:
        self.client = client
        self.url = url
        self.channel = channel
        self._waiting: dict[str, asyncio.Queue[Told]] = {}
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Event | None = None

    async def expect(self, ticket: str, seconds: float) -> asyncio.Queue[Told]:
        """Where `ticket`'s waiter hears what happened to it, registered before the ticket is queued (its message
        can arrive before the script's reply). Waits at most `seconds`, and no longer than Redis is waited for
        (`gateway.shared_state_timeout`, the client's socket timeout), for the subscription to be made: past that
        the waiter still learns through `CHECK` (the next subscription, the lease keeper's renewal). Bounded by the
        call's own wait alone, every call of a Redis outage waited out its api's timeout here (60 s) before the
        entry script could tell it Redis was down (user46)."""
        bound = answer_within(self.client)
        if bound is not None:
            seconds = min(seconds, bound)
        told: asyncio.Queue[Told] = asyncio.Queue()
        self._waiting[ticket] = told
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            # done: cancelled with its event loop (a test's, a reloaded server's), or failed
            self._ready = asyncio.Event()
            self._task = loop.create_task(self._listen(self._ready))
        assert self._ready is not None
        if not self._ready.is_set():
            try:
                async with asyncio.timeout(seconds):
                    await self._ready.wait()
            except TimeoutError:
                pass
        return told

    def forget(self, ticket: str) -> None:
        self._waiting.pop(ticket, None)

    def tell(self, ticket: str, told: Told = CHECK) -> None:
        """Wake `ticket`'s waiter, if it is still here."""
        queue = self._waiting.get(ticket)
        if queue is not None:
            queue.put_nowait(told)

    async def _listen(self, ready: asyncio.Event) -> None:
        warned = False  # once an outage, not every RESUBSCRIBE seconds of it
        while True:
            pubsub = self.client.pubsub()
            try:
                await pubsub.subscribe(self.channel)
                async for message in pubsub.listen():
                    warned = False
                    self._heard(message, ready)
            except (redis.RedisError, OSError) as exc:
                ready.clear()
                if not warned:
                    logger.warning("waiters for apis' slots hear no hand-overs until Redis at %s answers again (each "
                                   "looks for itself then): %s", safe_url(self.url), exc)
                    warned = True
                await asyncio.sleep(RESUBSCRIBE)
            finally:
                await asyncio.shield(pubsub.aclose())

    def _heard(self, message: dict[str, Any], ready: asyncio.Event) -> None:
        if message["type"] == "subscribe":
            ready.set()
            for ticket in list(self._waiting):  # what was published while unsubscribed is lost: each looks
                self.tell(ticket)
        elif message["type"] == "message":
            data = message["data"]
            try:
                state, seconds, ticket = (data.decode() if isinstance(data, bytes) else str(data)).split(" ", 2)
                told = (state, float(seconds))
            except ValueError:
                # Not the scripts' (a server's pub/sub channels are shared by all its databases and clients):
                # passed over. Raised, it ended the subscription, and every waiter here heard nothing more.
                return
            self.tell(ticket, told)

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
