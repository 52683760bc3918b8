"""The tables of the SQLite store: their schema, and records turned into rows and back."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from ..jsonwire import dumps_text
from .base import AUDIT_RUNNING, ApprovalRecord, AuditRow, Bucket, refill_bucket, wait_for

# The audit table is written once per tool call, so it has nothing an insert must also update: its ids are rowids
# (each row one past the largest id present; AUTOINCREMENT would keep an id from returning once every row is pruned
# by writing a second table, sqlite_sequence, on every insert) and it has no index on `time` (retention prunes by
# id, `gateway.store.sqlite_sweeps`). Each of the two was another WAL page written per row, so both are gone.
# Files made with them (before this) keep them: both kinds are read and written alike.
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY, agent TEXT NOT NULL, kind TEXT NOT NULL, client TEXT, status TEXT NOT NULL,
    state TEXT NOT NULL, created REAL NOT NULL, updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS approvals (
    id TEXT PRIMARY KEY, run_id TEXT NOT NULL, agent TEXT NOT NULL, tool TEXT NOT NULL, arguments TEXT NOT NULL,
    call_id TEXT, client TEXT, status TEXT NOT NULL, created REAL NOT NULL, decided REAL, reason TEXT,
    decided_arguments TEXT, decided_by TEXT
);
CREATE INDEX IF NOT EXISTS approvals_run ON approvals (run_id);
CREATE INDEX IF NOT EXISTS approvals_status ON approvals (status, created);
CREATE INDEX IF NOT EXISTS approvals_turns ON approvals (status, client, created, id);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY, time REAL NOT NULL, kind TEXT NOT NULL, client TEXT, agent TEXT,
    tool TEXT, api TEXT, arguments TEXT, status TEXT NOT NULL, http_status INTEGER, latency_ms REAL NOT NULL,
    bytes INTEGER NOT NULL, approval TEXT, usage TEXT, run_id TEXT, error TEXT, subject TEXT
);
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY, agent TEXT NOT NULL, client TEXT, body TEXT NOT NULL, messages TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_client ON responses (client, created, id);
CREATE TABLE IF NOT EXISTS buckets (key TEXT PRIMARY KEY, tokens REAL NOT NULL, updated REAL NOT NULL);
CREATE TABLE IF NOT EXISTS connections (
    subject TEXT NOT NULL, api TEXT NOT NULL, secret TEXT NOT NULL, scopes TEXT NOT NULL, created REAL NOT NULL,
    updated REAL NOT NULL, PRIMARY KEY (subject, api)
);
CREATE TABLE IF NOT EXISTS pending_connections (
    state TEXT PRIMARY KEY, subject TEXT NOT NULL, api TEXT NOT NULL, verifier TEXT NOT NULL, client TEXT,
    created REAL NOT NULL, expires REAL NOT NULL, browser TEXT
);
CREATE TABLE IF NOT EXISTS ended_sessions (id TEXT PRIMARY KEY, until REAL NOT NULL);
"""

APPROVAL_COLUMNS = (
    "id, run_id, agent, tool, arguments, call_id, client, status, created, decided, reason, decided_arguments,"
    " decided_by"
)
AUDIT_COLUMNS = (
    "id, time, kind, client, agent, tool, api, arguments, status, http_status, latency_ms, bytes, approval, usage,"
    " run_id, error, subject"
)
INSERT_AUDIT = f"INSERT INTO audit ({AUDIT_COLUMNS}) VALUES (NULL{', ?' * 16})"
INSERT_RUNNING = (f"INSERT INTO audit ({AUDIT_COLUMNS}) VALUES"
                  f" (NULL, ?, 'tool', ?, ?, ?, ?, ?, '{AUDIT_RUNNING}', NULL, 0.0, 0, ?, NULL, ?, NULL, ?)")
"""A call's row before it is sent (`running_values`): its constants and its outcome's empty columns written in the
statement, not bound (sqlite3 adapts every None it binds through its adapter registry)."""
UPDATE_AUDIT = ("UPDATE audit SET status = ?, http_status = ?, latency_ms = ?, bytes = ?, approval = ?, error = ?"
                " WHERE id = ?")
