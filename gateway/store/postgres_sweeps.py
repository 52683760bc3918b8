"""PostgreSQL's retention sweeps, in batches that each commit.

One DELETE of every row past its retention is one transaction: on a large table it can outlast the server's
`statement_timeout` (or the gateway's own bound), and cut off it rolls all of it back; the next sweep, an hour later,
starts from the same rows and is cut off again, so the table only grows. Here a sweep is batches of `BATCH` rows,
each its own transaction, bounded as every other question is (`gateway.shared_state_timeout`): one cut off loses only
itself, and what the batches before it removed stays removed, so every sweep makes progress. A row another
transaction holds (a call's row whose outcome is being written, a run being claimed) is skipped rather than waited
for (`SKIP LOCKED`): the next sweep takes it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from .sweeps import BATCH

_AUDIT = ("DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE time < %s ORDER BY time LIMIT %s"
          " FOR UPDATE SKIP LOCKED)")
_ANSWERS = ("WITH gone AS (DELETE FROM responses WHERE id IN (SELECT id FROM responses WHERE created < %s LIMIT %s"
            " FOR UPDATE SKIP LOCKED) RETURNING client) SELECT coalesce(client, ''), count(*) FROM gone GROUP BY 1")
_RUNS = ("DELETE FROM runs WHERE id IN (SELECT id FROM runs WHERE status IN ('done', 'failed') AND updated < %s"
         " LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING id")

Connection = psycopg.AsyncConnection[Any]
Batch = Callable[[Connection], Awaitable[int]]
"""One batch on a connection inside its own transaction; how many rows it removed."""



def audit_rows(before: float) -> Batch:
    """Audit rows older than `before`, the oldest first."""
    async def batch(conn: Connection) -> int:
        cursor = await conn.execute(_AUDIT, (before, BATCH))
        return cursor.rowcount

    return batch


def stored_answers(before: float) -> Batch:
    """Stored conversations older than `before`, each owner's count lowered by its own in the same transaction."""
    async def batch(conn: Connection) -> int:
        cursor = await conn.execute(_ANSWERS, (before, BATCH))
        gone = await cursor.fetchall()
        async with conn.cursor() as counts:
            await counts.executemany("UPDATE conversation_counts SET n = greatest(n - %s, 0) WHERE owner = %s",
                                     [(n, owner) for owner, n in gone])
        return int(sum(n for _, n in gone))

    return batch


def finished_runs(before: float) -> Batch:
    """Finished runs (done, failed) last moved before `before`, with their approvals."""
    async def batch(conn: Connection) -> int:
        cursor = await conn.execute(_RUNS, (before, BATCH))
        finished = [row[0] for row in await cursor.fetchall()]
        if finished:
            await conn.execute("DELETE FROM approvals WHERE run_id = ANY(%s)", (finished,))
        return len(finished)

    return batch
