"""A PostgreSQL store whose every pooled connection is busy tells its callers (and `/readyz`) so from the pool's own
knowledge, without opening a connection of its own: it opened one outside the pool on every pool timeout to tell a
busy pool from a refusing server, which under load added connections exactly when the database was short of them.

Real parts: the session's PostgreSQL (Debian's), reached through a TCP proxy on loopback that counts the connections
opened through it; the pool's connections held by audit inserts waiting on a table lock another session holds (an
insert goes on after its caller stopped waiting, as an audit row must). A refused server is still named as refusing:
tests/safety/test_readyz.py."""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest
from quiet_proxy import QuietProxy
from shared_servers import PostgresServer

from gateway.errors import StoreUnavailable
from gateway.store.base import AuditRow
from gateway.store.postgres import PostgresStore

pytestmark = pytest.mark.anyio

POOL = 2


async def _until_waiting_on_lock(url: str, count: int) -> None:
    with psycopg.connect(url, autocommit=True) as look:
        for _ in range(1200):  # a hang guard (60 s), not a measure
            row = look.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'").fetchone()
            if row is not None and row[0] >= count:
                return
            await asyncio.sleep(0.05)
    raise AssertionError(f"never {count} inserts waiting on the lock")


async def test_a_busy_pool_is_told_from_its_stats_without_a_connection_of_its_own(
        postgres_server: PostgresServer) -> None:
    url = postgres_server.create_database()
    proxy = QuietProxy(postgres_server.port)
    with proxy.running():
        store = PostgresStore(url.replace(f":{postgres_server.port}/", f":{proxy.port}/"), max_size=POOL, timeout=1)
        try:
            await store.ping()
            with psycopg.connect(url) as holder:  # a transaction holding the audit table
                holder.execute("LOCK TABLE audit IN ACCESS EXCLUSIVE MODE")
                for _ in range(POOL):  # each holds a pooled connection until the lock goes
                    with pytest.raises(StoreUnavailable):
                        await store.add_audit(AuditRow(time=time.time(), kind="tool", tool="write"))
                await _until_waiting_on_lock(url, POOL)
                opened = proxy.accepted
                told = []
                for question in (lambda: store.get_run("run_1"), store.check_writable, store.ping):
                    with pytest.raises(StoreUnavailable) as refused:
                        await question()
                    told.append(str(refused.value))
                again = proxy.accepted
                holder.rollback()
        finally:
            await store.aclose()  # after the inserts, which land once the lock goes
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT count(*) FROM audit").fetchone()
    assert again == opened, f"{again - opened} connections opened outside the pool"
    for said in told:
        assert "is busy: all 2 of this process's connections to it were in use for 1 s" in said, said
    assert rows == (POOL,)
