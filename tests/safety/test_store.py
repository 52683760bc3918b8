from __future__ import annotations

import asyncio
import sqlite3
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.errors import ConfigError
from gateway.store import (
    ApprovalRecord,
    AuditQuery,
    AuditRow,
    Bucket,
    ConnectionRecord,
    MemoryStore,
    PendingConnection,
    ResponseRecord,
    RunRecord,
    SQLiteStore,
    Store,
    open_store,
    store_location,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", "memory", "postgresql", "postgresql+redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """The contract below holds for every backend: SQLite, memory, PostgreSQL, and PostgreSQL with Redis counting."""
    backend: Store
    if request.param == "sqlite":
        backend = SQLiteStore(tmp_path / "state.db")
    elif request.param == "memory":
        backend = MemoryStore()
    else:
        redis = request.getfixturevalue("redis_url") if request.param.endswith("+redis") else None
        backend = open_store(request.getfixturevalue("postgres_url"), redis=redis)
    yield backend
    await backend.aclose()


def _approval(approval_id: str, run_id: str = "run1") -> ApprovalRecord:
    return ApprovalRecord(id=approval_id, run_id=run_id, agent="clerk", tool="createItem", arguments={"n": 1})


async def test_run_and_approvals_round_trip(store: Store) -> None:
    run = RunRecord(id="run1", agent="clerk", state={"loop": {"messages": [{"role": "user"}]}, "pending": ["a1"]})
    await store.save_run(run, [_approval("a1"), _approval("a2")])
    loaded = await store.get_run("run1")
    assert loaded is not None and loaded.state == run.state and loaded.status == "paused"
    assert [a.id for a in await store.list_approvals()] == ["a1", "a2"]
    assert (await store.get_approval("a1")).arguments == {"n": 1}  # type: ignore[union-attr]
    assert await store.get_approval("nope") is None


async def test_an_approval_is_decided_once(store: Store) -> None:
    await store.save_run(RunRecord(id="run1", agent="clerk"), [_approval("a1")])
    first = await store.decide_approval("a1", approve=True, arguments={"n": 2}, reason="fine", by="ops-bot")
    assert first is not None and first.status == "approved" and first.decided_arguments == {"n": 2}
    assert first.decided_by == "ops-bot" and (await store.get_approval("a1")).decided_by == "ops-bot"  # type: ignore[union-attr]
    assert await store.decide_approval("a1", approve=False) is None
    assert await store.decide_approval("forged", approve=True) is None
    assert (await store.get_approval("a1")).status == "approved"  # type: ignore[union-attr]


async def test_concurrent_decisions_have_one_winner(store: Store) -> None:
    await store.save_run(RunRecord(id="run1", agent="clerk"), [_approval("a1")])
    results = await asyncio.gather(*(store.decide_approval("a1", approve=True) for _ in range(8)))
    assert sum(r is not None for r in results) == 1


async def test_claim_run_waits_for_every_approval_and_has_one_winner(store: Store) -> None:
    await store.save_run(RunRecord(id="run1", agent="clerk"), [_approval("a1"), _approval("a2")])
    await store.decide_approval("a1", approve=True)
    assert await store.claim_run("run1") is None  # a2 still pending
    await store.decide_approval("a2", approve=False)
    claims = await asyncio.gather(*(store.claim_run("run1") for _ in range(4)))
    assert sum(c is not None for c in claims) == 1
    await store.finish_run("run1", "done")
    assert (await store.get_run("run1")).status == "done"  # type: ignore[union-attr]


async def test_audit_newest_first_filtered_and_pruned(store: Store) -> None:
    for index, agent in enumerate(["a", "b", "a"]):
        await store.add_audit(AuditRow(time=100.0 + index, kind="tool", agent=agent, tool=f"t{index}",
                                       arguments={"i": index}, usage={"x": 1} if index else None))
    rows = await store.list_audit(limit=10)
    assert [r.tool for r in rows] == ["t2", "t1", "t0"]
    assert rows[1].usage == {"x": 1} and rows[2].arguments == {"i": 0}
    assert [r.tool for r in await store.list_audit(limit=10, agents={"a"})] == ["t2", "t0"]
    assert await store.list_audit(limit=10, agents=set()) == []
    assert [r.tool for r in await store.list_audit(limit=1)] == ["t2"]
    assert await store.prune_audit(101.5) == 2
    assert [r.tool for r in await store.list_audit()] == ["t2"]


async def test_old_conversations_are_pruned_and_paused_runs_kept(store: Store) -> None:
    await store.save_response(ResponseRecord(id="resp_old", agent="clerk", client=None, created=100.0))
    await store.save_response(ResponseRecord(id="resp_new", agent="clerk", client=None, created=time.time() + 60))
    await store.save_run(RunRecord(id="done1", agent="clerk"), [_approval("a1", "done1")])
    await store.save_run(RunRecord(id="waiting", agent="clerk"), [_approval("a2", "waiting")])
    await store.decide_approval("a1", approve=True)
    await store.finish_run("done1", "done")

    assert await store.prune_conversations(time.time() + 1) == 2  # resp_old and the finished run

    assert await store.get_response("resp_old") is None
    assert await store.get_response("resp_new") is not None
    assert await store.get_run("done1") is None and await store.get_approval("a1") is None
    waiting = await store.get_run("waiting")  # paused: a human may still decide, whatever its age
    assert waiting is not None and (await store.get_approval("a2")) is not None
    assert await store.prune_conversations(time.time() + 1) == 0


async def test_audit_query_filters_alike_on_every_backend(store: Store) -> None:
    rows = [("a", "t1", "tool", "ok", 10.0), ("b", "t1", "tool", "upstream_error", 20.0),
            ("a", None, "chat", "ok", 30.0), ("a", "t2", "decision", "approved", 40.0)]
    for agent, tool, kind, status, when in rows:
        await store.add_audit(AuditRow(time=when, kind=kind, agent=agent, tool=tool, status=status,  # type: ignore[arg-type]
                                       client="bot" if agent == "a" else None))

    async def times(query: AuditQuery, agents: set[str] | None = None) -> list[float]:
        return [r.time for r in await store.list_audit(limit=10, agents=agents, query=query)]

    assert await times(AuditQuery(tool="t1")) == [20.0, 10.0]
    assert await times(AuditQuery(kind="decision")) == [40.0]
    assert await times(AuditQuery(since=20.0, until=40.0)) == [30.0, 20.0]
    assert await times(AuditQuery(client="bot", status="ok")) == [30.0, 10.0]
    assert await times(AuditQuery(agents=frozenset({"a", "b"})), agents={"b"}) == [20.0]
    assert await times(AuditQuery(agents=frozenset())) == []


async def test_a_signed_out_session_is_remembered_until_it_would_have_expired(store: Store) -> None:
    assert not await store.session_ended("s1")
    await store.end_session("s1", time.time() + 60)
    await store.end_session("s1", time.time() + 60)  # signing out twice is no error
    await store.end_session("s0", time.time() - 1)  # expired already: the next sign-out may forget it
    assert await store.session_ended("s1") and not await store.session_ended("s2")
    await store.end_session("s2", time.time() + 60)
    assert await store.session_ended("s2") and not await store.session_ended("s0")


async def test_token_buckets_are_all_or_nothing(store: Store) -> None:
    slow = Bucket("slow", rate=0.001, burst=1)
    fast = Bucket("fast", rate=0.001, burst=5)
    assert await store.take_tokens([slow, fast]) == 0.0
    retry = await store.take_tokens([slow, fast])
    assert retry > 0
    # The refused request took nothing from the bucket that still had tokens.
    for _ in range(4):
        assert await store.take_tokens([fast]) == 0.0
    assert await store.take_tokens([fast]) > 0


async def test_sqlite_state_is_shared_by_two_instances_on_one_file(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    first, second = SQLiteStore(path), SQLiteStore(path)
    try:
        await first.save_run(RunRecord(id="r", agent="clerk"), [_approval("a1", "r")])
        assert (await second.get_approval("a1")) is not None
        assert await second.decide_approval("a1", approve=True) is not None
        assert await first.decide_approval("a1", approve=True) is None
    finally:
        await first.aclose()
        await second.aclose()
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


async def test_a_row_is_on_disk_when_add_audit_returns(tmp_path: Path) -> None:
    path = tmp_path / "durable.db"
    store = SQLiteStore(path)
    await store.add_audit(AuditRow(time=1.0, kind="chat", agent="clerk"))
    # Another connection (as another process would) sees it without the writer closing.
    count = sqlite3.connect(path).execute("SELECT count(*) FROM audit").fetchone()[0]
    await store.aclose()
    assert count == 1


async def test_cancelled_write_still_completes(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "c.db")
    task = asyncio.ensure_future(store.add_audit(AuditRow(time=1.0, kind="tool", agent="clerk")))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0.05)
    assert len(await store.list_audit()) == 1
    await store.aclose()


async def test_concurrent_audit_rows_each_return_once_committed(tmp_path: Path) -> None:
    path = tmp_path / "group.db"
    store = SQLiteStore(path)
    rows = [AuditRow(time=float(i), kind="tool", agent="clerk", tool=f"t{i}") for i in range(50)]

    async def add(row: AuditRow) -> int:
        await store.add_audit(row)
        # Committed by the time this caller goes on: another connection sees the row.
        with sqlite3.connect(path) as other:
            return int(other.execute("SELECT count(*) FROM audit WHERE id = ?", (row.id,)).fetchone()[0])

    seen = await asyncio.gather(*(add(row) for row in rows))
    await store.aclose()
    assert seen == [1] * 50
    assert sorted(row.id for row in rows if row.id is not None) == list(range(1, 51))


async def test_rows_accepted_before_close_are_written(tmp_path: Path) -> None:
    path = tmp_path / "flush.db"
    store = SQLiteStore(path)
    tasks = [asyncio.ensure_future(store.add_audit(AuditRow(time=1.0, kind="tool", agent="a"))) for _ in range(5)]
    await asyncio.sleep(0)
    await store.aclose()
    await asyncio.gather(*tasks)
    assert sqlite3.connect(path).execute("SELECT count(*) FROM audit").fetchone()[0] == 5


async def test_rows_from_two_event_loops_are_each_answered_on_their_own_loop(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "loops.db")
    # A server thread with its own loop writes while this loop does: both loops' callers return, committed.
    in_thread = [AuditRow(time=1.0, kind="tool", agent="thread") for _ in range(20)]

    async def thread_writes() -> None:
        await asyncio.gather(*(store.add_audit(row) for row in in_thread))

    here = [AuditRow(time=1.0, kind="tool", agent="here") for _ in range(20)]
    worker = threading.Thread(target=asyncio.run, args=(thread_writes(),))
    worker.start()
    await asyncio.gather(*(store.add_audit(row) for row in here))
    await asyncio.to_thread(worker.join)
    assert sorted(row.id for row in in_thread + here if row.id is not None) == list(range(1, 41))
    assert len(await store.list_audit(limit=100)) == 40
    await store.aclose()


def test_a_sqlite_file_from_before_gets_the_new_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as old:
        old.execute("CREATE TABLE approvals (id TEXT PRIMARY KEY, run_id TEXT NOT NULL, agent TEXT NOT NULL,"
                    " tool TEXT NOT NULL, arguments TEXT NOT NULL, call_id TEXT, client TEXT, status TEXT NOT NULL,"
                    " created REAL NOT NULL, decided REAL, reason TEXT, decided_arguments TEXT)")
        old.execute("CREATE TABLE pending_connections (state TEXT PRIMARY KEY, subject TEXT NOT NULL,"
                    " api TEXT NOT NULL, verifier TEXT NOT NULL, client TEXT, created REAL NOT NULL,"
                    " expires REAL NOT NULL)")
        old.execute("INSERT INTO pending_connections VALUES ('s', 'ann', 'gh', 'v', NULL, 1.0, 1e12)")
    store = SQLiteStore(path)
    try:
        taken = asyncio.run(store.take_pending_connection("s", now=2.0))
    finally:
        store.close()
    columns = [row[1] for row in sqlite3.connect(path).execute("PRAGMA table_info(approvals)")]
    assert columns[-1] == "decided_by"
    assert taken is not None and taken.browser is None  # a link from before: no browser bound, so it cannot finish


def test_store_location_and_backends(tmp_path: Path) -> None:
    assert store_location(None, tmp_path) == str(tmp_path / ".gateway/state.db")
    assert store_location("data/x.db", tmp_path) == str(tmp_path / "data/x.db")
    with pytest.raises(ConfigError, match="redis"):
        open_store("redis://localhost:6379/0")
    assert isinstance(open_store("memory:"), MemoryStore)
    backend = open_store(f"sqlite:///{tmp_path}/u.db")
    assert isinstance(backend, SQLiteStore) and backend.path == f"{tmp_path}/u.db"
    backend.close()


def test_an_unusable_store_path_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(ConfigError, match="gateway.store"):
        SQLiteStore(tmp_path / "file" / "state.db")
    (tmp_path / "garbage.db").write_bytes(b"this is not a database" * 100)
    with pytest.raises(ConfigError, match="garbage.db"):
        SQLiteStore(tmp_path / "garbage.db")


async def test_a_users_connections_round_trip(store: Store) -> None:
    await store.save_connection(ConnectionRecord(subject="ann", api="gh", secret="enc1", scopes="repo", created=1.0,
                                                 updated=1.0))
    await store.save_connection(ConnectionRecord(subject="ann", api="jira", secret="enc2", created=2.0, updated=2.0))
    await store.save_connection(ConnectionRecord(subject="bob", api="gh", secret="enc3", created=3.0, updated=3.0))
    await store.save_connection(ConnectionRecord(subject="ann", api="gh", secret="enc4", scopes="repo", created=1.0,
                                                 updated=5.0))  # refreshed: replaced
    found = await store.get_connection("ann", "gh")
    assert found is not None and (found.secret, found.updated, found.created) == ("enc4", 5.0, 1.0)
    assert [c.api for c in await store.list_connections("ann")] == ["gh", "jira"]
    assert await store.delete_connection("ann", "gh") is True
    assert await store.delete_connection("ann", "gh") is False
    assert await store.get_connection("ann", "gh") is None
    assert (await store.get_connection("bob", "gh")) is not None


async def test_a_pending_connection_is_taken_once_and_not_after_it_expires(store: Store) -> None:
    await store.add_pending_connection(PendingConnection(state="s1", subject="ann", api="gh", verifier="v",
                                                         client="eng", created=1.0, expires=100.0,
                                                         browser="f00d"))
    await store.add_pending_connection(PendingConnection(state="s2", subject="ann", api="gh", verifier="v",
                                                         created=1.0, expires=10.0))
    taken = await store.take_pending_connection("s1", now=50.0)
    assert taken is not None and (taken.subject, taken.verifier, taken.client) == ("ann", "v", "eng")
    assert taken.browser == "f00d"  # the hash of the owner's browser nonce travels with the state
    assert await store.take_pending_connection("s1", now=50.0) is None
    assert await store.take_pending_connection("s2", now=50.0) is None  # expired


async def test_a_decision_is_taken_back_and_stuck_runs_are_found(store: Store) -> None:
    await store.save_run(RunRecord(id="r1", agent="clerk"), [ApprovalRecord(id="a1", run_id="r1", agent="clerk",
                                                                             tool="t", arguments={})])
    assert await store.decide_approval("a1", approve=True, by="ann") is not None
    assert [r.id for r in await store.stuck_runs(time.time() + 10)] == ["r1"]  # decided, never claimed
    assert await store.claim_run("r1") is not None
    assert [r.status for r in await store.stuck_runs(time.time() + 10)] == ["resuming"]
    assert await store.stuck_runs(time.time() - 10) == []  # not old enough
    assert not await store.reopen_run("r1", ["a1"], status="paused")  # it is not paused: nothing changes
    assert await store.reopen_run("r1", ["a1"], status="resuming")
    approval = await store.get_approval("a1")
    assert approval is not None and approval.status == "pending" and approval.decided_by is None
    assert (await store.get_run("r1")).status == "paused"  # type: ignore[union-attr]
    assert await store.stuck_runs(time.time() + 10) == []  # waiting for a human again


async def test_an_outcome_goes_onto_its_row(store: Store) -> None:
    row = AuditRow(time=time.time(), kind="tool", agent="clerk", tool="t", arguments={"n": 1}, status="running")
    await store.add_audit(row)
    row.status, row.http_status, row.latency_ms, row.bytes, row.error = "upstream_error", 500, 12.5, 7, "boom"
    await store.update_audit(row)
    (stored,) = await store.list_audit()
    assert (stored.id, stored.status, stored.http_status, stored.bytes, stored.error) == (row.id, "upstream_error",
                                                                                        500, 7, "boom")
    assert stored.arguments == {"n": 1}


async def test_the_store_takes_a_write_to_be_ready(store: Store) -> None:
    await store.check_writable()
    assert await store.list_audit() == []  # the probe leaves nothing behind


@pytest.mark.parametrize("module", ["psycopg", "psycopg_pool"])
def test_a_postgresql_store_without_the_shared_extra_says_what_to_install(
        monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    """`gateway serve`, `audit`, `approvals` and `migrate` on postgresql://... without psycopg: one line naming the
    extra, not a traceback (the CLI prints a ConfigError as `gateway: ...`)."""
    from gateway.store.postgres_schema import migrate

    monkeypatch.setitem(sys.modules, module, None)  # what the import system records for a module not installed
    url = "postgresql://gw@127.0.0.1:9/gw"
    said = rf"needs {module}, which is not installed: pip install 'gateway\[shared\]'"
    with pytest.raises(ConfigError, match=said):
        open_store(url)
    with pytest.raises(ConfigError, match=said):
        migrate(url)


def test_redis_without_the_shared_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(ConfigError, match=r"Redis \(agents.yaml gateway.redis\) needs redis, which is not installed"):
        open_store("memory:", redis="redis://127.0.0.1:9/0")
