"""One api's concurrency slots, handed over fairly among its caller groups.

`asyncio.Semaphore` gives a freed slot to whoever queued first: a client that queued calls behind its sixteen
running ones kept the api from every other client, whose calls waited out their timeout. Here a freed slot goes
to the waiting group that holds the fewest slots now (ties: the group whose first waiter has waited longest), so
another client's call runs at the next freed slot however many calls the first one queued. A group may also be
capped (`per_group`): a call over the cap waits, in the same fair order, for a slot its own group gives back,
even while the api has free ones.

The invariant that keeps the free path short: while a slot is free, every waiting group is at its cap (a slot
given back goes at once to a waiter that may take it). So `take` passes nobody when it takes a free slot: two
counters and no task, no future, no timeout scope. The queues are walked only when a slot comes back while
callers wait.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque

__all__ = ["FairSlots"]

Waiter = tuple[int, "asyncio.Future[None]"]
"""A waiting call: its place in the order of arrival and the future a slot is handed over through."""


class FairSlots:
    """An api's `limit` slots; each group holds at most `per_group` of them (None: any number)."""

    __slots__ = ("_arrivals", "_held", "_queues", "free", "limit", "most_waiting", "per_group")

    def __init__(self, limit: int, per_group: int | None = None, most_waiting: int | None = None) -> None:
        """`most_waiting`: calls of one group that may wait at once (None: any number)."""
        self.limit = limit
        self.per_group = min(per_group or limit, limit)
        self.most_waiting = most_waiting
        self.free = limit
        self._held: dict[str, int] = {}
        """Slots each group holds now (a group holding none has no entry)."""
        self._queues: dict[str, deque[Waiter]] = {}
        """Each group's waiting calls, first come first (a group with none waiting has no entry)."""
        self._arrivals = itertools.count()

    def held(self, group: str) -> int:
        return self._held.get(group, 0)

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot now (counted in one pass in C, so another thread may read it while the loop
        changes the queues)."""
        return sum(map(len, self._queues.values()))

    def take(self, group: str) -> bool:
        """A slot now, when one is free and the group is under its cap (the invariant: nobody is passed)."""
        held = self._held.get(group, 0)
        if self.free and held < self.per_group:
            self.free -= 1
            self._held[group] = held + 1
            return True
        return False

    def may_wait(self, group: str) -> bool:
        """Whether the group has room for one more waiting call (`most_waiting`): asked before `wait`, with no await
        between, so no two calls pass the cap together."""
        most = self.most_waiting
        return most is None or len(self._queues.get(group, ())) < most

    async def wait(self, group: str, seconds: float) -> bool:
        """Wait at most `seconds` for a slot `release` hands over; False when none came in time.

        A waiter that times out or is cancelled after a slot was handed to it (the hand-over and its wake-up are
        two steps of the loop) gives the slot back, so the count stays whole."""
        handed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiter = (next(self._arrivals), handed)
        self._queues.setdefault(group, deque()).append(waiter)
        try:
            async with asyncio.timeout(seconds):
                await handed
        except BaseException as exc:
            if handed.done() and not handed.cancelled():
                self.release(group)
            else:
                self._leave(group, waiter)
            if isinstance(exc, TimeoutError):
                return False
            raise
        return True

    def release(self, group: str) -> None:
        """Give back one of the group's slots; a waiter that may take it gets it at once."""
        held = self._held[group] - 1
        if held:
            self._held[group] = held
        else:
            del self._held[group]
        self.free += 1
        if self._queues:
            self._hand_over()

    def _hand_over(self) -> None:
        """Free slots to waiters: each to the group under its cap that holds the fewest, ties to the longest
        waiting."""
        while self.free and self._queues:
            chosen: tuple[int, int, str] | None = None
            for group, queue in self._queues.items():
                held = self._held.get(group, 0)
                if held < self.per_group and (chosen is None or (held, queue[0][0]) < chosen[:2]):
                    chosen = (held, queue[0][0], group)
            if chosen is None:
                return  # every waiting group is at its cap: the slot stays free for a new caller
            group = chosen[2]
            queue = self._queues[group]
            _, handed = queue.popleft()
            if not queue:
                del self._queues[group]
            if handed.done():
                continue  # cancelled; its task has not yet run to take itself off the queue
            self.free -= 1
            self._held[group] = chosen[0] + 1
            handed.set_result(None)

    def _leave(self, group: str, waiter: Waiter) -> None:
        queue = self._queues.get(group)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            if not queue:
                del self._queues[group]
