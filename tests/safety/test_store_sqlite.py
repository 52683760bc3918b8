"""The SQLite store's inline audit path: rows commit on the caller's thread, or fall back to the store thread."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from pathlib import Path

import pytest

from gateway.store import AUDIT_RUNNING, AuditRow, SQLiteStore
from gateway.store.sqlite_tables import INSERT_AUDIT, audit_values

pytestmark = pytest.mark.anyio


def _row(tool: str = "t") -> AuditRow:
    return AuditRow(time=1.0, kind="tool", agent="clerk", tool=tool)


def _tools_by_id(path: Path) -> dict[int, str]:
    """What another connection (as another process would) sees committed."""
    with contextlib.closing(sqlite3.connect(path)) as other:
        return dict(other.execute("SELECT id, tool FROM audit").fetchall())


async def _ticks_until_done(task: asyncio.Future[None], ticks: int = 5) -> int:
    """Let the loop run `ticks` rounds; how many it ran with `task` still pending."""
    pending = 0
    for _ in range(ticks):
        await asyncio.sleep(0)
        pending += not task.done()
    return pending


async def test_a_row_commits_on_the_callers_thread_while_the_store_thread_is_busy(tmp_path: Path) -> None:
    path = tmp_path / "inline.db"
    store = SQLiteStore(path)
    release = threading.Event()
    busy = store._thread.submit(release.wait)  # the store thread is occupied, as by a long transaction
    try:
        row = _row("inline")
        task = asyncio.ensure_future(store.add_audit(row))
        await asyncio.sleep(0)
        # Done without the store thread: the row went in on this loop's thread.
        assert task.done()
        await task
        assert row.id == 1
        assert _tools_by_id(path) == {1: "inline"}
    finally:
        release.set()
        await asyncio.wrap_future(busy)
        await store.aclose()


async def test_a_lock_held_by_another_connection_queues_the_row_without_blocking_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    store = SQLiteStore(path)
    holder = sqlite3.connect(path, isolation_level=None)  # as `gateway approvals` in another process would
    holder.execute("BEGIN IMMEDIATE")
    row = _row("held")
    task = asyncio.ensure_future(store.add_audit(row))
    # The loop keeps turning while the row waits (on the store thread) for the lock.
    assert await _ticks_until_done(task) == 5
    assert _tools_by_id(path) == {}
    holder.execute("COMMIT")
    holder.close()
    await task
    assert row.id is not None
    assert _tools_by_id(path) == {row.id: "held"}
    await store.aclose()


async def test_a_lock_held_by_the_store_thread_queues_the_row_behind_that_transaction(tmp_path: Path) -> None:
    path = tmp_path / "thread.db"
    store = SQLiteStore(path)
    release = threading.Event()

    def long_transaction(conn: sqlite3.Connection) -> None:  # a save_run or take_tokens that takes a while
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO buckets (key, tokens, updated) VALUES ('k', 1, 1)")
        release.wait()
        conn.execute("COMMIT")

    holding = asyncio.ensure_future(store._run(long_transaction))
    while not store._conn.in_transaction:  # type: ignore[union-attr]
        await asyncio.sleep(0)
    row = _row("after")
    task = asyncio.ensure_future(store.add_audit(row))
    assert await _ticks_until_done(task) == 5
    release.set()
    await holding
    await task
    assert _tools_by_id(path) == {row.id: "after"}
    await store.aclose()


async def test_rows_split_between_inline_and_queued_paths_all_land_with_their_own_ids(tmp_path: Path) -> None:
    path = tmp_path / "split.db"
    store = SQLiteStore(path)
    rows = [_row(f"t{i}") for i in range(90)]
    from_thread = [_row(f"loop2-{i}") for i in range(30)]

    async def other_loop_writes() -> None:
        await asyncio.gather(*(store.add_audit(row) for row in from_thread))

    holder = sqlite3.connect(path, isolation_level=None)
    first = [asyncio.ensure_future(store.add_audit(row)) for row in rows[:30]]
    await asyncio.sleep(0)
    holder.execute("BEGIN IMMEDIATE")
    held = [asyncio.ensure_future(store.add_audit(row)) for row in rows[30:60]]
    await asyncio.sleep(0)
    holder.execute("COMMIT")
    holder.close()
    # A second event loop in another thread writes while this one does: the inline lock is only tried.
    worker = threading.Thread(target=asyncio.run, args=(other_loop_writes(),))
    worker.start()
    rest = [asyncio.ensure_future(store.add_audit(row)) for row in rows[60:]]
    await asyncio.gather(*first, *held, *rest)
    await asyncio.to_thread(worker.join)
    await store.aclose()
    everything = rows + from_thread
    assert [row.id for row in rows[:30]] == list(range(1, 31))  # inline, in order, before the lock was taken
    assert sorted(row.id for row in everything if row.id is not None) == list(range(1, 121))
    assert _tools_by_id(path) == {row.id: row.tool for row in everything}


async def test_the_wal_stays_bounded_while_rows_commit_inline(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    store = SQLiteStore(path)
    for index in range(9000):
        await store.add_audit(_row(f"t{index}"))
    await store.list_audit(limit=1)  # runs on the store thread after every checkpoint asked for
    wal_bytes = Path(f"{path}-wal").stat().st_size
    page_size = store._conn.execute("PRAGMA page_size").fetchone()[0]  # type: ignore[union-attr]
    await store.aclose()
    # Without checkpoints the 9000 rows take ~9000 WAL pages; with them, about 1000 (SQLite's own default) plus
    # the rows that commit while a checkpoint waits for the store thread (~700 measured on a busy machine).
    assert wal_bytes < 4500 * (page_size + 24)
    assert len(_tools_by_id(path)) == 9000


async def test_an_inline_write_error_reaches_the_caller_and_the_next_row_commits(tmp_path: Path) -> None:
    path = tmp_path / "error.db"
    store = SQLiteStore(path)
    with pytest.raises(sqlite3.IntegrityError):
        await store.add_audit(AuditRow(time=1.0, kind=None, agent="clerk"))  # type: ignore[arg-type]
    row = _row("next")
    await store.add_audit(row)  # the failed transaction was rolled back: the connection is usable
    assert _tools_by_id(path) == {row.id: "next"}
    await store.aclose()


async def test_close_writes_queued_rows_and_closes_both_connections(tmp_path: Path) -> None:
    path = tmp_path / "close.db"
    store = SQLiteStore(path)
    await store.add_audit(_row("inline"))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    queued = [asyncio.ensure_future(store.add_audit(_row("queued"))) for _ in range(3)]
    await asyncio.sleep(0)
    holder.execute("COMMIT")
    holder.close()
    await store.aclose()
    await asyncio.gather(*queued)
    assert sorted(_tools_by_id(path).values()) == ["inline", "queued", "queued", "queued"]
    # SQLite removes the WAL when the last connection to the file closes: none is left open.
    assert not Path(f"{path}-wal").exists()
    with pytest.raises(RuntimeError, match="closed"):
        await store.add_audit(_row())


def test_sync_close_closes_both_connections(tmp_path: Path) -> None:
    path = tmp_path / "sync.db"
    store = SQLiteStore(path)
    asyncio.run(store.add_audit(_row()))
    store.close()
    assert not Path(f"{path}-wal").exists()


async def test_an_in_memory_store_writes_audit_rows_on_its_one_connection() -> None:
    store = SQLiteStore(":memory:")
    row = _row("memory")
    await store.add_audit(row)
    assert [r.tool for r in await store.list_audit()] == ["memory"]
    await store.aclose()


async def test_rate_limit_tokens_are_taken_inline_and_through_the_thread_when_the_file_is_locked(
        tmp_path: Path) -> None:
    from gateway.store import Bucket

    path = tmp_path / "buckets.db"
    store = SQLiteStore(path)
    bucket = Bucket("client:ci", rate=0.001, burst=2)  # two calls, then (practically) no refill
    release = threading.Event()
    busy = store._thread.submit(release.wait)  # the store thread is occupied
    try:
        taking = asyncio.ensure_future(store.take_tokens([bucket]))
        await asyncio.sleep(0)
        assert taking.done() and taking.result() == 0.0  # charged on this thread, committed
    finally:
        release.set()
        await asyncio.wrap_future(busy)
    with contextlib.closing(sqlite3.connect(path)) as other:
        [(tokens,)] = other.execute("SELECT tokens FROM buckets WHERE key = 'client:ci'").fetchall()
    assert 0.99 < tokens < 1.01
    holder = sqlite3.connect(path, isolation_level=None)  # another process charging the same file
    holder.execute("BEGIN IMMEDIATE")
    second = asyncio.ensure_future(store.take_tokens([bucket]))
    assert await _ticks_until_done(second) == 5  # waits on the store thread, the loop keeps turning
    holder.execute("COMMIT")
    holder.close()
    assert await second == 0.0
    assert await store.take_tokens([bucket]) > 0  # the burst is spent across both paths
    await store.aclose()


EARLIER_AUDIT_TABLE = """
CREATE TABLE audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, kind TEXT NOT NULL, client TEXT, agent TEXT,
    tool TEXT, api TEXT, arguments TEXT, status TEXT NOT NULL, http_status INTEGER, latency_ms REAL NOT NULL,
    bytes INTEGER NOT NULL, approval TEXT, usage TEXT, run_id TEXT, error TEXT
);
CREATE INDEX audit_time ON audit (time);
"""


@pytest.mark.parametrize("earlier", [False, True], ids=["current", "earlier-file"])
async def test_retention_prunes_by_time_in_current_and_earlier_files(tmp_path: Path, earlier: bool) -> None:
    path = tmp_path / "audit.db"
    if earlier:  # a file made before the audit table lost AUTOINCREMENT and its time index
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.executescript(EARLIER_AUDIT_TABLE)
            conn.execute("INSERT INTO audit (time, kind, status, latency_ms, bytes) VALUES (5, 'tool', 'ok', 0, 0)")
            conn.commit()
    store = SQLiteStore(path)
    try:
        for index in range(6):
            await store.add_audit(AuditRow(time=10.0 + index, kind="tool", agent="clerk", tool=f"t{index}"))
        assert await store.prune_audit(0.0) == 0
        assert await store.prune_audit(12.5) == 3 + earlier  # times 10, 11, 12 (and 5)
        assert [r.tool for r in await store.list_audit()] == ["t5", "t4", "t3"]
        assert await store.prune_audit(100.0) == 3  # every row is older
        assert await store.list_audit() == []
        await store.add_audit(_row("after"))
        assert [r.tool for r in await store.list_audit()] == ["after"]
    finally:
        await store.aclose()


def _columns(path: Path) -> list[tuple[object, ...]]:
    """Every audit row's columns but its id, as another connection sees them committed."""
    with contextlib.closing(sqlite3.connect(path)) as other:
        return [row[1:] for row in other.execute("SELECT * FROM audit ORDER BY id").fetchall()]


