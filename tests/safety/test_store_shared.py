"""The networked backends on real servers: two store instances on one PostgreSQL and one Redis behave as one."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from shared_servers import PostgresServer, RedisServer, free_port

from gateway.errors import ConfigError, StoreUnavailable
from gateway.store import ApprovalRecord, AuditRow, Bucket, RunRecord, open_store
from gateway.store.postgres import PostgresStore
from gateway.store.postgres_schema import LATEST, migrate, safe_url
from gateway.store.redis_counters import RedisCounters

pytestmark = pytest.mark.anyio


def _approval(approval_id: str, run_id: str) -> ApprovalRecord:
    return ApprovalRecord(id=approval_id, run_id=run_id, agent="clerk", tool="createItem", arguments={"b": 1, "a": 2})


async def test_two_instances_decide_and_claim_a_run_exactly_once(postgres_url: str) -> None:
    first, second = PostgresStore(postgres_url), PostgresStore(postgres_url)
    try:
        await first.save_run(RunRecord(id="r1", agent="clerk", state={"z": 1, "a": [1]}), [_approval("a1", "r1")])
        listed = await second.list_approvals()
        assert [a.id for a in listed] == ["a1"] and list(listed[0].arguments) == ["b", "a"]  # key order kept
        decisions = await asyncio.gather(*(s.decide_approval("a1", approve=True) for s in (first, second) * 5))
        assert sum(d is not None for d in decisions) == 1
        claims = await asyncio.gather(*(s.claim_run("r1") for s in (first, second) * 5))
        won = [c for c in claims if c is not None]
        assert len(won) == 1 and won[0].state == {"z": 1, "a": [1]} and won[0].status == "resuming"
    finally:
        await first.aclose()
        await second.aclose()


async def test_a_cancelled_audit_write_still_lands(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    task = asyncio.ensure_future(store.add_audit(AuditRow(time=1.0, kind="tool", agent="clerk")))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await store.aclose()  # waits for accepted rows
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM audit").fetchone() == (1,)


def test_migrations_are_numbered_and_applied_once(postgres_url: str) -> None:
    assert migrate(postgres_url) == list(range(1, LATEST + 1))
    assert migrate(postgres_url) == []
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT max(version) FROM gateway_schema").fetchone() == (LATEST,)
        conn.execute("INSERT INTO gateway_schema VALUES (%s, 0)", (LATEST + 1,))
        conn.commit()
    with pytest.raises(ConfigError, match="newer than this gateway"):
        migrate(postgres_url)


def test_an_unreachable_server_is_a_clear_error_at_start() -> None:
    port = free_port()
    with pytest.raises(ConfigError, match=rf"cannot use the store postgresql://gateway:\*\*\*@127.0.0.1:{port}/x"):
        open_store(f"postgresql://gateway:hunter2@127.0.0.1:{port}/x")
    with pytest.raises(ConfigError, match=f"cannot use Redis at redis://127.0.0.1:{port}/0"):
        RedisCounters(f"redis://127.0.0.1:{port}/0", timeout=1)
    assert "hunter2" not in safe_url("postgresql://u:hunter2@h:1/d")


async def test_a_server_gone_while_serving_raises_store_unavailable() -> None:
    server = PostgresServer().start()
    try:
        store = PostgresStore(server.url(), timeout=1)
        await store.add_audit(AuditRow(time=1.0, kind="tool", agent="clerk"))
        server.stop()
        with pytest.raises(StoreUnavailable, match="unreachable"):
            await store.add_audit(AuditRow(time=2.0, kind="tool", agent="clerk"))
        with pytest.raises(StoreUnavailable):
            await store.decide_approval("a1", approve=True)
        await store.aclose()
    finally:
        server.stop()


async def test_redis_gone_while_serving_raises_store_unavailable() -> None:
    server = RedisServer().start()
    try:
        counters = RedisCounters(server.url, timeout=1)
        assert await counters.take_tokens([Bucket("k", 1.0, 1.0)]) == 0.0
        server.stop()
        with pytest.raises(StoreUnavailable, match="Redis"):
            await counters.take_tokens([Bucket("k", 1.0, 1.0)])
        await counters.aclose()
    finally:
        server.stop()


@pytest.mark.parametrize("counted_on", ["redis", "postgresql"])
async def test_a_limit_of_n_lets_exactly_n_through_across_instances(
    counted_on: str, postgres_url: str, redis_url: str
) -> None:
    redis = redis_url if counted_on == "redis" else None
    stores = [open_store(postgres_url, redis=redis) for _ in range(3)]
    bucket = Bucket("tool:createItem", rate=10 / 60, burst=10)  # 10 a minute
    try:
        answers = await asyncio.gather(*(stores[i % 3].take_tokens([bucket]) for i in range(40)))
    finally:
        for store in stores:
            await store.aclose()
    assert sum(a == 0.0 for a in answers) == 10
    assert all(a > 0 for a in answers if a != 0.0)
