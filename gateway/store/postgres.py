"""The shared store for several gateway instances: PostgreSQL through psycopg 3 and `psycopg_pool`.

`gateway: {store: postgresql://user:${PGPASSWORD}@db:5432/gateway}`. Opening the store connects once,
synchronously, and applies the schema's migrations (`postgres_schema`): a server that is unreachable or
refuses stops `gateway serve` at start with a message naming it. The connection pool itself is opened on
the event loop that first uses the store (uvicorn's, in each worker process).

Every guarantee of `Store` holds across instances because each is one statement or one transaction on
the server: an approval is decided by `UPDATE ... WHERE status = 'pending' RETURNING`, a run is claimed
by `UPDATE ... WHERE status = 'paused' AND NOT EXISTS (pending approvals)` (row locks make exactly one
claimer win), token buckets are read `FOR UPDATE` in key order. When the server goes away while
serving, each method raises `StoreUnavailable` (the doors answer 503): nothing is answered as if it had
been recorded.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from ..config.settings import DEFAULT_SHARED_STATE_TIMEOUT
from ..errors import StoreUnavailable
from .answer_within import answered_within, within
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
    refill_bucket,
    wait_for,
)
from .postgres_connections import PostgresConnections
from .postgres_pool import no_connection, open_pool
from .postgres_schema import migrate, safe_url
from .postgres_sweeps import Batch, audit_rows, finished_runs, stored_answers
from .server_watch import ServerWatch, settle
from .sqlite_tables import STUCK_RUNS, dumps
from .sweeps import in_batches

try:
    import psycopg
    from psycopg.adapt import Dumper
    from psycopg_pool import PoolTimeout
except ImportError as exc:  # pragma: no cover - open_store and migrate name the missing extra first
    raise ImportError("the PostgreSQL store needs psycopg and psycopg_pool: pip install 'psycopg[binary]' "
                      "psycopg-pool") from exc

_HOLD_LOCK_CLASS = 0x686F6C64
"""The first key of the advisory lock a client's holds take ("hold"); the second is the client's name hashed."""
_APPROVAL_COLUMNS = ("id, run_id, agent, tool, arguments, call_id, client, status, created, decided, reason,"
                     " decided_arguments, decided_by")
_AUDIT_COLUMNS = ("time, kind, client, agent, tool, api, arguments, status, http_status, latency_ms, bytes,"
                  " approval, usage, run_id, error, subject")
_RUN_COLUMNS = "id, agent, kind, client, status, state, created, updated"
_NOW = "extract(epoch from clock_timestamp())"
_NUL_STANDIN = "\ufffd"


class _NulFreeText(Dumper):
    """Python text as PostgreSQL text, a NUL (which no PostgreSQL text can hold) as U+FFFD: an id or a key holding
    one is then simply not found, and a caller's text holding one (a decision's reason, a tool call's id) is kept,
    where psycopg's own dumper raises DataError (a 500 for what a caller sent)."""

    oid = 0  # unknown, as psycopg's default for str: the server infers the parameter's type from the statement

    def dump(self, obj: str) -> bytes:
        return obj.replace("\x00", _NUL_STANDIN).encode()


async def _held_by(conn: psycopg.AsyncConnection[Any], client: str | None) -> int:
    """How many approvals of `client` (None: callers without a key) are pending."""
    # `client = %s`, not IS NOT DISTINCT FROM: that one PostgreSQL cannot look up in an index
    same = "client IS NULL" if client is None else "client = %s"
    cursor = await conn.execute(f"SELECT count(*) FROM approvals WHERE status = 'pending' AND {same}",
                                () if client is None else (client,))
    row = await cursor.fetchone()
    return int(row[0]) if row is not None else 0


async def _nul_free_text(conn: psycopg.AsyncConnection[Any]) -> None:
    conn.adapters.register_dumper(str, _NulFreeText)