def _running(tool: str, **fields: object) -> AuditRow:
    return AuditRow(time=2.5, kind="tool", client="ci", agent="clerk", tool=tool, api="shop",
                    arguments={"note": "a", "n": 1}, status=AUDIT_RUNNING, run_id="r1", subject="ann", **fields)


async def test_a_call_row_and_its_outcome_commit_at_once_without_an_await(tmp_path: Path) -> None:
    """`add_audit_now` and `update_audit_now` write on the caller's thread and return once committed: another
    connection sees the row (status `running`) and then its outcome before anything is awaited."""
    path = tmp_path / "now.db"
    store = SQLiteStore(path)
    row = _running("t")
    assert store.add_audit_now(row) is True and row.id is not None
    assert _columns(path) == [(2.5, "tool", "ci", "clerk", "t", "shop", '{"note":"a","n":1}', "running", None, 0.0, 0,
                               None, None, "r1", None, "ann")]
    row.status, row.http_status, row.latency_ms, row.bytes, row.error = "upstream_error", 502, 12.5, 42, "HTTP 502"
    assert store.update_audit_now(row) is True
    assert _columns(path)[0][7:12] == ("upstream_error", 502, 12.5, 42, None)
    assert _columns(path)[0][14] == "HTTP 502"
    await store.aclose()


