"""SQLite's retention sweeps, in batches that each commit, as PostgreSQL's are (`gateway.store.postgres_sweeps`).

SQLite has one write lock for the whole file. One DELETE of every row past its retention held it for the whole
sweep: every other write waited behind it, the store thread's (an approval, a paused run, a stored conversation)
and the audit rows of calls (inline writers find the lock taken and queue behind it), as did other processes on
the file (`gateway serve --workers`, `gateway approvals`) up to their busy timeout. Here a sweep is batches of
`BATCH` rows, each its own transaction and its own job on the store thread: the writes that came meanwhile (queued
on that thread behind the batch, or retried by another process) go through between two batches, and what the
batches before removed stays removed should one fail.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable

from .sqlite_tables import COUNT_FEWER
from .sweeps import BATCH

Batch = Callable[[sqlite3.Connection], int]
"""One batch on the store thread, inside its own transaction; how many rows it removed."""

# The oldest rows by id, up to the first at or past the cutoff: ids follow commit order, which is time order (as
# the one DELETE before did for the whole table). Only the batch's rows are read to find where old ends,
# so a sweep reads each row once however many batches it takes.
_AUDIT = ("DELETE FROM audit WHERE id IN (SELECT id FROM audit ORDER BY id LIMIT ?2) AND id < COALESCE("
          "(SELECT min(id) FROM (SELECT id, time FROM audit ORDER BY id LIMIT ?2) WHERE time >= ?1),"
          " (SELECT max(id) + 1 FROM audit))")
_ANSWERS = ("DELETE FROM responses WHERE rowid IN (SELECT rowid FROM responses WHERE created < ? LIMIT ?)"
            " RETURNING coalesce(client, '')")
_RUNS = ("DELETE FROM runs WHERE rowid IN (SELECT rowid FROM runs WHERE status IN ('done', 'failed') AND updated < ?"
         " LIMIT ?) RETURNING id")



def audit_rows(before: float) -> Batch:
    """Audit rows older than `before`, the oldest first."""
    def batch(conn: sqlite3.Connection) -> int:
        return conn.execute(_AUDIT, (before, BATCH)).rowcount

    return batch


def stored_answers(before: float) -> Batch:
    """Stored conversations made before `before`, each owner's count lowered by its own in the same transaction."""
    def batch(conn: sqlite3.Connection) -> int:
        owners = Counter(row[0] for row in conn.execute(_ANSWERS, (before, BATCH)).fetchall())
        conn.executemany(COUNT_FEWER, ((n, owner) for owner, n in owners.items()))
        return sum(owners.values())

    return batch


def finished_runs(before: float) -> Batch:
    """Finished runs (done, failed) last moved before `before`, with their approvals."""
    def batch(conn: sqlite3.Connection) -> int:
        finished = [row[0] for row in conn.execute(_RUNS, (before, BATCH)).fetchall()]
        conn.executemany("DELETE FROM approvals WHERE run_id = ?", ((run_id,) for run_id in finished))
        return len(finished)

    return batch