class PostgresStore(PostgresConnections, Store):
    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 10,
                 timeout: float = DEFAULT_SHARED_STATE_TIMEOUT) -> None:
        """Connect to `url`, apply the migrations, and prepare the pool (opened on first use).

        Parameters:
            url: a libpq URL, `postgresql://user:password@host:port/database`.
            min_size, max_size: connections the pool keeps open / may open.
            timeout: seconds to wait for a connection (at start, and for a free one of the pool's), and for each
                question's answer (`gateway.shared_state_timeout`; `gateway.store.answer_within`).
        """
        self.url = url
        self.timeout = timeout
        self.part = f"the store {safe_url(url)}"
        migrate(url, connect_timeout=timeout)
        self._pool, self._attempts = open_pool(url, min_size=min_size, max_size=max_size, timeout=timeout,
                                               configure=_nul_free_text)
        self.watch: ServerWatch | None = self._attempts.watch
        """Logs a question given up as slow (once a spell), the server gone once it answers nothing for a few waits or
        refuses a connection, and once when it is back (`gateway.store.server_watch`)."""
        self._opened = False
        self._opening: asyncio.Lock | None = None
        self._writes: set[asyncio.Task[None]] = set()
        self._inserts: dict[int, asyncio.Task[None]] = {}  # id(row) -> its insert, while it runs

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if not self._opened:
            await self._open_pool()
        try:
            async with self._pool.connection() as conn:
                yield conn
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise self._unreachable(exc) from None
        watch = self._attempts.watch
        if watch.down is not None or watch.slow_since is not None:  # answered on a connection it kept: said once
            watch.answered()

    async def _open_pool(self) -> None:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if not self._opened:
                try:
                    await self._pool.open(wait=True, timeout=self.timeout)
                except PoolTimeout as exc:
                    raise self._unreachable(exc) from None
                self._opened = True

    def _unreachable(self, exc: Exception) -> StoreUnavailable:
        """The 503 for a question that got no connection (or lost it), from what the pool knows
        (`postgres_pool`): a refusal as the driver said it, every connection in use said so; nothing is opened."""
        return no_connection(self.url, exc, self._pool, self._attempts, self.timeout)

    # -- approvals and runs -------------------------------------------------------------------------
    @answered_within
    async def save_run(self, run: RunRecord, approvals: list[ApprovalRecord], *,
                       pending_cap: int | None = None) -> bool:
        async with self._connection() as conn, conn.transaction():
            if pending_cap is not None:
                # One client's holds take turns (a lock per client, held to the commit): two instances counting
                # at once under READ COMMITTED would each see room for the one call that fills the cap.
                await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(coalesce(%s, '')))",
                                   (_HOLD_LOCK_CLASS, run.client))
                if await _held_by(conn, run.client) + len(approvals) > pending_cap:
                    return False
            await conn.execute(
                f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s::json, %s, {_NOW})"
                " ON CONFLICT (id) DO UPDATE SET agent = excluded.agent, kind = excluded.kind,"
                " client = excluded.client, status = excluded.status, state = excluded.state,"
                " updated = excluded.updated",
                (run.id, run.agent, run.kind, run.client, run.status, dumps(run.state), run.created),
            )
            if approvals:
                async with conn.cursor() as cursor:
                    await cursor.executemany(
                        f"INSERT INTO approvals ({_APPROVAL_COLUMNS}) VALUES"
                        " (%s, %s, %s, %s, %s::json, %s, %s, %s, %s, %s, %s, %s::json, %s)",
                        [_approval_values(a) for a in approvals],
                    )
        return True

    @answered_within
    async def get_run(self, run_id: str) -> RunRecord | None:
        async with self._connection() as conn:
            cursor = await conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = %s", (run_id,))
            row = await cursor.fetchone()
        return _run_from_row(row) if row else None

    @answered_within
    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        async with self._connection() as conn:
            cursor = await conn.execute(f"SELECT {_APPROVAL_COLUMNS} FROM approvals WHERE id = %s", (approval_id,))
            row = await cursor.fetchone()
        return _approval_from_row(row) if row else None

    @answered_within
    async def list_approvals(
        self, *, status: ApprovalStatus | None = "pending", run_id: str | None = None, client: str | None = None,
        limit: int = 100, fair: bool = False,
    ) -> list[ApprovalRecord]:
        query, params = approvals_select(_APPROVAL_COLUMNS, status=status, run_id=run_id, client=client, fair=fair,
                                         placeholder="%s")
        async with self._connection() as conn:
            cursor = await conn.execute(query, (*params, limit))
            rows = await cursor.fetchall()
        return [_approval_from_row(row) for row in rows]

    @answered_within
    async def pending_count(self, client: str | None) -> int:
        async with self._connection() as conn:
            return await _held_by(conn, client)

    @answered_within
    async def decide_approval(
        self, approval_id: str, *, approve: bool, arguments: dict[str, Any] | None = None, reason: str | None = None,
        by: str | None = None,
    ) -> ApprovalRecord | None:
        async with self._connection() as conn:
            cursor = await conn.execute(
                f"UPDATE approvals SET status = %s, decided = {_NOW}, reason = %s, decided_arguments = %s::json,"
                f" decided_by = %s WHERE id = %s AND status = 'pending' RETURNING {_APPROVAL_COLUMNS}",
                ("approved" if approve else "denied", reason, None if arguments is None else dumps(arguments), by,
                 approval_id),
            )
            row = await cursor.fetchone()
        return _approval_from_row(row) if row else None

    @answered_within
    async def claim_run(self, run_id: str) -> RunRecord | None:
        async with self._connection() as conn:
            cursor = await conn.execute(
                f"UPDATE runs SET status = 'resuming', updated = {_NOW} WHERE id = %s AND status = 'paused'"
                " AND NOT EXISTS (SELECT 1 FROM approvals WHERE run_id = %s AND status = 'pending')"
                f" RETURNING {_RUN_COLUMNS}", (run_id, run_id))
            row = await cursor.fetchone()
        return _run_from_row(row) if row else None

    @answered_within
    async def finish_run(self, run_id: str, status: RunStatus) -> None:
        async with self._connection() as conn:
            await conn.execute(f"UPDATE runs SET status = %s, updated = {_NOW} WHERE id = %s", (status, run_id))

    @answered_within
    async def reopen_run(self, run_id: str, approval_ids: Sequence[str], *, status: RunStatus) -> bool:
        async with self._connection() as conn, conn.transaction():
            cursor = await conn.execute(
                f"UPDATE runs SET status = 'paused', updated = {_NOW} WHERE id = %s AND status = %s RETURNING id",
                (run_id, status))
            if await cursor.fetchone() is None:
                return False
            await conn.execute(
                "UPDATE approvals SET status = 'pending', decided = NULL, reason = NULL, decided_arguments = NULL,"
                " decided_by = NULL WHERE id = ANY(%s) AND run_id = %s AND status != 'pending'",
                (list(approval_ids), run_id))
            return True

    @answered_within
    async def stuck_runs(self, before: float) -> list[RunRecord]:
        async with self._connection() as conn:
            cursor = await conn.execute(STUCK_RUNS.replace("?", "%s"), (before, before))
            rows = await cursor.fetchall()
        return [_run_from_row(row) for row in rows]

    # -- audit --------------------------------------------------------------------------------------
    async def add_audit(self, row: AuditRow) -> None:
        # The insert is a task of its own, started before the first await: a cancelled caller stops waiting
        # for it, not the write (`Store.add_audit`).
        write = asyncio.get_running_loop().create_task(self._insert_audit(row))
        self._writes.add(write)
        write.add_done_callback(self._writes.discard)
        key = id(row)
        self._inserts[key] = write
        write.add_done_callback(lambda _: self._inserts.pop(key, None))
        try:
            await within(self.timeout, asyncio.shield(write), self.part, self.watch)
        except StoreUnavailable as late:
            if row.status == AUDIT_RUNNING:
                # The call is refused, not sent (its row was not written in time), but the insert may still land
                # once the server answers: its row then says the call was not sent, not `running`.
                why = str(late)
                write.add_done_callback(lambda _: self._not_sent(row, why))
            raise

    def _not_sent(self, row: AuditRow, why: str) -> None:
        if row.id is None:
            return  # never written
        row.status, row.error = "store_unavailable", f"not sent: {why}"
        self._writes.add(write := asyncio.get_running_loop().create_task(self._update_audit(row, None)))
        write.add_done_callback(self._writes.discard)

    async def update_audit(self, row: AuditRow) -> None:
        # A task of its own too (see add_audit); it waits for the row's insert when that is still on its way.
        write = asyncio.get_running_loop().create_task(self._update_audit(row, self._inserts.get(id(row))))
        self._writes.add(write)
        write.add_done_callback(self._writes.discard)
        await within(self.timeout, asyncio.shield(write), self.part, self.watch)  # late, the outcome is still written

    async def _update_audit(self, row: AuditRow, insert: asyncio.Task[None] | None) -> None:
        if insert is not None:
            await insert
        async with self._connection() as conn, conn.transaction():
            # Committed without waiting for the WAL flush: the row itself is durable since before the call was sent,
            # and a crash that loses this outcome leaves it `running`, which says "sent, outcome unknown". It saves
            # a second flush per call (the insert's is the one that matters).
            await conn.execute("SET LOCAL synchronous_commit TO OFF")
            await conn.execute(
                "UPDATE audit SET status = %s, http_status = %s, latency_ms = %s, bytes = %s, approval = %s,"
                " error = %s WHERE id = %s",
                (row.status, row.http_status, row.latency_ms, row.bytes, row.approval, row.error, row.id))

    async def _insert_audit(self, row: AuditRow) -> None:
        async with self._connection() as conn:
            cursor = await conn.execute(
                f"INSERT INTO audit ({_AUDIT_COLUMNS}) VALUES"
                " (%s, %s, %s, %s, %s, %s, %s::json, %s, %s, %s, %s, %s, %s::json, %s, %s, %s) RETURNING id",
                (row.time, row.kind, row.client, row.agent, row.tool, row.api, dumps(row.arguments), row.status,
                 row.http_status, row.latency_ms, row.bytes, row.approval,
                 None if row.usage is None else dumps(row.usage), row.run_id, row.error, row.subject),
            )
            inserted = await cursor.fetchone()
        row.id = int(inserted[0]) if inserted else None

    @answered_within
    async def list_audit(self, *, limit: int = 100, agents: set[str] | None = None,
                         query: AuditQuery | None = None) -> list[AuditRow]:
        where, params = (query or AuditQuery()).within(agents).where("%s")
        async with self._connection() as conn:
            cursor = await conn.execute(
                f"SELECT id, {_AUDIT_COLUMNS} FROM audit {where} ORDER BY id DESC LIMIT %s", (*params, limit))
            rows = await cursor.fetchall()
        return [_audit_from_row(row) for row in rows]

    # The retention sweeps (this and `prune_conversations`): batches that each commit, each bounded as any question
    # is (`postgres_sweeps`), so a sweep cut off keeps what it removed and the next goes on from there.
    async def prune_audit(self, before: float) -> int:
        return await in_batches(self._batch, audit_rows(before))

    async def _batch(self, batch: Batch) -> int:
        """One batch of a sweep in a transaction of its own, waited for as long as any question."""
        async def run() -> int:
            async with self._connection() as conn, conn.transaction():
                return await batch(conn)

        return await within(self.timeout, run(), self.part, self.watch)

    # -- stored conversations -----------------------------------------------------------------------
    @answered_within
    async def save_response(self, record: ResponseRecord, *, keep: int | None = None) -> list[str]:
        owner = record.client or ""
        async with self._connection() as conn, conn.transaction():
            # `xmax = 0`: the row was inserted, not an existing one updated (replaced: no more than before)
            cursor = await conn.execute(
                "INSERT INTO responses (id, agent, client, body, messages, created)"
                " VALUES (%s, %s, %s, %s::json, %s::json, %s) ON CONFLICT (id) DO UPDATE SET agent = excluded.agent,"
                " client = excluded.client, body = excluded.body, messages = excluded.messages,"
                " created = excluded.created RETURNING xmax = 0",
                (record.id, record.agent, record.client, dumps(record.body), dumps(record.messages), record.created),
            )
            inserted = await cursor.fetchone()
            if inserted is None or not inserted[0]:
                return []
            # The owner's count, one row (locked to the commit: two instances' saves for one owner take turns)
            cursor = await conn.execute(
                "INSERT INTO conversation_counts (owner, n) VALUES (%s, 1)"
                " ON CONFLICT (owner) DO UPDATE SET n = conversation_counts.n + 1 RETURNING n", (owner,))
            counted = await cursor.fetchone()
            held = int(counted[0]) if counted is not None else 0
            if keep is None or held <= keep:
                return []
            # `client = %s` (or IS NULL), not IS NOT DISTINCT FROM: the one PostgreSQL looks up in the index
            same = "client IS NULL" if record.client is None else "client = %s"
            cursor = await conn.execute(
                f"DELETE FROM responses WHERE id IN (SELECT id FROM responses WHERE {same} ORDER BY created, id"
                " LIMIT %s) RETURNING id, created",
                (held - keep,) if record.client is None else (record.client, held - keep))
            old = sorted(await cursor.fetchall(), key=lambda row: (row[1], row[0]))
            await conn.execute("UPDATE conversation_counts SET n = greatest(n - %s, 0) WHERE owner = %s",
                               (len(old), owner))
        return [row[0] for row in old]

    @answered_within
    async def get_response(self, response_id: str) -> ResponseRecord | None:
        async with self._connection() as conn:
            cursor = await conn.execute(
                "SELECT id, agent, client, body, messages, created FROM responses WHERE id = %s", (response_id,))
            row = await cursor.fetchone()
        if row is None:
            return None
        return ResponseRecord(id=row[0], agent=row[1], client=row[2], body=row[3], messages=row[4], created=row[5])

    @answered_within
    async def get_responses(self, response_ids: Sequence[str]) -> dict[str, ResponseRecord]:
        async with self._connection() as conn:
            cursor = await conn.execute(
                "SELECT id, agent, client, body, messages, created FROM responses WHERE id = ANY(%s)",
                (list(response_ids),))
            rows = await cursor.fetchall()
        return {row[0]: ResponseRecord(id=row[0], agent=row[1], client=row[2], body=row[3], messages=row[4],
                                       created=row[5]) for row in rows}

    @answered_within
    async def ping(self) -> None:
        async with self._connection() as conn:
            await conn.execute("SELECT 1")

    async def check(self) -> None:
        if self.watch is not None and self.watch.slow_since is not None:  # undecided: slow or gone
            await settle(self.ping, self.watch)

    @answered_within
    async def check_writable(self) -> None:
        # An audit row inserted and deleted in one committed transaction: the table a call's row goes to, so a
        # server that cannot extend it (a full disk) or commit (a read-only standby) fails here as the call would.
        async with self._connection() as conn, conn.transaction():
            cursor = await conn.execute(
                "INSERT INTO audit (time, kind, status, latency_ms, bytes) VALUES"
                f" ({_NOW}, 'probe', 'probe', 0, 0) RETURNING id")
            inserted = await cursor.fetchone()
            if inserted is not None:
                await conn.execute("DELETE FROM audit WHERE id = %s", (inserted[0],))

    async def prune_conversations(self, before: float) -> int:
        return (await in_batches(self._batch, stored_answers(before))
                + await in_batches(self._batch, finished_runs(before)))

    # -- console sessions ---------------------------------------------------------------------------
    @answered_within
    async def end_session(self, session: str, until: float) -> None:
        async with self._connection() as conn, conn.transaction():
            await conn.execute(f"DELETE FROM ended_sessions WHERE until < {_NOW}")
            await conn.execute("INSERT INTO ended_sessions (id, until) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING",
                               (session, until))

    @answered_within
    async def session_ended(self, session: str) -> bool:
        async with self._connection() as conn:
            cursor = await conn.execute("SELECT 1 FROM ended_sessions WHERE id = %s", (session,))
            return await cursor.fetchone() is not None

    # -- rate limits --------------------------------------------------------------------------------
    @answered_within
    async def take_tokens(self, buckets: Sequence[Bucket], cost: float = 1.0) -> float:
        if not buckets:
            return 0.0
        keys = sorted({b.key for b in buckets})  # one lock order for every instance: no deadlock
        async with self._connection() as conn, conn.transaction():
            async with conn.cursor() as cursor:
                await cursor.executemany(
                    "INSERT INTO buckets (key, tokens, updated) VALUES (%s, %s, 0) ON CONFLICT (key) DO NOTHING",
                    [(b.key, b.burst) for b in {b.key: b for b in buckets}.values()])
            cursor = await conn.execute(
                f"SELECT key, tokens, updated, {_NOW} FROM buckets WHERE key = ANY(%s) ORDER BY key FOR UPDATE",
                (keys,))
            rows = await cursor.fetchall()
            now = float(rows[0][3])  # the server's clock: every instance counts on the same one
            found = {key: (tokens, updated) for key, tokens, updated, _ in rows}
            levels = [refill_bucket(*found[b.key], now, b) for b in buckets]  # a new bucket: updated 0, full
            retry_after = max((wait_for(t, b, cost) for t, b in zip(levels, buckets, strict=True)), default=0.0)
            if retry_after == 0.0:
                async with conn.cursor() as cursor:
                    await cursor.executemany(
                        "UPDATE buckets SET tokens = %s, updated = %s WHERE key = %s",
                        [(t - cost, now, b.key) for t, b in zip(levels, buckets, strict=True)])
        return retry_after

    async def aclose(self) -> None:
        if self._writes:  # rows already accepted are written before the pool closes
            await asyncio.gather(*self._writes, return_exceptions=True)
        if self._opened:
            self._opened = False
            await self._pool.close()


