"""Retention sweeps in batches, each its own transaction (`gateway.store.postgres_sweeps`, `sqlite_sweeps`): one
removes at most `BATCH` rows, and a sweep runs them until one removes fewer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

BATCH = 1000
"""Rows one batch removes at most: milliseconds of work (of SQLite's write lock), far inside any timeout."""

B = TypeVar("B")


async def in_batches(run: Callable[[B], Awaitable[int]], batch: B) -> int:
    """`batch` run (by `run`: a transaction of its own, bounded by the store) until one removes fewer than `BATCH`;
    the total."""
    total = 0
    while True:
        removed = await run(batch)
        total += removed
        if removed < BATCH:
            return total
