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
two approvers) gets `AlreadyDecided`, and only one decider resumes the run. A decision either runs its call
once or can be made again: when its audit row cannot be written, or the resume ends with nothing sent (the
store or Redis failed first, a limit refused the approved call), the approval goes back to pending
(`DecisionNotCarriedOut`); once something was sent, it stays used. Runs left in between by a dead process
(`resuming`, or `paused` with every approval decided) are found by `recover` (at start-up and every minute, by
`gateway serve`): reopened when the audit log shows nothing of them was sent, failed otherwise. Ids are random
(`apr_...` for calls; the loop's own ids for chats), unknown ids are `UnknownApproval`. Everything
lives in the store, so pending runs survive a restart and any gateway instance on the store can
resume them. The HTTP routes and the resume functions (which need the server's executor and
adapters) are in `gateway.server.supervision`.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config.settings import DEFAULT_MAX_PENDING_APPROVALS
from ..errors import (
    AlreadyDecided,
    DecisionNotCarriedOut,
    ForbiddenApproval,
    GatewayError,
    RunError,
    ToolGone,
    UnknownApproval,
)
from ..kernel.caller import bind_caller, current_caller
from ..messages import NOT_SENT, ToolCall, ToolResult
from ..store import ApprovalRecord, AuditQuery, RunRecord, Store
from ..store.base import RunStatus
from .audit import AuditLog, Sends, watch_sends
from .rights import Rights

if TYPE_CHECKING:
    from ..catalog import AgentTool
    from ..kernel.calls import Invocation, Proceed
    from ..loop_types import Decision

logger = logging.getLogger("gateway.approvals")

Resumer = Callable[[RunRecord, dict[str, "Decision"]], Awaitable[Any]]
"""Continues a claimed run with its decisions; returns the loop's RunResult (chat) or a ToolResult (call). A run
that waits again is kept by the resumer, as its owner (`hold_again`, `hold_script`): a chat's before its audit row
is written, so that a pause its client's cap cannot keep (`RunError` rate_limited) is the row's ending, not `paused`.
An error it raises after something was sent fails the run; with nothing sent the decision is taken back."""

CLOCK_MARGIN = 5.0
"""Seconds by which instances' clocks (and PostgreSQL's, which stamps a claim) may differ: a row this long before a
run's claim may be of its resume."""


def _first_line(value: Any) -> str:
    text = str(value).strip() or type(value).__name__
    return text.splitlines()[0]


@dataclass(slots=True, kw_only=True)
class Outcome:
    """What deciding one approval led to."""

    approval: ApprovalRecord
    run: RunRecord
    result: Any = None
    """The resumed run's RunResult (chat) or the call's ToolResult; None while other approvals still wait."""
    waiting: list[str] = field(default_factory=list)
    """Ids of this run's approvals still pending (then the run did not resume yet)."""
    reopened: bool = False
    """The approved call was refused before it was sent (`result` says why): the approval is pending again."""


def pending_message(tool: str, approval_id: str) -> str:
    return (f"Tool {tool!r} needs a human's approval before it runs; nothing was sent. It waits as approval "
            f"{approval_id}: an approver approves or denies it with POST /approvals/{approval_id} or "
            f"`gateway approvals approve|deny {approval_id}`; GET /approvals/{approval_id} then has its answer.")


def over_cap(client: str | None, cap: int) -> ToolResult:
    """The refusal of a call past its client's cap of waiting calls (`gateway.max_pending_approvals_per_client`)."""
    who = f"Client {client!r}" if client is not None else "This caller"
    return ToolResult.failure(
        "rate_limited", f"{who} has as many calls waiting for a human's approval as it may ({cap}: "
        "gateway.max_pending_approvals_per_client); this call was neither sent nor queued. Call again once an "
        "approver has decided some of them.")


class ApprovalManager:
    def __init__(self, store: Store, audit: AuditLog | None = None,
                 pending_cap: int | None = DEFAULT_MAX_PENDING_APPROVALS) -> None:
        """Keep and decide approvals.

        Parameters:
            store: where approvals and paused runs live.
            audit: records a row for each call put on hold and each denial; None: no audit.
            pending_cap: calls one client may have waiting at once (`gateway.max_pending_approvals_per_client`);
                None: no cap.
        """
        self.store = store
        self.audit = audit
        self.pending_cap = pending_cap

    async def room_for(self, client: str | None, count: int) -> ToolResult | None:
        """The refusal of `count` more calls of `client` waiting for a human past its cap; None: they fit. A look
        before a chat run pauses, so that its model reads the refusal as the calls' results; the store counts
        again, in one step with the hold (`hold_run`), for runs that pause at once. Callers without a key (None)
        are counted as every pending call, as a store without clients holds only theirs."""
        cap = self.pending_cap
        if cap is None:
            return None
        waiting = await self.store.pending_count(client)  # a count: not up to `cap` rows and their arguments
        return over_cap(client, cap) if waiting + count > cap else None

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
                        state={"loop": state, "pending": [r.id for r in records], **_owner()})
        if not await self.store.save_run(run, records, pending_cap=self.pending_cap):
            # The loop asked `room_for` before it paused; another request of the client filled the cap since (the
            # chat door answers 429 rate_limited, with the steps that ran; none of the paused calls was sent).
            raise RunError(str(over_cap(client, self.pending_cap or 0).error), "rate_limited")
        await self._audit_pending(records)
        return records

    async def hold_again(self, run: RunRecord, result: Any) -> list[ApprovalRecord]:
        """Keep a resumed chat run that paused again (`hold_run`), as its owner: its user resumes it next time and
        owns the pending rows, never the decider in whose request the resume runs (whose user would otherwise serve
        the next resume). The resumer calls it before the chat's row is written; `RunError` past the cap."""
        with bind_caller(client=run.client, subject=run.state.get("subject")):
            return await self.hold_run(run_id=run.id, agent=run.agent, client=run.client, result=result)

    async def hold_call(self, *, agent: str, tool: str, call: ToolCall, client: str | None) -> ToolResult:
        """Put one call (not a chat's) on hold; the result tells the caller its approval id. Its audit row is the
        call pipeline's (the result passes the audit stage)."""
        approval_id = f"apr_{secrets.token_urlsafe(18)}"
        arguments = call.arguments or {}
        record = ApprovalRecord(id=approval_id, run_id=f"call_{approval_id}", agent=agent, tool=tool,
                                arguments=arguments, call_id=call.id, client=client)
        run = RunRecord(id=record.run_id, agent=agent, kind="call", client=client,
                        state={"tool": tool, "arguments": arguments, "call_id": call.id, "pending": [approval_id],
                               **_owner()})
        if not await self.store.save_run(run, [record], pending_cap=self.pending_cap):
            return over_cap(client, self.pending_cap or 0)
        return ToolResult.failure("approval_pending", pending_message(tool, approval_id), approval_id=approval_id)

    async def hold_script(self, *, run_id: str | None, agent: str, tool: str, arguments: dict[str, Any],
                          call_id: str, client: str | None, state: dict[str, Any]) -> ToolResult:
        """Keep a script (not a chat's) that waits at a call of `tool`; `run_id`: its run (the run id its audit row
        and calls carry; the one it was kept under when it waited before).
        The result tells the caller the approval's id."""
        approval_id = f"apr_{secrets.token_urlsafe(18)}"
        run_id = run_id or f"script_{approval_id}"
        record = ApprovalRecord(id=approval_id, run_id=run_id, agent=agent, tool=tool, arguments=arguments,
                                call_id=call_id, client=client)
        run = RunRecord(id=run_id, agent=agent, kind="script", client=client,
                        state={**state, "pending": [approval_id], **_owner()})
        if not await self.store.save_run(run, [record], pending_cap=self.pending_cap):
            return over_cap(client, self.pending_cap or 0)
        await self._audit_pending([record])
        return ToolResult.failure(
            "approval_pending", f"The script waits at a call of {tool!r} that needs a human's approval; it goes on "
            f"when approval {approval_id} is decided (POST /approvals/{approval_id} or `gateway approvals "
            f"approve|deny {approval_id}`), and the decision's answer is the script's result.",
            approval_id=approval_id)

    async def pending(self, *, rights: Rights = Rights.OPEN, limit: int = 100,
                      client: str | None = None) -> list[ApprovalRecord]:
        """Pending approvals that `rights` may see (the ones it may decide, and its own), oldest first; `client`:
        that client's only.

        Taken in turns by client (every client's oldest, then every client's second oldest, ...), then shown
        oldest first: one client's many waiting calls cannot fill `limit` and hide another client's from its
        approvers (redteam44)."""
        whole = rights.everything or rights.admin
        found = await self.store.list_approvals(status="pending", client=client, limit=limit if whole else 10_000,
                                                fair=True)
        shown = [a for a in found if whole or rights.sees(a, await self._subject_of(a, rights))][:limit]
        return sorted(shown, key=lambda a: (a.created, a.id))

    async def visible(self, approval_id: str, rights: Rights = Rights.OPEN) -> ApprovalRecord:
        """The approval, when `rights` may see it; UnknownApproval otherwise (another's is as unknown as none)."""
        record = await self.store.get_approval(approval_id)
        if record is None or not rights.sees(record, await self._subject_of(record, rights)):
            raise UnknownApproval(f"No approval {approval_id!r}; GET /approvals lists the pending ones.")
        return record

    async def _subject_of(self, record: ApprovalRecord, rights: Rights) -> str | None:
        """The user whose run `record` holds, when it matters: a signed-in caller who does not decide sees only its
        own user's (another user of the same client is another owner)."""
        if rights.subject is None or rights.decides or record.client != rights.client:
            return None
        run = await self.store.get_run(record.run_id)
        return run_subject(run) if run is not None else None

    async def decide(self, approval_id: str, decision: Decision, *, resume: Resumer, rights: Rights = Rights.OPEN,
                     by: str | None = None, gone: Callable[[ApprovalRecord], str | None] | None = None) -> Outcome:
        """Record a decision and, when it was the last one the run waited for, resume the run.

        Raises UnknownApproval (no such id), ForbiddenApproval (`rights` may not decide it: a plain key, or an
        agent it may not use; nothing is decided), ToolGone (an approval `gone` says would run nothing, its tool
        no longer the agent's: nothing is decided) or AlreadyDecided (replayed, or another decider was first).
        `by` (the deciding client) is audited.
        """
        record = await self.store.get_approval(approval_id)
        if record is None:
            raise UnknownApproval(f"No approval {approval_id!r}; GET /approvals lists the pending ones.")
        why_not = refusal(rights, record)
        if why_not is not None:
            raise ForbiddenApproval(why_not)
        if decision.approve and gone is not None and record.status == "pending" and (why_not := gone(record)):
            raise ToolGone(why_not)
        decided = await self.store.decide_approval(
            approval_id, approve=decision.approve, arguments=decision.arguments, reason=decision.reason, by=by
        )
        if decided is None:
            current = await self.store.get_approval(approval_id)
            status = current.status if current else "gone"
            raise AlreadyDecided(f"Approval {approval_id} was already decided ({status}); an approval is used once.")
        try:
            await self._audit_decision(decided, decision, by)
        except BaseException:
            # Not recorded, so not made: the approval goes back to pending (or, if the store is gone too, `recover`
            # puts it back once the decision is old enough).
            await self._reopen(decided, status="paused")
            raise
        run = await self.store.claim_run(decided.run_id)
        if run is None:
            waiting = [a.id for a in await self.store.list_approvals(status="pending", run_id=decided.run_id)]
            stored = await self.store.get_run(decided.run_id)
            if stored is None:
                raise UnknownApproval(f"The run of approval {approval_id} is gone.")
            return Outcome(approval=decided, run=stored, waiting=waiting)
        decisions = await self._decisions_for(run)
        with watch_sends() as sends:
            try:
                result = await resume(run, decisions)
            except BaseException as exc:
                if self._none_sent(sends) and await self._reopen(decided, status="resuming", why=exc):
                    if not isinstance(exc, Exception):
                        raise  # cancelled: the decision is taken back, nobody to tell
                    raise DecisionNotCarriedOut(
                        f"Nothing was sent: {_first_line(exc)} The decision was taken back and approval "
                        f"{approval_id} is pending again: decide it again once the gateway can carry it out."
                    ) from exc
                # Something may have run: the decisions stay used, the run is over.
                await self._finish(run.id, "failed")
                raise
        if run.kind == "call" and self._none_sent(sends) and decision.approve and not getattr(result, "ok", True):
            # The approved call was refused before it was sent (a limit, a paused api, invalid edited arguments).
            if await self._reopen(decided, status="resuming", why=result):
                refreshed = await self.store.get_approval(approval_id)
                return Outcome(approval=refreshed or decided, run=run, result=result, reopened=True)
        if run.kind == "chat" and getattr(result, "pending_approvals", None):
            pass  # paused again: the resumer kept the run (`hold_again`) before writing the chat's row
        elif run.kind == "script" and isinstance(result, ToolResult) and result.error_type == "approval_pending":
            pass  # the script waits at its next call: `hold_script` kept the run again
        else:
            await self.store.finish_run(run.id, "done")
        return Outcome(approval=decided, run=run, result=result)

    async def recover(self, before: float) -> dict[str, list[str]]:
        """Put right the runs a dead process (or a store outage) left between a decision and its end, stuck since
        before `before` (epoch seconds): those of which the audit log shows nothing sent are reopened (their
        approvals pending again), the others failed (a call may have run: it must not run twice). The run ids, by
        what was done."""
        done: dict[str, list[str]] = {"reopened": [], "failed": []}
        for run in await self.store.stuck_runs(before):
            ids = [str(i) for i in run.state.get("pending", [])]
            if await self._sent_since_claim(run, ids):
                await self.store.finish_run(run.id, "failed")
                done["failed"].append(run.id)
                logger.warning("run %s was left %s after a call of it was sent: failed (the call may have run)",
                               run.id, run.status)
            elif await self.store.reopen_run(run.id, ids, status=run.status):
                done["reopened"].append(run.id)
                logger.warning("run %s was left %s with nothing sent: its approvals are pending again", run.id,
                               run.status)
        return done

    async def _sent_since_claim(self, run: RunRecord, ids: list[str]) -> bool:
        """Whether a tool call of `run` may have been sent by its resume: a row under one of its approvals, or any
        row of the run from around its claim on (a margin for clocks of other instances), that is not a refusal."""
        if run.status == "paused":
            return False  # never claimed: no resume of it ran
        if self.audit is None:
            return True  # nothing to tell by: never risk running a call twice
        rows = await self.store.list_audit(limit=1000, query=AuditQuery(run_id=run.id, kind="tool"))
        since = run.updated - CLOCK_MARGIN
        return any(row.status not in NOT_SENT and (row.approval in ids or row.time >= since) for row in rows)

    def _none_sent(self, sends: Sends) -> bool:
        """Whether nothing of a resume was sent: known only when calls are audited (the audit stage counts what it
        lets through); without an audit log every resume may have sent something."""
        return self.audit is not None and sends.count == 0

    async def _audit_decision(self, decided: ApprovalRecord, decision: Decision, by: str | None) -> None:
        if self.audit is None:
            return
        await self.audit.record_decision(
            approval=decided.id, agent=decided.agent, tool=decided.tool, approve=decision.approve, by=by,
            arguments=decision.arguments, reason=decision.reason, run_id=decided.run_id)
        if not decision.approve:
            refused = ToolResult.failure("approval_denied", decision.reason or "denied by a human")
            # The row belongs to the paused run's steps, and to its owner (the decision's row names the decider).
            with bind_caller(run_id=decided.run_id, client=decided.client):
                await self.audit.record_tool(decided.tool, decided.arguments, refused, approval=decided.id,
                                             agent=decided.agent)

    async def _reopen(self, decided: ApprovalRecord, *, status: RunStatus, why: Any = None) -> bool:
        """Take a decision back (best effort: a store that fails here leaves it to `recover`); whether it was."""
        try:
            reopened = await asyncio.shield(self.store.reopen_run(decided.run_id, [decided.id], status=status))
        except Exception as exc:  # noqa: BLE001 - the caller raises its own error; recover() finishes this
            logger.error("could not put approval %s back to pending (%s); it will be once found stuck", decided.id,
                         exc)
            return False
        if reopened and self.audit is not None and why is not None:
            reason = _first_line(why) if isinstance(why, BaseException) else (getattr(why, "error", None) or "")
            try:
                await self.audit.record_reopen(approval=decided.id, run_id=decided.run_id, agent=decided.agent,
                                               tool=decided.tool, reason=reason)
            except Exception:  # noqa: BLE001 - logged by the audit log; the approval is pending either way
                pass
        return reopened

    async def _finish(self, run_id: str, status: RunStatus) -> None:
        try:
            await asyncio.shield(self.store.finish_run(run_id, status))
        except Exception as exc:  # noqa: BLE001 - left `resuming`: recover() fails it later (it sent something)
            logger.error("run %s could not be marked %s (%s)", run_id, status, exc)

    async def _decisions_for(self, run: RunRecord) -> dict[str, Decision]:
        # The loop's types (half a dozen dataclasses) are imported at the first resume: the safeguards open at every
        # door's start, `gateway mcp`'s before its first listing.
        from ..loop_types import Decision

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
            with bind_caller(run_id=record.run_id, client=record.client):  # the run's owner's row, whoever decided
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

    def for_tool(self, agent_tool: AgentTool) -> RefuseUnapproved | None:
        return self if agent_tool.needs_approval else None

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

    def for_tool(self, agent_tool: AgentTool) -> HoldForApproval | None:
        """A tool that never needs approval is not held: the stage is left out of its chain."""
        return self if agent_tool.needs_approval else None

    async def __call__(self, invocation: Invocation, proceed: Proceed) -> ToolResult:
        if not invocation.needs_approval:
            return await proceed(invocation)
        if invocation.door in ("chat", "resume"):
            return _unapproved(invocation)
        return await self.approvals.hold_call(agent=invocation.agent, tool=invocation.agent_tool.name,
                                              call=invocation.call, client=invocation.client)


def _owner() -> dict[str, str]:
    """The signed-in user a held run is for (`gateway.auth`): its calls resume as that user, not as the approver."""
    subject = current_caller().subject
    return {"subject": subject} if subject is not None else {}


def run_subject(run: RunRecord) -> str | None:
    """The signed-in user a held run is for; None for a static key's."""
    subject = run.state.get("subject") if isinstance(run.state, dict) else None
    return subject if isinstance(subject, str) else None


def run_owner(run: RunRecord) -> dict[str, Any]:
    """`bind_caller` fields that resume `run` as the user it was held for: their subject (their own connections
    serve), and the resuming request's token only when it is that same user's (else none: an api that exchanges
    the user's token refuses the call rather than act as whoever approved it)."""
    subject = run.state.get("subject") if isinstance(run.state, dict) else None
    caller = current_caller()
    token = caller.token if subject is not None and caller.subject == subject else None
    return {"subject": subject, "token": token}
