"""The embedded default store: one SQLite file in WAL mode, stdlib `sqlite3`.

Every statement runs on one dedicated worker thread that owns the main connection, so the event loop
never blocks on disk and writes are serialized without lock contention inside one process. Each
write commits before its coroutine returns: a row is on disk before the response that caused it.
WAL with `synchronous=NORMAL` survives a crash of the process (not of the machine); several
processes may share the file (the busy timeout covers their brief write locks).

Audit rows, one per proxied call, are the exception: they commit inline, on the calling loop's thread,
through a second connection of their own. Handing each row to the store thread (executor submit, waking the
worker, GIL hand-over, the loop's self-pipe) costs more CPU per call than the write itself, while
`BEGIN IMMEDIATE; INSERT; COMMIT` in WAL + `synchronous=NORMAL` writes the WAL without an fsync.
That connection never waits: `busy_timeout=0`, and a lock held elsewhere (the store thread inside
`save_run`, another process such as `gateway approvals`, another loop writing inline)
sends the row down the queued path instead (group commit on the store thread, as every row went
before). It never checkpoints either (`wal_autocheckpoint=0`: a checkpoint fsyncs): the
store thread runs a PASSIVE checkpoint every `_CHECKPOINT_EVERY` inline rows (inline writers held off
meanwhile: one racing them never catches up with the WAL's end) and on close, so the WAL stays bounded.
Rate-limit buckets (`take_tokens`: up to two transactions per call when limits are set) take the same inline
path. A write that fails (a full disk, a read-only file) raises: the audit log then withholds the answer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from ..errors import ConfigError, StoreUnavailable
from .base import (
    AUDIT_RUNNING,
    ApprovalRecord,
    ApprovalStatus,
    AuditQuery,
    AuditRow,
    Bucket,
    ResponseRecord,
    RunRecord,
    RunStatus,
    Store,
    approvals_select,
)
from .sqlite_connections import SQLiteConnections
from .sqlite_sweeps import Batch, audit_rows, finished_runs, stored_answers
from .sqlite_tables import (
    APPROVAL_COLUMNS,
    AUDIT_COLUMNS,
    INSERT_AUDIT,
    INSERT_RUNNING,
    REOPEN_APPROVAL,
    SCHEMA,
    STUCK_RUNS,
    UPDATE_AUDIT,
    approval_from_row,
    approval_values,
    audit_from_row,
    audit_values,
    charge_buckets,
    dumps,
    end_session,
    held_by,
    outcome_values,
    running_values,
    save_conversation,
    session_ended,
    upgrade_schema,
)
from .sqlite_writes import AuditQueue, checkpoint, open_inline
from .sweeps import in_batches

logger = logging.getLogger("gateway.store")

T = TypeVar("T")

_CHECKPOINT_EVERY = 1000
"""Inline audit rows between two checkpoints: one WAL page a row, so ~1000 pages, SQLite's own default (three
pages a row in files made before `sqlite_tables` dropped AUTOINCREMENT and the time index). A checkpoint holds
inline rows off for its fsync, so the fewer checkpoints, the fewer calls take the queued path."""
_BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
_EXECUTE = sqlite3.Cursor.execute
"""The audit's two writes a call: one statement each, committed by SQLite itself (no transaction of ours)."""


