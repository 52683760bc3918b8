"""With `gateway.auth`, a user's own work is the user's, not every user's of the client their claims map onto.

`clients: {engineers: {agents: [clerk], claims: {groups: eng}}}` maps alice and bob onto one client. A plain
client's own audit rows and pending approvals were read by client only, so bob listed alice's pending calls (with
their arguments) and read her audit rows (the arguments and outcome of each of her calls), while the answers of
approved runs, the Responses door and MCP sessions already kept users apart. The client's static key (no user)
still reads all of its client's work; approvers and admins read what they did before."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.errors import UnknownApproval
from gateway.kernel.caller import bind_caller
from gateway.loop_types import PendingApproval, RunResult
from gateway.messages import Message, ToolResult
from gateway.safety.approvals import ApprovalManager
from gateway.safety.audit import AuditLog
from gateway.safety.rights import Rights
from gateway.store import AuditQuery, SQLiteStore

pytestmark = pytest.mark.anyio

ENGINEERS = Rights(client="engineers", agents=frozenset({"clerk"}))


def _paused(approval: str) -> RunResult:
    pending = [PendingApproval(id=approval, agent="clerk", tool="createItem", arguments={"n": 1}, call_id="c1")]
    return RunResult(message=Message(role="assistant"), messages=[], pending_approvals=pending,
                     state={"version": 1, "pending": [p.to_dict() for p in pending]})


async def test_a_user_sees_only_their_own_pending_calls(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "state.db")
    manager = ApprovalManager(store, AuditLog(store))
    with bind_caller(client="engineers", subject="alice"):
        await manager.hold_run(run_id="chat-alice", agent="clerk", client="engineers", result=_paused("apr_alice"))
    alice, bob = ENGINEERS.as_user("alice"), ENGINEERS.as_user("bob")
    assert [a.id for a in await manager.pending(rights=alice)] == ["apr_alice"]
    assert (await manager.visible("apr_alice", alice)).id == "apr_alice"
    assert await manager.pending(rights=bob) == []
    with pytest.raises(UnknownApproval):
        await manager.visible("apr_alice", bob)
    # The client's static key, and an approver of the agent, see it as before.
    assert [a.id for a in await manager.pending(rights=ENGINEERS)] == ["apr_alice"]
    reviewer = Rights(client="leads", agents=frozenset({"clerk"}), approver=True).as_user("dave")
    assert [a.id for a in await manager.pending(rights=reviewer)] == ["apr_alice"]
    store.close()


async def test_a_user_reads_only_their_own_audit_rows(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "state.db")
    audit = AuditLog(store)
    for user in ("alice", "bob"):
        with bind_caller(client="engineers", subject=user, agent="clerk"):
            await audit.record_tool("createItem", {"by": user}, ToolResult(ok=True, status=200), agent="clerk")
    with bind_caller(client="engineers", agent="clerk"):  # the client's static key
        await audit.record_tool("createItem", {"by": "key"}, ToolResult(ok=True, status=200), agent="clerk")

    async def readable(rights: Rights) -> list[str]:
        query = rights.audit_query(AuditQuery())
        return sorted(row.arguments["by"] for row in await store.list_audit(query=query)) if query else []

    assert await readable(ENGINEERS.as_user("bob")) == ["bob"]
    assert await readable(ENGINEERS.as_user("alice")) == ["alice"]
    assert await readable(ENGINEERS) == ["alice", "bob", "key"]
    assert ENGINEERS.as_user("bob").owns("engineers", "bob") and not ENGINEERS.as_user("bob").owns("engineers", "alice")
    store.close()