async def test_a_running_row_is_stored_as_the_same_row_written_in_full(tmp_path: Path) -> None:
    """A `running` row's statement writes its constants and empty outcome in SQL; what lands is what the full
    statement (the queued path's, any other row's) writes for the same row."""
    path = tmp_path / "same.db"
    store = SQLiteStore(path)
    store.add_audit_now(_running("first"))
    await store._audit_queue.write(store._conn, INSERT_AUDIT, audit_values(_running("first")), _running("first"))
    first, second = _columns(path)
    assert first == second
    await store.aclose()


async def test_a_call_row_waits_for_nothing_when_the_lock_is_free_but_is_queued_when_it_is_taken(
        tmp_path: Path) -> None:
    """`add_audit_now` answers False without writing while the inline lock is taken (then `add_audit` queues it);
    `update_audit_now` too, and for a row whose insert has no id yet."""
    path = tmp_path / "taken.db"
    store = SQLiteStore(path)
    with store._inline_lock:
        row = _running("t")
        assert store.add_audit_now(row) is False and _columns(path) == []
        await store.add_audit(row)  # queued: written on the store thread
    assert [columns[4] for columns in _columns(path)] == ["t"]
    assert store.update_audit_now(AuditRow(time=1.0, kind="tool", status="ok")) is False  # no id: never written
    await store.aclose()
