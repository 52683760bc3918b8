"""The SQLite store's audit writes below the store: its inline connection, checkpoints, and the queued rows written
in one transaction on the store thread, their waiters settled on their own event loops (`gateway.store.sqlite`)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .base import AuditRow
from .sqlite_tables import UPDATE_AUDIT

logger = logging.getLogger("gateway.store")

QueuedRow = tuple[str, tuple[Any, ...], AuditRow, "asyncio.Future[None]"]
"""(INSERT_AUDIT or UPDATE_AUDIT, its values, the row, its waiter): an update's id is read when it is written."""

# `None` binds as NULL either way. Without an adapter of its own, sqlite3 asks the prepare protocol and then the
# value for `__adapt__` and `__conform__` for every None parameter, building and dropping an AttributeError each
# time (an audit row binds about ten Nones, twice per call); with one, it finds this in its registry and calls it
# (`{}.get(None)` is None, in C).
_NULL: Callable[[None], None] = {}.get  # type: ignore[assignment]  # the one-argument form of an overload
sqlite3.register_adapter(type(None), _NULL)


def open_inline(path: str) -> sqlite3.Connection:
    """The connection audit rows are written on by their caller's thread: it never waits and never checkpoints."""
    inline = sqlite3.connect(path, timeout=0.0, isolation_level=None, check_same_thread=False)
    try:
        inline.execute("PRAGMA busy_timeout=0")  # never wait on the loop: a taken lock means the queued path
        inline.execute("PRAGMA synchronous=NORMAL")  # per connection: no fsync per commit in WAL
        inline.execute("PRAGMA wal_autocheckpoint=0")  # the store thread checkpoints (checkpoints fsync)
    except BaseException:
        inline.close()
        raise
    return inline


def checkpoint(conn: sqlite3.Connection) -> None:
    """On the store thread: copy committed WAL pages into the database so the WAL is reused, not grown."""
    try:
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    except sqlite3.Error as exc:  # the next one (or the next autocheckpoint of the main connection) retries
        logger.warning("store checkpoint failed: %s", exc)


def write_audit(conn: sqlite3.Connection, *, batch: Sequence[QueuedRow]) -> None:
    """On the store thread: a batch of queued rows and outcomes in one transaction, in the order they came."""
    def body() -> None:
        for statement, values, row, _ in batch:
            if statement is UPDATE_AUDIT:
                conn.execute(UPDATE_AUDIT, (*values, row.id))  # its insert is earlier in the queue: the id is set
            else:
                row.id = conn.execute(statement, values).lastrowid

    conn.execute("BEGIN IMMEDIATE")
    try:
        body()
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def settle_waiters(batch: Sequence[QueuedRow], error: Exception | None) -> None:
    """Tell each row's caller, on its own event loop, that its row is written (or why not)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
    for _, _, _, waiter in batch:
        by_loop.setdefault(waiter.get_loop(), []).append(waiter)
    for loop, waiters in by_loop.items():
        try:
            loop.call_soon_threadsafe(_resolve_waiters, waiters, error)
        except RuntimeError:  # that loop is closed: nobody is waiting any more
            pass


def _resolve_waiters(waiters: list[asyncio.Future[None]], error: Exception | None) -> None:
    for waiter in waiters:
        if not waiter.done():  # a cancelled caller's waiter is done already
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)


class AuditQueue:
    """Audit rows the inline connection could not take (its lock or the file's was taken), group-committed on the
    store thread: rows arriving while a write is on the disk go out together in the next transaction, one commit
    for the lot; each caller still returns only once its row is committed. The rows go straight to the store thread
    (no task, no run_in_executor future chain per call): one drain job per burst, and the committed waiters are
    settled with one call_soon_threadsafe per event loop.

    Args:
        thread: the store's one thread; unavailable: what a refused statement is raised to the waiters as.
    """

    def __init__(self, thread: ThreadPoolExecutor,
                 unavailable: Callable[[sqlite3.OperationalError], Exception]) -> None:
        self._thread = thread
        self._unavailable = unavailable
        self._rows: list[QueuedRow] = []
        self._lock = threading.Lock()
        self._draining = False  # a drain job is queued or running on the store thread

    async def write(self, conn: sqlite3.Connection, statement: str, values: tuple[Any, ...], row: AuditRow) -> None:
        waiter = asyncio.get_running_loop().create_future()
        with self._lock:
            self._rows.append((statement, values, row, waiter))
            start, self._draining = not self._draining, True
        if start:
            try:
                self._thread.submit(self._drain, conn)
            except RuntimeError:  # the thread is shut down (closed meanwhile)
                with self._lock:
                    self._draining = False
                raise
        # A cancelled caller cancels only its waiter: the row is queued and is written anyway.
        await waiter

    def _drain(self, conn: sqlite3.Connection) -> None:
        """On the store thread: write queued rows, a transaction per batch, until the queue is empty."""
        while True:
            with self._lock:
                if not self._rows:
                    self._draining = False
                    return
                batch, self._rows = self._rows, []
            error: Exception | None = None
            try:
                write_audit(conn, batch=batch)
            except sqlite3.OperationalError as exc:  # every waiter learns of it; the audit layer logs the loss
                error = self._unavailable(exc)
            except BaseException as exc:
                error = exc if isinstance(exc, Exception) else RuntimeError(repr(exc))
            settle_waiters(batch, error)