class SQLiteStore(SQLiteConnections, Store):
    def __init__(self, path: str | Path) -> None:
        """Open (creating if needed) the database.

        Parameters:
            path: the database file; its folder is created. `:memory:` works for one process.
        """
        self.path = str(path)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gateway-store")
        self._conn: sqlite3.Connection | None = None
        self._audit_queue = AuditQueue(self._thread, self._unavailable)  # rows the inline connection could not take
        # Audit rows written on the caller's thread, through one cursor of the inline connection kept for every
        # inline statement (`Connection.execute` makes a cursor per statement, and registers it with the connection).
        self._inline: sqlite3.Cursor | None = None
        self._inline_lock = threading.Lock()  # only ever tried, never waited for, by a writer
        self._inline_rows = 0  # since the last checkpoint was asked for
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._thread.submit(self._open).result()
        except (OSError, sqlite3.Error) as exc:
            self._thread.shutdown(wait=False)
            raise ConfigError(f"cannot open the store {self.path} (agents.yaml gateway.store): {exc}") from None

    def _open(self) -> None:
        conn = sqlite3.connect(self.path, timeout=10.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=10000")
        try:
            conn.executescript(SCHEMA)
            upgrade_schema(conn)
            if self.path != ":memory:":  # a second connection to `:memory:` would be another database
                self._inline = open_inline(self.path).cursor()
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._conn is None:
            raise RuntimeError("the store is closed")
        conn = self._conn
        # Shielded: a cancelled request must not abandon a half-done write (the thread finishes it anyway).
        future = asyncio.get_running_loop().run_in_executor(self._thread, fn, conn)
        try:
            return await asyncio.shield(future)
        except sqlite3.OperationalError as exc:
            raise self._unavailable(exc) from exc

    def _unavailable(self, exc: sqlite3.OperationalError) -> StoreUnavailable:
        """A statement the file refused (full disk, read-only, locked past the busy timeout): the doors answer 503
        for it as for an unreachable PostgreSQL, not 500."""
        return StoreUnavailable(f"the store {self.path} cannot write: {type(exc).__name__}: {exc}")

    @staticmethod
    def _transaction(conn: sqlite3.Connection, fn: Callable[[], T]) -> T:
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn()
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    # -- approvals and runs -------------------------------------------------------------------------
    async def save_run(self, run: RunRecord, approvals: list[ApprovalRecord], *,
                       pending_cap: int | None = None) -> bool:
        def work(conn: sqlite3.Connection) -> bool:
            def body() -> bool:
                # BEGIN IMMEDIATE: no other writer, in this process or another, counts between our count and insert
                if pending_cap is not None and held_by(conn, run.client) + len(approvals) > pending_cap:
                    return False
                conn.execute(
                    "INSERT OR REPLACE INTO runs (id, agent, kind, client, status, state, created, updated)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (run.id, run.agent, run.kind, run.client, run.status, dumps(run.state), run.created,
                     time.time()),
                )
                conn.executemany(
                    f"INSERT INTO approvals ({APPROVAL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [approval_values(a) for a in approvals],
                )
                return True

            return self._transaction(conn, body)

        return await self._run(work)

    async def get_run(self, run_id: str) -> RunRecord | None:
        def work(conn: sqlite3.Connection) -> RunRecord | None:
            row = conn.execute(
                "SELECT id, agent, kind, client, status, state, created, updated FROM runs WHERE id = ?", (run_id,)
            ).fetchone()
            if row is None:
                return None
            return RunRecord(id=row[0], agent=row[1], kind=row[2], client=row[3], status=row[4],
                             state=json.loads(row[5]), created=row[6], updated=row[7])

        return await self._run(work)

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        def work(conn: sqlite3.Connection) -> ApprovalRecord | None:
            row = conn.execute(f"SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?", (approval_id,)).fetchone()
            return approval_from_row(row) if row else None

        return await self._run(work)

    async def list_approvals(
        self, *, status: ApprovalStatus | None = "pending", run_id: str | None = None, client: str | None = None,
        limit: int = 100, fair: bool = False,
    ) -> list[ApprovalRecord]:
        query, params = approvals_select(APPROVAL_COLUMNS, status=status, run_id=run_id, client=client, fair=fair)

        def work(conn: sqlite3.Connection) -> list[ApprovalRecord]:
            return [approval_from_row(row) for row in conn.execute(query, (*params, limit)).fetchall()]

        return await self._run(work)

    async def pending_count(self, client: str | None) -> int:
        return await self._run(lambda conn: held_by(conn, client))

    async def decide_approval(
        self, approval_id: str, *, approve: bool, arguments: dict[str, Any] | None = None, reason: str | None = None,
        by: str | None = None,
    ) -> ApprovalRecord | None:
        def work(conn: sqlite3.Connection) -> ApprovalRecord | None:
            def body() -> ApprovalRecord | None:
                cursor = conn.execute(
                    "UPDATE approvals SET status = ?, decided = ?, reason = ?, decided_arguments = ?, decided_by = ?"
                    " WHERE id = ? AND status = 'pending'",
                    ("approved" if approve else "denied", time.time(), reason,
                     None if arguments is None else dumps(arguments), by, approval_id),
                )
                if cursor.rowcount != 1:
                    return None
                row = conn.execute(
                    f"SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?", (approval_id,)
                ).fetchone()
                return approval_from_row(row)

            return self._transaction(conn, body)

        return await self._run(work)

    async def claim_run(self, run_id: str) -> RunRecord | None:
        def work(conn: sqlite3.Connection) -> bool:
            def body() -> bool:
                cursor = conn.execute(
                    "UPDATE runs SET status = 'resuming', updated = ? WHERE id = ? AND status = 'paused'"
                    " AND NOT EXISTS (SELECT 1 FROM approvals WHERE run_id = ? AND status = 'pending')",
                    (time.time(), run_id, run_id),
                )
                return cursor.rowcount == 1

            return self._transaction(conn, body)

        return await self.get_run(run_id) if await self._run(work) else None

    async def finish_run(self, run_id: str, status: RunStatus) -> None:
        def work(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE runs SET status = ?, updated = ? WHERE id = ?", (status, time.time(), run_id))

        await self._run(work)

    async def reopen_run(self, run_id: str, approval_ids: Sequence[str], *, status: RunStatus) -> bool:
        def work(conn: sqlite3.Connection) -> bool:
            def body() -> bool:
                cursor = conn.execute("UPDATE runs SET status = 'paused', updated = ? WHERE id = ? AND status = ?",
                                      (time.time(), run_id, status))
                if cursor.rowcount != 1:
                    return False
                conn.executemany(REOPEN_APPROVAL, [(approval_id, run_id) for approval_id in approval_ids])
                return True

            return self._transaction(conn, body)

        return await self._run(work)

    async def stuck_runs(self, before: float) -> list[RunRecord]:
        def work(conn: sqlite3.Connection) -> list[RunRecord]:
            rows = conn.execute(STUCK_RUNS, (before, before)).fetchall()
            return [RunRecord(id=row[0], agent=row[1], kind=row[2], client=row[3], status=row[4],
                              state=json.loads(row[5]), created=row[6], updated=row[7]) for row in rows]

        return await self._run(work)

    # -- audit --------------------------------------------------------------------------------------
    def add_audit_now(self, row: AuditRow) -> bool:
        # Inline (see the module docstring); a taken lock, here or on the file, means the queued path.
        if row.status == AUDIT_RUNNING and row.kind == "tool":
            written = self._write_inline(_EXECUTE, INSERT_RUNNING, running_values(row))
        else:
            written = self._write_inline(_EXECUTE, INSERT_AUDIT, audit_values(row))
        if written is None:
            return False
        row.id = written.lastrowid
        return True

    async def add_audit(self, row: AuditRow) -> None:
        if self.add_audit_now(row):
            return
        row.id = None
        await self._queue_audit(INSERT_AUDIT, audit_values(row), row)

    def update_audit_now(self, row: AuditRow) -> bool:
        # A row whose insert is still queued (no id yet) is updated behind it, on the store thread.
        return row.id is not None and self._write_inline(
            _EXECUTE, UPDATE_AUDIT, (*outcome_values(row), row.id)) is not None

    async def update_audit(self, row: AuditRow) -> None:
        if self.update_audit_now(row):
            return
        await self._queue_audit(UPDATE_AUDIT, outcome_values(row), row)

    async def _queue_audit(self, statement: str, values: tuple[Any, ...], row: AuditRow) -> None:
        conn = self._conn
        if conn is None:
            raise RuntimeError("the store is closed")
        await self._audit_queue.write(conn, statement, values, row)

    def _write_inline(self, work: Callable[[sqlite3.Cursor, Any, Any], T], first: Any, second: Any) -> T | None:
        """`work(inline, first, second)` on the inline connection's cursor, on this thread: its result once
        committed, None when it could not run without waiting (the inline lock or the file's write lock is taken).
        The audit's two writes a call pass `_EXECUTE` with a statement and its values; a rate-limit charge passes
        `_charged` with its buckets and cost (two arguments, not `*args`: no tuple packed and unpacked per write)."""
        if not self._inline_lock.acquire(False):  # positional: no keyword dict per call
            return None
        try:
            inline = self._inline
            if inline is None:  # closed since the caller looked
                return None
            try:
                result = work(inline, first, second)
            except sqlite3.OperationalError as exc:
                # The primary code: extended ones (SQLITE_BUSY_SNAPSHOT, ...) are a taken lock too.
                if getattr(exc, "sqlite_errorcode", 0) & 0xFF in _BUSY_CODES:
                    return None
                raise self._unavailable(exc) from exc
        finally:
            self._inline_lock.release()
        self._inline_rows += 1
        if self._inline_rows >= _CHECKPOINT_EVERY:
            self._checkpoint_soon()
        return result

    def _checkpoint_soon(self) -> None:
        """`_CHECKPOINT_EVERY` inline writes committed since the last: the store thread checkpoints (not awaited:
        the write that asks is committed)."""
        self._inline_rows = 0
        conn = self._conn
        try:
            if conn is not None:
                self._thread.submit(self._checkpoint_quiet, conn)
        except RuntimeError:  # the thread is shut down: close checkpoints
            pass

    async def list_audit(self, *, limit: int = 100, agents: set[str] | None = None,
                         query: AuditQuery | None = None) -> list[AuditRow]:
        query = (query or AuditQuery()).within(agents)
        where, params = query.where()

        def work(conn: sqlite3.Connection) -> list[AuditRow]:
            rows = conn.execute(
                f"SELECT {AUDIT_COLUMNS} FROM audit {where} ORDER BY id DESC LIMIT ?", (*params, limit)
            ).fetchall()
            return [audit_from_row(row) for row in rows]

        return await self._run(work)

    # The retention sweeps (this and `prune_conversations`): batches that each commit, each a job of its own on the
    # store thread, so the writes that come meanwhile go through between two batches (`sqlite_sweeps`).
    async def prune_audit(self, before: float) -> int:
        return await in_batches(self._batch, audit_rows(before))

    async def _batch(self, batch: Batch) -> int:
        """One batch of a sweep in a transaction of its own on the store thread."""
        return await self._run(lambda conn: self._transaction(conn, lambda: batch(conn)))

    # -- rate limits --------------------------------------------------------------------------------
    async def save_response(self, record: ResponseRecord, *, keep: int | None = None) -> list[str]:
        values = (record.id, record.agent, record.client, dumps(record.body), dumps(record.messages), record.created)

        return await self._run(lambda conn: self._transaction(conn, lambda: save_conversation(conn, values, keep)))

    async def ping(self) -> None:
        # Through the store's own thread: it answers only when the writes queued before it are done.
        await self._run(lambda conn: conn.execute("SELECT 1").fetchone())

    async def check_writable(self) -> None:
        # An audit row written and deleted in one committed transaction: the same table, the same pages and the
        # same WAL append as a call's row, so a file that cannot take a call's row fails here too.
        def body(conn: sqlite3.Connection) -> None:
            row_id = conn.execute(INSERT_AUDIT, (time.time(), "probe", *[None] * 5, "probe", None, 0.0, 0,
                                                 *[None] * 5)).lastrowid
            conn.execute("DELETE FROM audit WHERE id = ?", (row_id,))

        await self._run(lambda conn: self._transaction(conn, lambda: body(conn)))

    async def prune_conversations(self, before: float) -> int:
        return (await in_batches(self._batch, stored_answers(before))
                + await in_batches(self._batch, finished_runs(before)))

    async def get_response(self, response_id: str) -> ResponseRecord | None:
        def work(conn: sqlite3.Connection) -> ResponseRecord | None:
            row = conn.execute("SELECT id, agent, client, body, messages, created FROM responses WHERE id = ?",
                               (response_id,)).fetchone()
            if row is None:
                return None
            return ResponseRecord(id=row[0], agent=row[1], client=row[2], body=json.loads(row[3]),
                                  messages=json.loads(row[4]), created=row[5])

        return await self._run(work)

    async def get_responses(self, response_ids: Sequence[str]) -> dict[str, ResponseRecord]:
        def work(conn: sqlite3.Connection) -> dict[str, ResponseRecord]:
            # The ids as one JSON parameter: any number of them in one statement (past SQLite's bound on parameters)
            rows = conn.execute("SELECT id, agent, client, body, messages, created FROM responses"
                                " WHERE id IN (SELECT value FROM json_each(?))", (dumps(list(response_ids)),))
            return {row[0]: ResponseRecord(id=row[0], agent=row[1], client=row[2], body=json.loads(row[3]),
                                           messages=json.loads(row[4]), created=row[5]) for row in rows}

        return await self._run(work)

    async def end_session(self, session: str, until: float) -> None:
        await self._run(lambda conn: self._transaction(conn, lambda: end_session(conn, session, until)))

    async def session_ended(self, session: str) -> bool:
        return await self._run(lambda conn: session_ended(conn, session))

    async def take_tokens(self, buckets: Sequence[Bucket], cost: float = 1.0) -> float:
        # Inline like audit rows (through the store thread, each charge costs a thread hand-over); the store
        # thread when a lock is taken.
        retry_after: float | None = self._write_inline(_charged, buckets, cost)
        if retry_after is not None:
            return retry_after
        return await self._run(lambda conn: self._transaction(conn, lambda: charge_buckets(conn, buckets, cost)))

    async def aclose(self) -> None:
        # Rows already accepted are written before the connection closes: their drain job is ahead of the
        # close on the one store thread.
        if self._conn is None:
            return
        conn, self._conn = self._conn, None
        await asyncio.get_running_loop().run_in_executor(self._thread, self._close_connections, conn)
        self._thread.shutdown(wait=False)

    def close(self) -> None:
        """Synchronous close, for CLI commands and test teardown outside an event loop."""
        if self._conn is None:
            return
        conn, self._conn = self._conn, None
        self._thread.submit(self._close_connections, conn).result()
        self._thread.shutdown(wait=True)

    def _checkpoint_quiet(self, conn: sqlite3.Connection) -> None:
        """On the store thread: a checkpoint with the inline writers held off (they take the queued path).

        A PASSIVE checkpoint while inline rows keep arriving never catches up with the WAL's end, and only
        a fully copied WAL is reused from its start by the next writer: the file would grow without bound.
        """
        if self._conn is None:  # closing: the close job checkpoints last
            return
        with self._inline_lock:
            checkpoint(conn)

    def _close_connections(self, conn: sqlite3.Connection) -> None:
        """On the store thread, after every queued job: the inline connection, a checkpoint, the main one."""
        with self._inline_lock:  # held by a writer for one short transaction at most
            inline, self._inline = self._inline, None
        if inline is not None:
            inline.connection.close()
        checkpoint(conn)
        conn.close()


def _charged(inline: sqlite3.Cursor, buckets: Sequence[Bucket], cost: float) -> float:
    """`charge_buckets` in a transaction of its own on the inline connection, rolled back if it or its commit fails
    (a commit refused for a taken lock leaves the transaction open)."""
    conn = inline.connection
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = charge_buckets(conn, buckets, cost)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result
