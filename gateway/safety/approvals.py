"""Approvals: tool calls that wait for a human, kept in the `Store` with the run they paused.

Three kinds of paused work:
* `chat`: the loop paused a run (`RunResult.pending_approvals` + JSON `state`; the loop gates a whole batch
  of calls, so for chats it is the loop that holds them); once every approval of that pause is decided,
  the run resumes with all the decisions and finishes.
* `call`: a single call outside a chat (the direct call, MCP, `gateway call`); the call pipeline's approval
  stage (`HoldForApproval`) puts it on hold after its arguments were validated; approving runs it once.
* `script`: a `run_code` script outside a chat (code mode at the MCP door) waiting at one of its tool calls; the
  run keeps the script's dumped state, and deciding the call resumes the script, which may wait again.

An approval is decided once: the store moves it from pending atomically, so a replay (or a race of
two approvers) gets `AlreadyDecided`, and only one decider resumes the run. Ids are random
(`apr_...` for calls; the loop's own ids for chats), unknown ids are `UnknownApproval`. Everything
lives in the store, so pending runs survive a restart and any gateway instance on the store can
resume them. The HTTP routes and the resume functions (which need the server's executor and
adapters) are in `gateway.server.supervision`.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import AlreadyDecided, ForbiddenApproval, GatewayError, UnknownApproval
from ..kernel.caller import bind_caller
from ..loop_types import Decision
from ..messages import ToolCall, ToolResult
from ..store import ApprovalRecord, RunRecord, Store
from .audit import AuditLog
from .rights import Rights

if TYPE_CHECKING:
    from ..kernel.calls import Invocation, Proceed

logger = logging.getLogger("gateway.approvals")

Resumer = Callable[[RunRecord, dict[str, Decision]], Awaitable[Any]]
"""Continues a claimed run with its decisions; returns the loop's RunResult (chat) or a ToolResult (call)."""


@dataclass(slots=True, kw_only=True)
class Outcome:
    """What deciding one approval led to."""

    approval: ApprovalRecord
    run: RunRecord
    result: Any = None
    """The resumed run's RunResult (chat) or the call's ToolResult; None while other approvals still wait."""
    waiting: list[str] = field(default_factory=list)
    """Ids of this run's approvals still pending (then the run did not resume yet)."""


def pending_message(tool: str, approval_id: str) -> str:
    return (f"Tool {tool!r} needs a human's approval before it runs; nothing was sent. It waits as approval "
            f"{approval_id}: an approver approves or denies it with POST /approvals/{approval_id} or "
            f"`gateway approvals approve|deny {approval_id}`; GET /approvals/{approval_id} then has its answer.")