def _approval_values(a: ApprovalRecord) -> tuple[Any, ...]:
    return (a.id, a.run_id, a.agent, a.tool, dumps(a.arguments), a.call_id, a.client, a.status, a.created, a.decided,
            a.reason, None if a.decided_arguments is None else dumps(a.decided_arguments), a.decided_by)


def _approval_from_row(row: Sequence[Any]) -> ApprovalRecord:
    return ApprovalRecord(
        id=row[0], run_id=row[1], agent=row[2], tool=row[3], arguments=row[4], call_id=row[5], client=row[6],
        status=row[7], created=row[8], decided=row[9], reason=row[10], decided_arguments=row[11],
        decided_by=row[12],
    )


def _run_from_row(row: Sequence[Any]) -> RunRecord:
    state = row[5] if isinstance(row[5], dict) else json.loads(row[5])
    return RunRecord(id=row[0], agent=row[1], kind=row[2], client=row[3], status=row[4], state=state,
                     created=row[6], updated=row[7])


def _audit_from_row(row: Sequence[Any]) -> AuditRow:
    return AuditRow(
        id=row[0], time=row[1], kind=row[2], client=row[3], agent=row[4], tool=row[5], api=row[6], arguments=row[7],
        status=row[8], http_status=row[9], latency_ms=row[10], bytes=row[11], approval=row[12], usage=row[13],
        run_id=row[14], error=row[15], subject=row[16],
    )
