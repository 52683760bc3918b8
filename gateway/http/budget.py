"""A retry budget per api: retries may add at most a fifth to the calls the api got lately.

Per-call retry limits (two retries, idempotent methods only, inside the call's deadline) keep one call
polite; they don't keep a failing api from receiving three times its traffic when every call fails at
once, which is the retry storm that keeps it down. As in Finagle's and Envoy's budgets: every call
deposits `ratio` of a retry, every retry withdraws one, over a sliding window of `window` seconds, with a
reserve of `min_per_second` retries a second so a quiet api still gets its few retries.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

DEFAULT_RATIO = 0.2
DEFAULT_MIN_PER_SECOND = 10.0
DEFAULT_WINDOW = 10.0


class RetryBudget:
    """How many retries the recent calls have earned.

    Args:
        ratio: retries allowed per call in the window (0.2: at most 20% more requests than calls).
        min_per_second: retries allowed a second regardless of traffic.
        window: seconds of history that count.
        clock: a monotonic clock (tests pass their own).
    """

    def __init__(self, *, ratio: float = DEFAULT_RATIO, min_per_second: float = DEFAULT_MIN_PER_SECOND,
                 window: float = DEFAULT_WINDOW, clock: Callable[[], float] = time.monotonic) -> None:
        self.ratio = ratio
        self.reserve = min_per_second * window
        self.window = window
        self._clock = clock
        self._slots: deque[list[float]] = deque()  # [second, calls, retries], oldest first
        self._calls = 0.0
        self._retries = 0.0

    def record_call(self) -> None:
        slots = self._slots
        # Within the newest slot's second nothing needs evicting now: `try_retry`, the one reader of the counts,
        # evicts what has expired itself.
        if slots and slots[-1][0] == int(self._clock()):
            slots[-1][1] += 1
        else:
            self._slot()[1] += 1
        self._calls += 1

    def try_retry(self) -> bool:
        """Take one retry from the budget; False when it is spent (then don't retry)."""
        slot = self._slot()
        if self._retries + 1 > self._calls * self.ratio + self.reserve:
            return False
        slot[2] += 1
        self._retries += 1
        return True

    def _slot(self) -> list[float]:
        now = self._clock()
        second = float(int(now))
        slots = self._slots
        while slots and slots[0][0] <= now - self.window:
            _, calls, retries = slots.popleft()
            self._calls -= calls
            self._retries -= retries
        if not slots or slots[-1][0] != second:
            slots.append([second, 0.0, 0.0])
        return slots[-1]
