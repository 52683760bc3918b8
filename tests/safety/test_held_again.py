"""A run that pauses again after a decision stays its owner's: the resume happens inside the decider's request, and
what is kept for the next pause (the run's user, the pending call's audit row) must name the run's owner, never
the approver. Kept as the approver's, the next resume ran as the approver's user: their own `user_oauth`
connection, and under the same approver their token for `token_exchange`, served the other user's call."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.kernel.caller import bind_caller
from gateway.loop_types import Decision, PendingApproval, RunResult
from gateway.messages import Message
from gateway.safety.approvals import ApprovalManager, run_owner
from gateway.safety.audit import AuditLog
from gateway.store import RunRecord, SQLiteStore

pytestmark = pytest.mark.anyio


def _paused(approval: str) -> RunResult:
    pending = [PendingApproval(id=approval, agent="clerk", tool="createItem", arguments={"n": 1}, call_id="c1")]
    return RunResult(message=Message(role="assistant"), messages=[], pending_approvals=pending,
                     state={"version": 1, "pending": [p.to_dict() for p in pending]})


@pytest.mark.parametrize("decider_subject", ["admin@example.com", None], ids=["signed-in approver", "static key"])
async def test_a_run_held_again_stays_its_owners(tmp_path, decider_subject: str | None) -> None:  # type: ignore[no-untyped-def]
    store = SQLiteStore(tmp_path / "state.db")
    manager = ApprovalManager(store, AuditLog(store))
    with bind_caller(client="engineers", subject="alice@example.com"):  # alice's chat pauses
        await manager.hold_run(run_id="chat-1", agent="clerk", client="engineers", result=_paused("apr_a"))

    async def resume_pausing_again(run: RunRecord, decisions: dict[str, Decision]) -> Any:
        again = _paused("apr_b")  # the approved call ran; the model asks for another write
        await manager.hold_again(run, again)  # kept by the resumer, as the server's keeps it (in the decider's request)
        return again

    with bind_caller(client="ops", subject=decider_subject):  # an approver's request decides
        outcome = await manager.decide("apr_a", Decision(approve=True), resume=resume_pausing_again, by="ops")
    assert outcome.result.pending_approvals[0].id == "apr_b"
    run = await store.get_run("chat-1")
    assert run is not None and run.status == "paused" and run.client == "engineers"
    assert run.state.get("subject") == "alice@example.com"
    with bind_caller(client="ops", subject=decider_subject):  # the next decision resumes it as alice
        assert run_owner(run)["subject"] == "alice@example.com" and run_owner(run)["token"] is None
    (row,) = [r for r in await store.list_audit() if r.approval == "apr_b"]
    assert (row.client, row.subject, row.status) == ("engineers", "alice@example.com", "approval_pending")
    store.close()
