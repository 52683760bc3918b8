"""Each client's stored conversations kept within `gateway.max_stored_conversations_per_client` in the stores
themselves (SQLite, PostgreSQL, memory): the oldest beyond the cap go, the client's own only, one save at a time
on either of two instances."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gateway.kernel.caller import owner_key
from gateway.store import ResponseRecord, SQLiteStore, Store
from gateway.store.kept_conversations import keep_conversation

from .test_approval_shares import two_stores  # noqa: F401 - the fixture: two instances on one store

pytestmark = pytest.mark.anyio


def _record(n: int, client: str | None) -> ResponseRecord:
    return ResponseRecord(id=f"resp_{client}_{n}", agent="clerk", client=client, created=1000.0 + n,
                          body={"n": n}, messages=[{"role": "user", "content": "x" * 100}])


async def test_a_save_past_the_cap_removes_the_clients_oldest_and_says_which(
        two_stores: tuple[Store, Store]) -> None:  # noqa: F811
    first, second = two_stores
    for n in range(3):
        assert await first.save_response(_record(n, "ann"), keep=3) == []
        assert await second.save_response(_record(n, None), keep=3) == []
    assert await second.save_response(_record(3, "ann"), keep=3) == ["resp_ann_0"]
    assert await first.save_response(_record(9, "ann"), keep=2) == ["resp_ann_1", "resp_ann_2"]  # oldest first
    assert [await first.get_response(f"resp_ann_{n}") is not None for n in (0, 1, 2, 3, 9)] == [
        False, False, False, True, True]
    assert all([await second.get_response(f"resp_None_{n}") is not None for n in range(3)])  # another owner's
    assert await first.save_response(_record(3, "ann"), keep=2) == []  # replacing one is no new one
    assert await first.save_response(_record(10, "ann")) == []  # no cap asked: kept as before
    assert await first.get_response("resp_ann_3") is not None


async def test_keeping_audits_what_it_removed_with_the_owners_client_and_user(
        two_stores: tuple[Store, Store]) -> None:  # noqa: F811
    first, _ = two_stores
    first.conversation_cap = 1
    owner = owner_key("ann", "user-7")
    await keep_conversation(first, _record(0, owner))
    await keep_conversation(first, _record(1, owner))
    [row] = await first.list_audit(limit=10)
    assert (row.kind, row.status, row.client, row.subject, row.run_id) == (
        "conversation", "evicted", "ann", "user-7", f"resp_{owner}_1")
    assert row.arguments == {"removed": [f"resp_{owner}_0"], "count": 1, "cap": 1}


async def test_retention_lowers_each_owners_count_so_the_cap_holds_what_is_left(
        two_stores: tuple[Store, Store]) -> None:  # noqa: F811
    first, second = two_stores
    for n in range(3):
        await first.save_response(_record(n, "ann"), keep=3)
    await first.save_response(_record(0, "bob"), keep=3)
    assert await second.prune_conversations(1001.5) == 3  # ann's 0 and 1, bob's 0
    for n in (3, 4):  # ann holds one: two more fit under a cap of 3
        assert await second.save_response(_record(n, "ann"), keep=3) == []
    assert await first.save_response(_record(5, "ann"), keep=3) == ["resp_ann_2"]


async def test_a_file_made_before_the_counts_has_them_filled_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SQLiteStore(path)
    for n in range(3):
        await store.save_response(_record(n, "ann"))
    store.close()
    with sqlite3.connect(path) as conn:  # as a file of an older gateway has it
        conn.execute("DROP TABLE conversation_counts")
    store = SQLiteStore(path)
    try:
        assert await store.save_response(_record(3, "ann"), keep=3) == ["resp_ann_0"]
    finally:
        store.close()


async def test_kept_records_are_found_many_at_once_as_one_by_one(two_stores: tuple[Store, Store]) -> None:  # noqa: F811
    """`get_responses`: the one question a chat's history asks for its kept turns (up to 4,096 messages; more ids
    than SQLite takes as parameters here), whoever the records' clients are, unknown and repeated ids included."""
    first, second = two_stores
    for n in range(0, 5000, 50):
        await first.save_response(_record(n, "ann" if n % 100 else None))
    asked = [f"resp_{'ann' if n % 100 else None}_{n}" for n in range(5000)] + ["resp_ann_50", "turn_nothing"]
    found = await second.get_responses(asked)
    assert sorted(found) == sorted(f"resp_{'ann' if n % 100 else None}_{n}" for n in range(0, 5000, 50))
    assert all([found[key] == await second.get_response(key) for key in found])
    assert await second.get_responses([]) == {}