"""A call's outcome, on the row written before it was sent."""
REOPEN_APPROVAL = ("UPDATE approvals SET status = 'pending', decided = NULL, reason = NULL, decided_arguments = NULL,"
                   " decided_by = NULL WHERE id = ? AND run_id = ? AND status != 'pending'")
STUCK_RUNS = (
    "SELECT id, agent, kind, client, status, state, created, updated FROM runs WHERE"
    " (status = 'resuming' AND updated < ?)"
    " OR (status = 'paused' AND EXISTS (SELECT 1 FROM approvals WHERE run_id = runs.id)"
    " AND NOT EXISTS (SELECT 1 FROM approvals WHERE run_id = runs.id AND status = 'pending')"
    " AND (SELECT MAX(decided) FROM approvals WHERE run_id = runs.id) < ?)"
)
"""Runs no one will move on their own (`Store.stuck_runs`); `?` as written, for SQLite and PostgreSQL."""


def end_session(conn: sqlite3.Connection, session: str, until: float) -> None:
    """`Store.end_session` (in a transaction); signed-out sessions past their expiry go at the same time."""
    conn.execute("DELETE FROM ended_sessions WHERE until < ?", (time.time(),))
    conn.execute("INSERT OR REPLACE INTO ended_sessions (id, until) VALUES (?, ?)", (session, until))


def session_ended(conn: sqlite3.Connection, session: str) -> bool:
    return conn.execute("SELECT 1 FROM ended_sessions WHERE id = ?", (session,)).fetchone() is not None


def charge_buckets(conn: sqlite3.Connection, buckets: Sequence[Bucket], cost: float) -> float:
    """Take `cost` tokens from every bucket, or none: 0.0 when taken, else the seconds until all could pay."""
    now = time.time()
    levels = []
    for bucket in buckets:
        row = conn.execute("SELECT tokens, updated FROM buckets WHERE key = ?", (bucket.key,)).fetchone()
        levels.append(refill_bucket(row[0], row[1], now, bucket) if row else bucket.burst)
    retry_after = max((wait_for(t, b, cost) for t, b in zip(levels, buckets, strict=True)), default=0.0)
    if retry_after == 0.0:
        conn.executemany("INSERT OR REPLACE INTO buckets (key, tokens, updated) VALUES (?, ?, ?)",
                         [(b.key, t - cost, now) for t, b in zip(levels, buckets, strict=True)])
    return retry_after


# Each owner's number of stored conversations, kept with every save and removal: whether a save passed the cap is
# one row's number, not a walk of the owner's index entries (1.4 ms at 10,000 on SQLite, 15-30 ms on PostgreSQL).
# Callers without a key are owner ''. Made (and filled from `responses`) by `upgrade_schema` for files without it.
COUNTS_TABLE = "CREATE TABLE conversation_counts (owner TEXT PRIMARY KEY, n INTEGER NOT NULL)"
FILL_COUNTS = ("INSERT INTO conversation_counts (owner, n) SELECT coalesce(client, ''), count(*) FROM responses"
               " GROUP BY coalesce(client, '')")
COUNT_ONE_MORE = ("INSERT INTO conversation_counts (owner, n) VALUES (?, 1)"
                  " ON CONFLICT (owner) DO UPDATE SET n = n + 1 RETURNING n")
COUNT_FEWER = "UPDATE conversation_counts SET n = max(n - ?, 0) WHERE owner = ?"
OLDEST = "SELECT id FROM responses WHERE client IS ? ORDER BY created, id LIMIT ?"


def save_conversation(conn: sqlite3.Connection, values: tuple[Any, ...], keep: int | None) -> list[str]:
    """Insert or replace one stored conversation (`values`: its row), counted for its owner; with `keep`, remove
    the owner's oldest beyond that many. The ids removed, oldest first."""
    response_id, client = values[0], values[2]
    known = conn.execute("SELECT 1 FROM responses WHERE id = ?", (response_id,)).fetchone() is not None
    conn.execute("INSERT OR REPLACE INTO responses (id, agent, client, body, messages, created)"
                 " VALUES (?, ?, ?, ?, ?, ?)", values)
    if known:  # replaced: no more than before
        return []
    held = int(conn.execute(COUNT_ONE_MORE, (client or "",)).fetchone()[0])
    if keep is None or held <= keep:
        return []
    old = [row[0] for row in conn.execute(OLDEST, (client, held - keep)).fetchall()]
    conn.executemany("DELETE FROM responses WHERE id = ?", ((i,) for i in old))
    conn.execute(COUNT_FEWER, (len(old), client or ""))
    return old


