"""PostgreSQL's retention sweeps go in batches that each commit (the real server from Debian's packages).

One DELETE of every old row was one transaction: cut off (the database's `statement_timeout` here, as an operator
sets one) it rolled back everything, and the next sweep met the same rows and the same end, so the tables only grew
(mend44's left item). What cuts the old sweep off here is a row another transaction holds, which its one DELETE
waits for until the statement timeout ends it: deterministic on any machine, where a table merely too large for
the timeout would depend on the machine's speed. In batches, the sweep removes every row it can (the held one is
skipped, not waited for) and the next sweep takes the rest.
"""

from __future__ import annotations

import time

import psycopg
import pytest
from shared_servers import PostgresServer

from gateway.store import open_store

pytestmark = pytest.mark.anyio

OLD = 20_000
"""Rows of each kind past their retention: twenty batches of the audit's."""


def _fill(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET statement_timeout = 0")  # the filling is not what is measured
        conn.execute("INSERT INTO audit (time, kind, status, latency_ms, bytes)"
                     " SELECT 1000 + g, 'tool', 'ok', 0, 0 FROM generate_series(1, %s) g", (OLD,))
        conn.execute("INSERT INTO audit (time, kind, status, latency_ms, bytes) VALUES (%s, 'tool', 'ok', 0, 0)",
                     (time.time(),))
        conn.execute("INSERT INTO responses (id, agent, client, body, messages, created)"
                     " SELECT 'resp_' || g, 'clerk', 'ci', '{}', '[]', 1000 + g FROM generate_series(1, %s) g", (OLD,))
        conn.execute("INSERT INTO conversation_counts (owner, n) VALUES ('ci', %s)", (OLD,))
        conn.execute("INSERT INTO runs (id, agent, kind, client, status, state, created, updated)"
                     " SELECT 'run_' || g, 'clerk', 'call', 'ci', 'done', '{}', 1000 + g, 1000 + g"
                     " FROM generate_series(1, %s) g", (OLD,))
        conn.execute("INSERT INTO approvals (id, run_id, agent, tool, arguments, call_id, client, status, created)"
                     " SELECT 'apr_' || g, 'run_' || g, 'clerk', 'createItem', '{}', 'c', 'ci', 'approved', 1000 + g"
                     " FROM generate_series(1, %s) g", (OLD,))


def _count(url: str, table: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}".encode()).fetchone()
    return int(row[0]) if row else 0


async def test_a_sweep_removes_what_it_can_in_batches_and_the_next_takes_the_rest(
        postgres_server: PostgresServer) -> None:
    url = postgres_server.create_database()
    with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {url.rsplit('/', 1)[1]} SET statement_timeout = '2s'".encode())
    store = open_store(url)
    _fill(url)
    before = 1000.0 + OLD + 1
    try:
        with psycopg.connect(url) as holder:  # one old row of each table held by another transaction
            holder.execute("SELECT 1 FROM audit WHERE time = 11000 FOR UPDATE")
            holder.execute("SELECT 1 FROM responses WHERE id = 'resp_10000' FOR UPDATE")
            holder.execute("SELECT 1 FROM runs WHERE id = 'run_10000' FOR UPDATE")
            audit = await store.prune_audit(before)
            conversations = await store.prune_conversations(before)
            holder.rollback()
        left = {table: _count(url, table) for table in ("audit", "responses", "runs", "approvals")}
        again = (await store.prune_audit(before), await store.prune_conversations(before))
        with psycopg.connect(url, autocommit=True) as conn:
            counted = conn.execute("SELECT n FROM conversation_counts WHERE owner = 'ci'").fetchone()
        gone = {table: _count(url, table) for table in ("audit", "responses", "runs", "approvals")}
    finally:
        await store.aclose()
    assert audit == OLD - 1 and conversations == 2 * (OLD - 1)
    assert left == {"audit": 2, "responses": 1, "runs": 1, "approvals": 1}  # the held rows, and the new audit row
    assert again == (1, 2)
    assert gone == {"audit": 1, "responses": 0, "runs": 0, "approvals": 0}
    assert counted is not None and counted[0] == 0  # the owner's count went down with its conversations
