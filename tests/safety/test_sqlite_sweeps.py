"""SQLite's retention sweeps go in batches that each commit, as PostgreSQL's do: the writes that come while a big
sweep runs go through between two batches instead of waiting for the whole sweep (one DELETE of every old row held
the file's one write lock throughout).

What a write saw is recorded by the database itself: a trigger (the test's own, on the test's file) notes, when the
write commits, how many old rows were still there. Each write is asked for once the sweep's first batch is on the
store thread, so it is queued behind that batch, ahead of the next (the sweep asks for each batch once the one
before is done): no timing. Unbatched, the write came after the whole sweep and saw none left.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from gateway.store.base import ApprovalRecord, ResponseRecord, RunRecord
from gateway.store.sqlite import SQLiteStore
from gateway.store.sweeps import BATCH

pytestmark = pytest.mark.anyio

OLD = 5 * BATCH
"""Rows of each kind past their retention: five batches."""
CUTOFF = 10_000.0


def _fill(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE seen (what TEXT, old INTEGER)")
        conn.executemany("INSERT INTO audit (time, kind, status, latency_ms, bytes) VALUES (?, 'tool', 'ok', 0, 0)",
                         [(1000.0 + n,) for n in range(OLD)])
        conn.executemany("INSERT INTO responses (id, agent, client, body, messages, created)"
                         " VALUES (?, 'clerk', ?, '{}', '[]', ?)",
                         [(f"resp_{n}", "ci" if n % 2 else None, 1000.0 + n) for n in range(OLD)])
        conn.execute("INSERT OR REPLACE INTO conversation_counts (owner, n) VALUES ('ci', ?), ('', ?)",
                     (OLD // 2, OLD // 2))
        conn.executemany("INSERT INTO runs (id, agent, kind, client, status, state, created, updated)"
                         " VALUES (?, 'clerk', 'call', 'ci', 'done', '{}', ?, ?)",
                         [(f"run_{n}", 1000.0 + n, 1000.0 + n) for n in range(OLD)])
        conn.executemany("INSERT INTO approvals (id, run_id, agent, tool, arguments, call_id, client, status, created)"
                         " VALUES (?, ?, 'clerk', 'restock', '{}', 'c', 'ci', 'approved', ?)",
                         [(f"apr_{n}", f"run_{n}", 1000.0 + n) for n in range(OLD)])
        # What each write saw: the old rows of the table being swept, counted as the write commits.
        conn.execute("CREATE TRIGGER seen_run AFTER INSERT ON runs WHEN NEW.id = 'run_new' BEGIN"
                     " INSERT INTO seen VALUES ('audit', (SELECT count(*) FROM audit WHERE time < 10000)); END")
        conn.execute("CREATE TRIGGER seen_answer AFTER INSERT ON responses WHEN NEW.id = 'resp_new' BEGIN"
                     " INSERT INTO seen VALUES ('answer', (SELECT count(*) FROM responses WHERE created < 10000));"
                     " END")


def _seen(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT what, old FROM seen").fetchall())


async def test_writes_go_through_between_the_batches_of_a_big_sweep(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    SQLiteStore(path).close()  # the tables
    _fill(path)
    store = SQLiteStore(path)
    now = time.time()
    try:
        sweep = asyncio.create_task(store.prune_audit(CUTOFF))
        await asyncio.sleep(0)  # the sweep's first batch is on the store thread
        await store.save_run(RunRecord(id="run_new", agent="clerk", kind="call", client="ci", status="paused",
                                       state={}, created=now, updated=now),
                             [ApprovalRecord(id="apr_new", run_id="run_new", agent="clerk", tool="restock",
                                             arguments={}, call_id="c", client="ci", status="pending", created=now)])
        audit_removed = await sweep

        sweep = asyncio.create_task(store.prune_conversations(CUTOFF))
        await asyncio.sleep(0)
        await store.save_response(ResponseRecord(id="resp_new", agent="clerk", client="ci", body={}, messages=[],
                                                 created=now))
        conversations_removed = await sweep
        approvals = await store.list_approvals(status=None)
        kept = await store.get_response("resp_new")
    finally:
        await store.aclose()
    seen = _seen(path)
    # Each write went through after the first batch, not after the whole sweep.
    assert seen == {"audit": OLD - BATCH, "answer": OLD - BATCH}, seen
    assert audit_removed == OLD
    assert conversations_removed == 2 * OLD  # the conversations and the finished runs (their approvals with them)
    assert [a.id for a in approvals] == ["apr_new"] and kept is not None
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM audit").fetchone() == (0,)
        assert conn.execute("SELECT owner, n FROM conversation_counts ORDER BY owner").fetchall() == [("", 0),
                                                                                                       ("ci", 1)]
