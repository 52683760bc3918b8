from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.errors import AlreadyDecided, ForbiddenApproval, RunError, UnknownApproval
from gateway.loop_types import Decision, PendingApproval, RunResult
from gateway.messages import Message, ToolCall
from gateway.safety.approvals import ApprovalManager
from gateway.safety.audit import AuditLog
from gateway.safety.rights import Rights
from gateway.store import MemoryStore, RunRecord, SQLiteStore

pytestmark = pytest.mark.anyio


def _paused(*ids: str) -> RunResult:
    pending = [PendingApproval(id=i, agent="clerk", tool="createItem", arguments={"n": k}, call_id=f"c{k}")
               for k, i in enumerate(ids)]
    return RunResult(message=Message(role="assistant"), messages=[], pending_approvals=pending,
                     state={"version": 1, "pending": [p.to_dict() for p in pending]})


class Resumer:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Decision]]] = []

    async def __call__(self, run: RunRecord, decisions: dict[str, Decision]) -> Any:
        self.calls.append((run.id, decisions))
        return RunResult(message=Message(role="assistant", content="done"), messages=[])


async def test_run_resumes_once_every_approval_is_decided() -> None:
    store = MemoryStore()
    manager = ApprovalManager(store, AuditLog(store))
    await manager.hold_run(run_id="chat-1", agent="clerk", client="ci", result=_paused("apr_a", "apr_b"))
    assert [a.id for a in await manager.pending()] == ["apr_a", "apr_b"]
    resume = Resumer()
    first = await manager.decide("apr_a", Decision(approve=True, arguments={"n": 9}), resume=resume)
    assert first.result is None and first.waiting == ["apr_b"] and resume.calls == []
    second = await manager.decide("apr_b", Decision(approve=False, reason="no"), resume=resume)
    assert second.result.message.content == "done"
    (run_id, decisions), = resume.calls
    assert run_id == "chat-1" and decisions["apr_a"].arguments == {"n": 9} and not decisions["apr_b"].approve
    assert (await store.get_run("chat-1")).status == "done"  # type: ignore[union-attr]
    assert await manager.pending() == []
    statuses = [(r.kind, r.status) for r in await store.list_audit()]
    assert statuses == [("tool", "approval_denied"), ("decision", "denied"), ("decision", "approved"),
                        ("tool", "approval_pending"), ("tool", "approval_pending")]


async def test_replayed_forged_and_foreign_approvals_are_refused() -> None:
    manager = ApprovalManager(MemoryStore())
    await manager.hold_run(run_id="chat-1", agent="clerk", client=None, result=_paused("apr_a"))
    resume = Resumer()
    with pytest.raises(ForbiddenApproval):
        await manager.decide("apr_a", Decision(approve=True), resume=resume,
                             rights=Rights(client="w", agents=frozenset({"weather"}), approver=True))
    with pytest.raises(ForbiddenApproval):  # a plain key of the agent: it may not decide
        await manager.decide("apr_a", Decision(approve=True), resume=resume,
                             rights=Rights(client="c", agents=frozenset({"clerk"})))
    with pytest.raises(UnknownApproval):
        await manager.decide("apr_forged", Decision(approve=True), resume=resume)
    await manager.decide("apr_a", Decision(approve=True), resume=resume)
    with pytest.raises(AlreadyDecided):
        await manager.decide("apr_a", Decision(approve=True), resume=resume)
    with pytest.raises(AlreadyDecided):
        await manager.decide("apr_a", Decision(approve=False), resume=resume)
    assert len(resume.calls) == 1


async def test_a_failed_resume_does_not_free_the_approval() -> None:
    store = MemoryStore()
    manager = ApprovalManager(store)
    await manager.hold_run(run_id="chat-1", agent="clerk", client=None, result=_paused("apr_a"))

    async def broken(run: RunRecord, decisions: dict[str, Decision]) -> Any:
        raise RuntimeError("provider down")

    with pytest.raises(RuntimeError):
        await manager.decide("apr_a", Decision(approve=True), resume=broken)
    assert (await store.get_run("chat-1")).status == "failed"  # type: ignore[union-attr]
    with pytest.raises(AlreadyDecided):
        await manager.decide("apr_a", Decision(approve=True), resume=Resumer())


async def test_a_resumed_run_that_pauses_again_is_held_again() -> None:
    store = MemoryStore()
    manager = ApprovalManager(store)
    await manager.hold_run(run_id="chat-1", agent="clerk", client=None, result=_paused("apr_a"))

    async def pauses_again(run: RunRecord, decisions: dict[str, Decision]) -> Any:
        again = _paused("apr_next")  # kept by the resumer, as the server's keeps it before the chat's row
        await manager.hold_again(run, again)
        return again

    outcome = await manager.decide("apr_a", Decision(approve=True), resume=pauses_again)
    assert outcome.result.pending_approvals[0].id == "apr_next"
    assert [a.id for a in await manager.pending()] == ["apr_next"]
    run = await store.get_run("chat-1")
    assert run is not None and run.status == "paused" and run.state["pending"] == ["apr_next"]