def held_by(conn: sqlite3.Connection, client: str | None) -> int:
    """How many approvals of `client` (None: callers without a key) are pending."""
    row = conn.execute("SELECT COUNT(*) FROM approvals WHERE status = 'pending' AND client IS ?", (client,)).fetchone()
    return int(row[0])


def upgrade_schema(conn: sqlite3.Connection) -> None:
    """Columns added since a file was made (`CREATE TABLE IF NOT EXISTS` keeps an old table as it was)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(approvals)")}
    if "decided_by" not in columns:
        conn.execute("ALTER TABLE approvals ADD COLUMN decided_by TEXT")
    if "subject" not in {row[1] for row in conn.execute("PRAGMA table_info(audit)")}:
        conn.execute("ALTER TABLE audit ADD COLUMN subject TEXT")
    if "browser" not in {row[1] for row in conn.execute("PRAGMA table_info(pending_connections)")}:
        conn.execute("ALTER TABLE pending_connections ADD COLUMN browser TEXT")
    counted = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'conversation_counts'"
    if conn.execute(counted).fetchone() is None:
        conn.execute("BEGIN IMMEDIATE")  # two processes opening an older file at once: one makes and fills it
        try:
            if conn.execute(counted).fetchone() is None:
                conn.execute(COUNTS_TABLE)
                conn.execute(FILL_COUNTS)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")


def dumps(value: Any) -> str:
    return dumps_text(value, default=str)  # a value no JSON type fits is stored as its text, never refused


def running_values(row: AuditRow) -> tuple[Any, ...]:
    """A `running` tool call's row in `INSERT_RUNNING`'s order (`AUDIT_RUNNING`: it has no outcome yet)."""
    return (row.time, row.client, row.agent, row.tool, row.api, dumps(row.arguments), row.approval, row.run_id,
            row.subject)


def audit_values(row: AuditRow) -> tuple[Any, ...]:
    """An audit row's values in `INSERT_AUDIT`'s order."""
    return (row.time, row.kind, row.client, row.agent, row.tool, row.api, dumps(row.arguments), row.status,
            row.http_status, row.latency_ms, row.bytes, row.approval, None if row.usage is None else dumps(row.usage),
            row.run_id, row.error, row.subject)


def outcome_values(row: AuditRow) -> tuple[Any, ...]:
    """A call's outcome in `UPDATE_AUDIT`'s order, its row's id left off (the last parameter)."""
    return row.status, row.http_status, row.latency_ms, row.bytes, row.approval, row.error


def approval_values(a: ApprovalRecord) -> tuple[Any, ...]:
    return (a.id, a.run_id, a.agent, a.tool, dumps(a.arguments), a.call_id, a.client, a.status, a.created, a.decided,
            a.reason, None if a.decided_arguments is None else dumps(a.decided_arguments), a.decided_by)


def approval_from_row(row: tuple[Any, ...]) -> ApprovalRecord:
    return ApprovalRecord(
        id=row[0], run_id=row[1], agent=row[2], tool=row[3], arguments=json.loads(row[4]), call_id=row[5],
        client=row[6], status=row[7], created=row[8], decided=row[9], reason=row[10],
        decided_arguments=None if row[11] is None else json.loads(row[11]), decided_by=row[12],
    )


def audit_from_row(row: tuple[Any, ...]) -> AuditRow:
    return AuditRow(
        id=row[0], time=row[1], kind=row[2], client=row[3], agent=row[4], tool=row[5], api=row[6],
        arguments=None if row[7] is None else json.loads(row[7]), status=row[8], http_status=row[9],
        latency_ms=row[10], bytes=row[11], approval=row[12], usage=None if row[13] is None else json.loads(row[13]),
        run_id=row[14], error=row[15], subject=row[16],
    )
