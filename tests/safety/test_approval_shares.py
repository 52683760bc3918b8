"""Each client's share of the approval queue in the stores themselves (SQLite, PostgreSQL, memory): the cap on its
pending calls is counted and held in one step, across two store instances, and the listing takes clients in turns."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.store import ApprovalRecord, RunRecord, Store, open_store

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", "postgres", "memory"])
async def two_stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Store, Store]]:
    """Two instances on one store (the memory store is one process's: the same instance twice)."""
    if request.param == "memory":
        store = open_store("memory:")
        yield store, store
        return
    location = str(tmp_path / "state.db") if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    first, second = open_store(location), open_store(location)
    try:
        yield first, second
    finally:
        await first.aclose()
        await second.aclose()


def _held(n: int, client: str | None, created: float) -> tuple[RunRecord, list[ApprovalRecord]]:
    run = RunRecord(id=f"run-{client}-{n}", agent="clerk", kind="call", client=client)
    return run, [ApprovalRecord(id=f"apr-{client}-{n}", run_id=run.id, agent="clerk", tool="createItem",
                                arguments={"n": n}, client=client, created=created)]


async def test_holds_at_once_on_two_instances_stop_at_the_cap(two_stores: tuple[Store, Store]) -> None:
    first, second = two_stores
    saved = await asyncio.gather(*(
        (first if n % 2 else second).save_run(*_held(n, "flood", 1000.0 + n), pending_cap=5) for n in range(20)))
    assert sum(saved) == 5  # never six: the count and the insert are one step on every instance
    assert len(await first.list_approvals(client="flood", limit=100)) == 5
    assert await first.save_run(*_held(99, "other", 2000.0), pending_cap=5)  # another client's room is its own
    assert await second.save_run(*_held(98, None, 2000.0), pending_cap=5)  # callers without a key: one client
    # Deciding one makes room for one more, and a batch that would pass the cap is refused whole.
    assert await first.decide_approval((await first.list_approvals(client="flood"))[0].id, approve=False)
    run, one = _held(100, "flood", 3000.0)
    _, other = _held(101, "flood", 3000.0)
    assert not await second.save_run(run, [*one, *other], pending_cap=5)
    assert await second.save_run(run, one, pending_cap=5)
    assert await first.save_run(*_held(102, "flood", 3001.0))  # no cap asked: saved as before


async def test_the_listing_takes_clients_in_turns_and_filters_by_client(two_stores: tuple[Store, Store]) -> None:
    first, second = two_stores
    for n in range(50):  # the flood comes first: oldest first alone would list only its calls
        await first.save_run(*_held(n, "flood", 1000.0 + n))
    await first.save_run(*_held(0, "quiet", 2000.0))
    await first.save_run(*_held(1, "quiet", 2001.0))
    await first.save_run(*_held(0, None, 3000.0))
    oldest = await second.list_approvals(limit=10)
    assert {a.client for a in oldest} == {"flood"}  # the old order, still there for whoever asks for it
    fair = await second.list_approvals(limit=5, fair=True)
    assert [(a.client, a.arguments["n"]) for a in fair] == [
        ("flood", 0), ("quiet", 0), (None, 0), ("flood", 1), ("quiet", 1)]
    assert [a.id for a in await second.list_approvals(client="quiet", fair=True)] == ["apr-quiet-0", "apr-quiet-1"]
    assert [a.arguments["n"] for a in await second.list_approvals(client="flood", limit=3)] == [0, 1, 2]
    await first.decide_approval("apr-quiet-0", approve=True)
    assert [a.id for a in await second.list_approvals(client="quiet")] == ["apr-quiet-1"]
    assert [a.id for a in await second.list_approvals(client="quiet", status=None)] == ["apr-quiet-0", "apr-quiet-1"]


async def test_each_store_counts_a_clients_pending_calls_without_reading_them(
        two_stores: tuple[Store, Store]) -> None:
    """The look before a chat run pauses (`room_for`) read up to the cap's rows, arguments and all, to count them
    (mend45's left item); each store now answers the count itself, past any listing's limit too."""
    first, second = two_stores
    for n in range(130):
        await first.save_run(*_held(n, "flood", 1000.0 + n))
    await first.save_run(*_held(0, None, 2000.0))
    assert [await second.pending_count(c) for c in ("flood", None, "quiet")] == [130, 1, 0]
    await first.decide_approval("apr-flood-0", approve=True)
    assert await second.pending_count("flood") == 129  # decided: no longer waiting
