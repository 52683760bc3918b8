"""A sent call's outcome on the SQLite store shares the next call's commit, or is committed alone within
`OUTCOME_WITHIN` seconds, before any read of the audit and at close (`gateway.store.sqlite_outcomes`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from pathlib import Path

import pytest

from gateway.store import AUDIT_RUNNING, AuditRow, SQLiteStore
from gateway.store.sqlite_outcomes import OUTCOME_WITHIN

pytestmark = pytest.mark.anyio


def _statuses(path: Path) -> list[str]:
    """Every row's status, as another connection (another process) sees them committed."""
    with contextlib.closing(sqlite3.connect(path)) as other:
        return [status for (status,) in other.execute("SELECT status FROM audit ORDER BY id")]


def _sent(store: SQLiteStore, n: int) -> AuditRow:
    """A call's row written before it is sent, and its outcome given."""
    row = AuditRow(time=1.0, kind="tool", agent="clerk", tool="t", arguments={"n": n}, status=AUDIT_RUNNING)
    assert store.add_audit_now(row) is True
    row.status, row.http_status = "ok", 200
    assert store.update_audit_now(row) is True
    return row


def _commits(store: SQLiteStore) -> list[str]:
    """The COMMITs the inline connection runs from now on (sqlite3's trace callback)."""
    statements: list[str] = []
    assert store._inline is not None
    store._inline.connection.set_trace_callback(statements.append)
    return statements


async def test_calls_one_after_another_cost_one_commit_each(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "one.db")
    traced = _commits(store)
    for n in range(10):
        _sent(store, n)
    # One commit a call: the first row's its own (autocommit), each later one with the outcome before it. (Main
    # committed each row and each outcome on its own: 20.) The last outcome waits for its bound.
    assert traced.count("COMMIT") == 9 and sum(s.startswith("INSERT") for s in traced) == 10
    assert sum(s.startswith("UPDATE") for s in traced) == 9
    assert _statuses(tmp_path / "one.db") == ["ok"] * 9 + ["running"]
    await store.aclose()
    assert _statuses(tmp_path / "one.db") == ["ok"] * 10  # close commits what waits


async def test_an_outcome_with_no_call_after_it_is_committed_within_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "bound.db"
    store = SQLiteStore(path)
    _sent(store, 1)
    assert _statuses(path) == ["running"]
    # Timers run in the order they are due: this sleep ends after the bound's timer ran, however late both are.
    await asyncio.sleep(OUTCOME_WITHIN * 2)
    assert _statuses(path) == ["ok"]
    await store.aclose()


async def test_a_reader_of_the_audit_sees_every_outcome_given(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "read.db")
    _sent(store, 1)
    assert [row.status for row in await store.list_audit()] == ["ok"]
    await store.aclose()


def test_a_sync_close_commits_the_outcomes_that_wait(tmp_path: Path) -> None:
    path = tmp_path / "close.db"
    store = SQLiteStore(path)
    _sent(store, 1)  # no event loop here: committed at once, there is no timer to keep the bound
    assert _statuses(path) == ["ok"]

    async def call() -> None:
        _sent(store, 2)

    asyncio.run(call())  # its loop ends before the bound: the outcome waits for the close
    assert _statuses(path) == ["ok", "running"]

    async def later() -> None:  # a new loop: its own timer keeps the bound (the first loop's never fired)
        _sent(store, 3)
        await asyncio.sleep(OUTCOME_WITHIN * 2)

    asyncio.run(later())
    assert _statuses(path) == ["ok", "ok", "ok"]
    async def last() -> None:
        _sent(store, 4)

    asyncio.run(last())
    store.close()
    assert _statuses(path) == ["ok", "ok", "ok", "ok"]


async def test_an_outcome_whose_file_is_locked_at_the_bound_lands_once_it_is_free(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    store = SQLiteStore(path)
    _sent(store, 1)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the inline connection cannot write: the store thread waits for the lock
    await asyncio.sleep(OUTCOME_WITHIN * 2)
    holder.execute("COMMIT")
    holder.close()
    assert [row.status for row in await store.list_audit()] == ["ok"]  # behind the store thread's write
    await store.aclose()


async def test_a_row_that_cannot_take_the_outcomes_leaves_them_waiting_and_goes_the_queued_way(tmp_path: Path) -> None:
    path = tmp_path / "queued.db"
    store = SQLiteStore(path)
    _sent(store, 1)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    row = AuditRow(time=1.0, kind="tool", tool="t", arguments={"n": 2}, status=AUDIT_RUNNING)
    assert store.add_audit_now(row) is False  # the lock is taken: nothing written, the outcome still waits
    written = asyncio.ensure_future(store.add_audit(row))
    holder.execute("COMMIT")
    holder.close()
    await written
    await asyncio.sleep(OUTCOME_WITHIN * 2)
    assert _statuses(path) == ["ok", "running"]
    await store.aclose()


async def test_an_outcome_that_cannot_be_written_is_logged_and_its_row_stays_running(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "broken.db"
    store = SQLiteStore(path)
    row = _sent(store, 1)
    with contextlib.closing(sqlite3.connect(path)) as other:  # the row's table refuses updates from now on
        other.execute("CREATE TRIGGER refuse BEFORE UPDATE ON audit BEGIN SELECT RAISE(FAIL, 'disk gone'); END")
        other.commit()
    with caplog.at_level(logging.ERROR, logger="gateway.store"):
        await asyncio.sleep(OUTCOME_WITHIN * 2)
    assert f"1 rows stay `running` (ids {row.id})" in caplog.text and "disk gone" in caplog.text
    assert _statuses(path) == ["running"]  # sent, its outcome unknown to the log: it says so
    after = AuditRow(time=1.0, kind="tool", tool="t", arguments={"n": 2}, status=AUDIT_RUNNING)
    assert store.add_audit_now(after) is True  # the next call is recorded (and may be sent)
    await store.aclose()


async def test_an_outcome_the_file_refuses_does_not_keep_the_next_call_from_its_row(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "poison.db"
    store = SQLiteStore(path)
    row = _sent(store, 1)
    with contextlib.closing(sqlite3.connect(path)) as other:
        other.execute("CREATE TRIGGER refuse BEFORE UPDATE ON audit BEGIN SELECT RAISE(FAIL, 'disk gone'); END")
        other.commit()
    after = AuditRow(time=1.0, kind="tool", tool="t", arguments={"n": 2}, status=AUDIT_RUNNING)
    with caplog.at_level(logging.ERROR, logger="gateway.store"):
        assert store.add_audit_now(after) is True  # written alone, the outcome given up and logged
    assert f"(ids {row.id})" in caplog.text
    assert _statuses(path) == ["running", "running"]
    await store.aclose()
