"""An api's concurrency slots: `max_concurrency` calls at a time, the others waiting their turn in arrival order.

What `asyncio.Semaphore` does, with the usual case in a single step the guard stage takes inline: a free slot is
taken by `take_now` (a counter decremented, no coroutine made and none awaited; the semaphore asks `locked()`, a
generator over its waiters, before and inside its `acquire` coroutine on every call). A call that finds none waits
in `take` for a slot handed to it by `give` (first come, first served: a slot given while calls wait goes to the
longest waiting, never back to the pool for a newcomer to take first). A waiter cancelled (its deadline, its
caller gone) after a slot was handed to it passes that slot on.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["Slots"]


class Slots:
    """`limit` slots; `free` of them not taken.

    Parameters: limit: how many calls may hold a slot at once (at least 1)."""

    __slots__ = ("free", "limit", "_waiters")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.free = limit
        self._waiters: deque[asyncio.Future[None]] = deque()

    def take_now(self) -> bool:
        """Take a free slot at once: True; False when none is free (then `take` waits for one). A slot is free only
        while no call waits: one given back goes to the first waiter instead."""
        if self.free:
            self.free -= 1
            return True
        return False

    async def take(self) -> None:
        """Wait for a slot (after `take_now` found none); it is this caller's once this returns."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a slot as it was cancelled: the next waiter gets it
            # else: still in the queue, cancelled; `give` passes over it
            raise

    def give(self) -> None:
        """Give a slot back: to the longest waiting call, or to the pool when none waits."""
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.free += 1
