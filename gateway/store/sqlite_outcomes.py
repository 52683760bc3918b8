"""The outcomes of sent calls, waiting to share the next call's commit (`gateway.store.sqlite`).

A call's row is committed before the call is sent (the audit's promise); its outcome, once the answer is there,
need not cost a commit of its own: it waits here and goes into the transaction of the next call's row, which is
committed anyway before that call is sent. With one caller after another, or many at once, a call then costs one
commit, not two. An outcome waits at most `OUTCOME_WITHIN` seconds: if no row comes first, a timer on the
caller's event loop commits it on its own; a reader of the audit (`list_audit`) and the store's close commit what
waits before they go on. What a crash of the process loses is the outcomes of the last `OUTCOME_WITHIN` seconds:
their rows stay `running` (sent, outcome unknown), which is what the log knows of them.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ..errors import StoreUnavailable
from .base import AuditRow
from .sqlite_tables import INSERT_RUNNING, UPDATE_AUDIT, outcome_values

logger = logging.getLogger("gateway.store")

OUTCOME_WITHIN = 0.05
"""Seconds an outcome waits for the next call's row before it is committed alone."""

Outcome = tuple[Any, ...]
"""`UPDATE_AUDIT`'s parameters: the outcome's columns, the row's id last."""

T = TypeVar("T")
_BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


class WaitingOutcomes:
    """The outcomes not committed yet, in the order they came; any thread may add or take (a short lock of their
    own: the inline connection's lock is held through a commit, and a checkpoint's fsync, and is never waited for
    on an event loop). One timer keeps the bound for every outcome added while it runs: at most one a bound's
    time, not one a call."""

    __slots__ = ("_lock", "waiting", "_armed")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.waiting: list[Outcome] = []
        """What waits; read without the lock only for its truth (a list's truth is one C call)."""
        self._armed = False  # a timer will commit what waits (it fires within the bound of its arming)

    def add(self, outcome: Outcome) -> bool:
        """Keep `outcome`; True when no timer runs: the caller arms one (it commits what waits within the bound)."""
        with self._lock:
            self.waiting.append(outcome)
            if self._armed:
                return False
            self._armed = True
            return True

    def disarm(self) -> None:
        """The timer fired (or there was none to arm): the next outcome arms another."""
        self._armed = False

    def take(self) -> list[Outcome]:
        """Everything waiting, in order, handed to the one who commits it."""
        with self._lock:
            taken, self.waiting = self.waiting, []
        return taken

    def put_back(self, outcomes: list[Outcome]) -> None:
        """Outcomes a transaction did not commit (a lock taken elsewhere): first in line again."""
        with self._lock:
            self.waiting[:0] = outcomes


def write_grouped(cursor: sqlite3.Cursor, running: tuple[Any, ...] | None, outcomes: list[Outcome]) -> int | None:
    """The outcomes, then the running row (`INSERT_RUNNING`'s values, or None for none), in one transaction on
    `cursor`; the row's id. Nothing is committed when it raises."""
    cursor.execute("BEGIN IMMEDIATE")
    try:
        cursor.executemany(UPDATE_AUDIT, outcomes)
        row_id = None if running is None else cursor.execute(INSERT_RUNNING, running).lastrowid
        cursor.execute("COMMIT")
    except BaseException:
        if cursor.connection.in_transaction:
            cursor.execute("ROLLBACK")
        raise
    return row_id


def write_outcomes(conn: sqlite3.Connection, outcomes: list[Outcome]) -> None:
    """On the store thread (which waits for the file's lock): outcomes the inline connection could not take."""
    try:
        write_grouped(conn.cursor(), None, outcomes)
    except sqlite3.Error as exc:
        log_lost(outcomes, exc)


def log_lost(outcomes: list[Outcome], exc: BaseException) -> None:
    """Outcomes that will not be written: their rows stay `running`, as the log says of any call whose outcome it
    does not know."""
    logger.error("audit outcomes not written (%s: %s): %d rows stay `running` (ids %s)", type(exc).__name__, exc,
                 len(outcomes), ", ".join(str(outcome[-1]) for outcome in outcomes[:20]))


class InlineOutcomes:
    """Mixed into `SQLiteStore`: a sent call's outcome kept to share the next row's commit, and committed alone when
    the bound runs out (this module's docstring)."""

    _outcomes: WaitingOutcomes
    _inline: sqlite3.Cursor | None
    _conn: sqlite3.Connection | None
    _thread: ThreadPoolExecutor
    _timer_loop: asyncio.AbstractEventLoop | None = None  # where the bound's timer was last armed

    def _write_inline(self, work: Callable[[sqlite3.Cursor, Any, Any], T], first: Any, second: Any) -> T | None:
        raise NotImplementedError  # provided by SQLiteStore

    def update_audit_now(self, row: AuditRow) -> bool:
        # A row whose insert is still queued (no id yet) is updated behind it, on the store thread (False: the
        # awaited `update_audit` queues it). Any other waits for the next row's commit, `OUTCOME_WITHIN` at most.
        if row.id is None or self._inline is None:
            return False
        unarmed = self._outcomes.add((*outcome_values(row), row.id))
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop on this thread to keep the bound: at once
            self._bound_ran_out()
            return True
        # Armed on another loop (a store outlives the loop of a test or a command): that timer may never fire.
        if unarmed or loop is not self._timer_loop:
            self._timer_loop = loop
            loop.call_later(OUTCOME_WITHIN, self._bound_ran_out)
        return True

    def _bound_ran_out(self) -> None:
        self._outcomes.disarm()
        self.commit_outcomes()

    def commit_outcomes(self) -> None:
        """Commit the outcomes that wait for a row (the bound ran out, the audit is read): on this thread, or on the
        store thread when the file's lock is taken; one that cannot be written is logged (its row stays `running`)."""
        outcomes = self._outcomes.take()
        if not outcomes:
            return
        try:
            if self._write_inline(_commit_alone, outcomes, None) is not None:
                return
        except (StoreUnavailable, sqlite3.Error) as exc:
            log_lost(outcomes, exc)
            return
        try:
            if self._conn is None:
                raise RuntimeError("the store is closed")
            self._thread.submit(write_outcomes, self._conn, outcomes)
        except RuntimeError as exc:
            log_lost(outcomes, exc)

    def _grouped(self, inline: sqlite3.Cursor, running: tuple[Any, ...], _: None) -> int | None:
        """The running row with every outcome waiting, in one commit; those outcomes wait again if it fails."""
        outcomes = self._outcomes.take()
        try:
            return write_grouped(inline, running, outcomes)
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF in _BUSY_CODES:  # the queued way for the row
                self._outcomes.put_back(outcomes)
                raise
            failed: BaseException = exc
        except sqlite3.Error as exc:
            failed = exc
        except BaseException:
            self._outcomes.put_back(outcomes)
            raise
        # Refused for another reason: the row alone (an outcome the file refuses must not keep every call after
        # it from being recorded); if the file refuses the row too, the caller hears it and nothing is sent.
        log_lost(outcomes, failed)
        return write_grouped(inline, running, [])


def _commit_alone(inline: sqlite3.Cursor, outcomes: list[Outcome], _: None) -> bool:
    write_grouped(inline, None, outcomes)
    return True