class ApprovalManager:
    def __init__(self, store: Store, audit: AuditLog | None = None) -> None:
        """Keep and decide approvals.

        Parameters:
            store: where approvals and paused runs live.
            audit: records a row for each call put on hold and each denial; None: no audit.
        """
        self.store = store
        self.audit = audit

    async def hold_run(self, *, run_id: str, agent: str, client: str | None, result: Any) -> list[ApprovalRecord]:
        """Persist a paused chat run (a RunResult with `pending_approvals` and `state`); no-op when not paused."""
        pending = list(getattr(result, "pending_approvals", None) or [])
        if not pending:
            return []
        state = getattr(result, "state", None)
        if state is None:
            raise GatewayError("the loop paused a run without giving its state; it could not be resumed")
        records = [
            ApprovalRecord(id=p.id, run_id=run_id, agent=p.agent or agent, tool=p.tool, arguments=p.arguments or {},
                           call_id=p.call_id, client=client)
            for p in pending
        ]
        run = RunRecord(id=run_id, agent=agent, kind="chat", client=client,
                        state={"loop": state, "pending": [r.id for r in records]})
        await self.store.save_run(run, records)
        await self._audit_pending(records)
        return records

    async def hold_call(self, *, agent: str, tool: str, call: ToolCall, client: str | None) -> ToolResult:
        """Put one call (not a chat's) on hold; the result tells the caller its approval id. Its audit row is the
        call pipeline's (the result passes the audit stage)."""
        approval_id = f"apr_{secrets.token_urlsafe(18)}"
        arguments = call.arguments or {}
        record = ApprovalRecord(id=approval_id, run_id=f"call_{approval_id}", agent=agent, tool=tool,
                                arguments=arguments, call_id=call.id, client=client)
        run = RunRecord(id=record.run_id, agent=agent, kind="call", client=client,
                        state={"tool": tool, "arguments": arguments, "call_id": call.id, "pending": [approval_id]})
        await self.store.save_run(run, [record])
        return ToolResult.failure("approval_pending", pending_message(tool, approval_id), approval_id=approval_id)

    async def hold_script(self, *, run_id: str | None, agent: str, tool: str, arguments: dict[str, Any],
                          call_id: str, client: str | None, state: dict[str, Any]) -> ToolResult:
        """Keep a script (not a chat's) that waits at a call of `tool`; `run_id`: its run when it waited before.
        The result tells the caller the approval's id."""
        approval_id = f"apr_{secrets.token_urlsafe(18)}"
        run_id = run_id or f"script_{approval_id}"
        record = ApprovalRecord(id=approval_id, run_id=run_id, agent=agent, tool=tool, arguments=arguments,
                                call_id=call_id, client=client)
        run = RunRecord(id=run_id, agent=agent, kind="script", client=client, state={**state, "pending": [approval_id]})
        await self.store.save_run(run, [record])
        await self._audit_pending([record])
        return ToolResult.failure(
            "approval_pending", f"The script waits at a call of {tool!r} that needs a human's approval; it goes on "
            f"when approval {approval_id} is decided (POST /approvals/{approval_id} or `gateway approvals "
            f"approve|deny {approval_id}`), and the decision's answer is the script's result.",
            approval_id=approval_id)

    async def pending(self, *, rights: Rights = Rights.OPEN, limit: int = 100) -> list[ApprovalRecord]:
        """Pending approvals, oldest first: those `rights` may see (the ones it may decide, and its own)."""
        whole = rights.everything or rights.admin
        found = await self.store.list_approvals(status="pending", limit=limit if whole else 10_000)
        return [a for a in found if whole or rights.sees(a)][:limit]

    async def visible(self, approval_id: str, rights: Rights = Rights.OPEN) -> ApprovalRecord:
        """The approval, when `rights` may see it; UnknownApproval otherwise (another's is as unknown as none)."""
        record = await self.store.get_approval(approval_id)
        if record is None or not rights.sees(record):
            raise UnknownApproval(f"No approval {approval_id!r}; GET /approvals lists the pending ones.")
        return record

    async def decide(self, approval_id: str, decision: Decision, *, resume: Resumer, rights: Rights = Rights.OPEN,
                     by: str | None = None) -> Outcome:
        """Record a decision and, when it was the last one the run waited for, resume the run.

        Raises UnknownApproval (no such id), ForbiddenApproval (`rights` may not decide it: a plain key, or an
        agent it may not use; nothing is decided) or AlreadyDecided (replayed, or another decider was first).
        `by` (the deciding client) is audited.
        """
        record = await self.store.get_approval(approval_id)
        if record is None:
            raise UnknownApproval(f"No approval {approval_id!r}; GET /approvals lists the pending ones.")
        why_not = refusal(rights, record)
        if why_not is not None:
            raise ForbiddenApproval(why_not)
        decided = await self.store.decide_approval(
            approval_id, approve=decision.approve, arguments=decision.arguments, reason=decision.reason, by=by
        )
        if decided is None:
            current = await self.store.get_approval(approval_id)
            status = current.status if current else "gone"
            raise AlreadyDecided(f"Approval {approval_id} was already decided ({status}); an approval is used once.")
        if self.audit is not None:
            await self.audit.record_decision(
                approval=approval_id, agent=decided.agent, tool=decided.tool, approve=decision.approve, by=by,
                arguments=decision.arguments, reason=decision.reason, run_id=decided.run_id)
        if not decision.approve and self.audit is not None:
            refused = ToolResult.failure("approval_denied", decision.reason or "denied by a human")
            # The row belongs to the paused run's steps, and to its owner (the decision's row names the decider).
            with bind_caller(run_id=decided.run_id, client=decided.client):
                await self.audit.record_tool(decided.tool, decided.arguments, refused, approval=approval_id,
                                             agent=decided.agent)
        run = await self.store.claim_run(decided.run_id)
        if run is None:
            waiting = [a.id for a in await self.store.list_approvals(status="pending", run_id=decided.run_id)]
            stored = await self.store.get_run(decided.run_id)
            if stored is None:
                raise UnknownApproval(f"The run of approval {approval_id} is gone.")
            return Outcome(approval=decided, run=stored, waiting=waiting)
        decisions = await self._decisions_for(run)
        try:
            result = await resume(run, decisions)
        except BaseException:
            # Decisions stay used: a half-resumed run may already have executed an approved write.
            await self.store.finish_run(run.id, "failed")
            raise
        if run.kind == "chat" and getattr(result, "pending_approvals", None):
            await self.hold_run(run_id=run.id, agent=run.agent, client=run.client, result=result)
        elif run.kind == "script" and isinstance(result, ToolResult) and result.error_type == "approval_pending":
            pass  # the script waits at its next call: `hold_script` kept the run again
        else:
            await self.store.finish_run(run.id, "done")
        return Outcome(approval=decided, run=run, result=result)

    async def _decisions_for(self, run: RunRecord) -> dict[str, Decision]:
        decisions: dict[str, Decision] = {}
        for approval_id in run.state.get("pending", []):
            record = await self.store.get_approval(approval_id)
            if record is None or record.status == "pending":
                continue
            decisions[approval_id] = Decision(approve=record.status == "approved",
                                              arguments=record.decided_arguments, reason=record.reason)
        return decisions

    async def _audit_pending(self, records: list[ApprovalRecord]) -> None:
        if self.audit is None:
            return
        for record in records:
            waiting = ToolResult.failure("approval_pending", "waits for a human's approval", approval_id=record.id)
            with bind_caller(run_id=record.run_id):
                await self.audit.record_tool(record.tool, record.arguments, waiting, approval=record.id,
                                             agent=record.agent)