async def test_direct_call_on_hold_names_its_approval() -> None:
    store = MemoryStore()
    manager = ApprovalManager(store, AuditLog(store))
    result = await manager.hold_call(agent="clerk", tool="createItem",
                                     call=ToolCall(id="d1", name="createItem", arguments={"n": 1}), client="ci")
    assert result.error_type == "approval_pending" and result.approval_id
    assert result.approval_id in (result.error or "") and not result.ok
    (pending,) = await manager.pending(rights=Rights(client="ops", agents=frozenset({"clerk"}), approver=True))
    assert pending.id == result.approval_id and pending.client == "ci"
    assert await manager.pending(rights=Rights(client="ops", agents=frozenset({"weather"}), approver=True)) == []
    # A plain key sees its own pending calls only.
    assert [a.id for a in await manager.pending(rights=Rights(client="ci", agents=None))] == [pending.id]
    assert await manager.pending(rights=Rights(client="other", agents=frozenset({"clerk"}))) == []
    run = await store.get_run(pending.run_id)
    assert run is not None and run.kind == "call" and run.state["arguments"] == {"n": 1}


async def test_hold_run_is_a_no_op_for_a_finished_run() -> None:
    store = MemoryStore()
    finished = RunResult(message=Message(role="assistant", content="hi"), messages=[])
    assert await ApprovalManager(store).hold_run(run_id="x", agent="clerk", client=None, result=finished) == []
    assert await store.get_run("x") is None


async def test_recover_reopens_what_sent_nothing_and_fails_what_sent_a_call() -> None:
    import time as clock

    from gateway.kernel.caller import bind_caller
    from gateway.messages import ToolResult

    store = MemoryStore()
    manager = ApprovalManager(store, AuditLog(store))
    for run_id, approval in (("stuck-paused", "apr_p"), ("stuck-quiet", "apr_q"), ("stuck-sent", "apr_s")):
        await manager.hold_run(run_id=run_id, agent="clerk", client=None, result=_paused(approval))
        await store.decide_approval(approval, approve=True)
    await store.claim_run("stuck-quiet")  # claimed, then the process died before sending
    await store.claim_run("stuck-sent")  # claimed, its call sent, then the process died
    with bind_caller(run_id="stuck-sent"):
        await manager.audit.record_tool("createItem", {"n": 0}, ToolResult.failure("timeout", "x"),  # type: ignore[union-attr]
                                        approval="apr_s", agent="clerk")
    assert await manager.recover(clock.time() - 60) == {"reopened": [], "failed": []}  # not stuck long enough
    done = await manager.recover(clock.time() + 1)
    assert sorted(done["reopened"]) == ["stuck-paused", "stuck-quiet"] and done["failed"] == ["stuck-sent"]
    assert sorted(a.id for a in await manager.pending()) == ["apr_p", "apr_q"]
    assert (await store.get_run("stuck-sent")).status == "failed"  # type: ignore[union-attr]


async def test_a_resumed_run_whose_clients_cap_filled_meanwhile_ends_failed_not_left_resuming(
        tmp_path: Path) -> None:
    """mend45's left item: the resumed run looked for room (`room_for`) and paused again, but another request of
    its client filled the cap before the pause was kept: the pause could not be saved and the run stayed
    `resuming` until `recover` found it a minute later. Its approved call may have run (no audit log here to tell),
    so it cannot be taken back: it ends `failed` at once, and the decider is told why."""
    store = SQLiteStore(tmp_path / "state.db")
    try:
        manager = ApprovalManager(store, pending_cap=1)
        await manager.hold_run(run_id="chat-1", agent="clerk", client="ci", result=_paused("apr_a"))

        async def resume(run: RunRecord, decisions: dict[str, Decision]) -> RunResult:
            held = await manager.hold_call(agent="clerk", tool="createItem", client="ci",
                                           call=ToolCall(id="other", name="createItem", arguments={}))
            assert held.error_type == "approval_pending"  # the other request's call took the one place
            again = _paused("apr_b")  # the resumed run pauses at one more call, which the resumer keeps
            await manager.hold_again(run, again)
            return again

        with pytest.raises(RunError) as caught:
            await manager.decide("apr_a", Decision(approve=True), resume=resume)
        assert caught.value.code == "rate_limited" and "max_pending_approvals_per_client" in str(caught.value)
        assert (await store.get_run("chat-1")).status == "failed"  # type: ignore[union-attr]
        assert [a.tool for a in await manager.pending()] == ["createItem"]  # the other request's, not the run's
    finally:
        store.close()