def refusal(rights: Rights, record: ApprovalRecord) -> str | None:
    """Why `rights` may not decide `record` (None: it may)."""
    if not rights.may_use(record.agent):
        return f"This key may not decide approvals of agent {record.agent!r}."
    if not rights.decides:
        return ("This key may not decide approvals: only approvers (`clients.<name>.approver: true` in agents.yaml) "
                f"and admins do. The call waits; GET /approvals/{record.id} shows its state.")
    return None


def approval_dict(record: ApprovalRecord, redact: Callable[[Any], Any] | None = None) -> dict[str, Any]:
    """The `GET /approvals` item (DESIGN.md: id, agent, tool, arguments) with what else a human needs."""
    arguments = redact(record.arguments) if redact else record.arguments
    return {"id": record.id, "agent": record.agent, "tool": record.tool, "arguments": arguments,
            "status": record.status, "client": record.client, "run_id": record.run_id, "created": record.created,
            "decided_by": record.decided_by}


def _unapproved(invocation: Invocation) -> ToolResult:
    tool = invocation.agent_tool
    return ToolResult.failure(
        "approval_denied",
        f"Tool {tool.name!r} of agent {invocation.agent!r} needs a human's approval (approval: {tool.approval}) and "
        "nothing here can hold it for one; nothing was sent.")


class RefuseUnapproved:
    """The approval stage of a gateway without a store: a call under approval is refused, never run."""

    async def __call__(self, invocation: Invocation, proceed: Proceed) -> ToolResult:
        if invocation.needs_approval:
            return _unapproved(invocation)
        return await proceed(invocation)


class HoldForApproval:
    """The approval stage: a call under approval that no human approved yet waits in the store.

    A chat's calls are gated by the loop itself (it pauses the whole batch and resumes it with the decisions),
    so a chat call that arrives here unapproved is refused rather than held a second time."""

    def __init__(self, approvals: ApprovalManager) -> None:
        self.approvals = approvals

    async def __call__(self, invocation: Invocation, proceed: Proceed) -> ToolResult:
        if not invocation.needs_approval:
            return await proceed(invocation)
        if invocation.door in ("chat", "resume"):
            return _unapproved(invocation)
        return await self.approvals.hold_call(agent=invocation.agent, tool=invocation.agent_tool.name,
                                              call=invocation.call, client=invocation.client)
