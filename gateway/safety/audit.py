"""The audit log: one row per tool call and per chat, written to the `Store` before the answer leaves.

`RecordCall` is the call pipeline's audit stage, the outermost: every door's tool calls pass it, so each
gets exactly one row with its final verdict (refused, waiting for approval, rate limited, executed), also
when the caller is cancelled mid-call (a disconnecting client). Who is calling (client, agent) travels in
the `Invocation`; for chats, and for work started inside a request, in a context variable (`bind_caller`)
set once per request by the auth middleware and inherited by every task the request starts.

A call is recorded before it is sent: `RecordBeforeSend`, the stage just before the execution, writes its row
(status `running`), and `RecordCall` writes the outcome onto that row afterwards (one insert and one update per
call that is sent; a call refused before it is one insert). A call whose row cannot be written is not sent; a
row left `running` says the call was sent and its outcome never recorded (the store failed meanwhile, or the
process died). `watch_sends` tells a block of work whether any call of it was sent (an approval's resume uses it
to know whether a decision was carried out).

The audit fails closed: a row the store cannot take (a full disk, a read-only file) raises
`AuditUnavailable`, and the door answers 503 instead of an unrecorded success. Arguments and error texts
pass through the `Redactor` first: no credential reaches a row. Rows older than `audit_retention_days`
(default 30; 0 or null keeps them forever) are deleted by `prune` (checked on the write path, at most hourly), and
with them what conversations were kept to go on from, older than `conversation_retention_days` (stored Responses
answers, handed-back turns, finished approval runs; default 30): the same hourly sweep, so neither needs a task.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, TypeVar

from ..catalog import Tool
from ..config.settings import DEFAULT_RETENTION_DAYS
from ..errors import AuditUnavailable
from ..kernel.caller import current_caller
from ..kernel.redaction import Redactor
from ..messages import ToolResult
from ..store import AUDIT_RUNNING, AuditQuery, AuditRow, Store

if TYPE_CHECKING:
    from ..kernel.calls import HostedCall, Invocation

    A = TypeVar("A", Invocation, HostedCall)
    """An api call, or a call the gateway answers itself (a delegation, a script): both take the same way through
    the audit."""

__all__ = ["CANCELLED", "CANCELLED_UNSENT", "DEFAULT_RETENTION_DAYS", "AuditLog", "RecordBeforeSend", "RecordCall",
           "Sends", "watch_sends"]

logger = logging.getLogger("gateway.audit")

PRUNE_INTERVAL = 3600.0
CANCELLED = ("The call was cancelled after it was sent (its caller went away, or the gateway instance stopped and "
             "cut it): it may have run upstream, and it will not be repeated.")
CANCELLED_UNSENT = ("The call was cancelled before it was sent (its caller went away, or the gateway instance stopped "
                    "and cut it): nothing ran upstream.")


class Sends:
    """How many calls of a block of work were sent (`watch_sends`); the block's context manager itself (a class
    rather than a generator: the MCP door enters one per request, and a generator's context manager costs it
    several times the steps). A block inside another's counts for both (an approval's resume, which counts its own
    to know whether to take the decision back, inside the door's, which tells a caller cut by a stop)."""

    __slots__ = ("count", "outer", "_token")

    def __init__(self) -> None:
        self.count = 0
        self.outer: Sends | None = None
        self._token: Token[Sends | None] | None = None

    def __enter__(self) -> Sends:
        self.outer = _sends.get()
        self._token = _sends.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _sends.reset(self._token)
            self._token = None


_sends: ContextVar[Sends | None] = ContextVar("gateway_sends", default=None)


def watch_sends() -> Sends:
    """Count the calls sent inside the block (`with watch_sends() as sends:`, and every task it starts):
    `RecordBeforeSend` counts each call whose row it wrote, so a count of 0 means nothing of the block reached an
    api."""
    return Sends()


class AuditLog:
    def __init__(self, store: Store, redactor: Redactor | None = None, *,
                 retention_days: float | None = DEFAULT_RETENTION_DAYS,
                 conversation_days: float | None = DEFAULT_RETENTION_DAYS) -> None:
        """Record tool calls and chats.

        Parameters:
            store: where rows go (each write is committed before the method returns).
            redactor: scrubs secrets from arguments and error texts; None: a redactor that knows none (yet: a
                redactor is falsy until it learns a secret, so it is kept as given, never swapped for a new one).
            retention_days: rows older than this are pruned; None keeps every row.
            conversation_days: stored conversations older than this are pruned (`Store.prune_conversations`);
                None keeps them.
        """
        self.store = store
        self.redactor = redactor if redactor is not None else Redactor()
        self.retention_days = retention_days
        self.conversation_days = conversation_days
        self._pruned_at = 0.0

    async def record_tool(self, tool: Tool | str, arguments: Any, result: ToolResult, *,
                          approval: str | None = None, agent: str | None = None, client: str | None = None,
                          redacted_by: Redactor | None = None) -> None:
        """One tool call that was not sent (refused, or waiting for approval) or whose row `open_tool` did not
        write; `AuditUnavailable` when it is not stored.

        `redacted_by`: the redactor `arguments` went through already; when it knows every secret this log's
        redactor knows, the arguments are not searched a second time (also for `running_row`)."""
        row = self._tool_row(tool, arguments, approval=approval or result.approval_id, agent=agent, client=client,
                             redacted_by=redacted_by)
        self._settle(row, result)
        await self._write(row)

    def running_row(self, tool: Tool | str, arguments: Any, *, approval: str | None = None, agent: str | None = None,
                    client: str | None = None, redacted_by: Redactor | None = None) -> AuditRow:
        """The row of a call about to be sent (status `running`), for `open_tool`."""
        return self._tool_row(tool, arguments, approval=approval, agent=agent, client=client, redacted_by=redacted_by,
                              status=AUDIT_RUNNING)

    def open_tool(self, row: AuditRow) -> Awaitable[None]:
        """Write the row of a call about to be sent (to be awaited); `AuditUnavailable` when it is not written, and
        then the call must not be sent."""
        return self._write(row, sending=True)  # the write's coroutine: no frame of this method's while it runs

    def close_tool(self, row: AuditRow, result: ToolResult) -> Awaitable[None]:
        """The outcome of a call `open_tool` recorded, on its row (to be awaited); `AuditUnavailable` when it is
        not stored (the row stays `running`: the call was sent, its outcome is unknown to the log)."""
        self._settle(row, result)
        return self._write(row, update=True)

    def _tool_row(self, tool: Tool | str, arguments: Any, *, approval: str | None, agent: str | None,
                  client: str | None, redacted_by: Redactor | None = None, status: str = "ok") -> AuditRow:
        caller = current_caller()
        # The pipeline's stages share the log's redactor: the same one covers itself, without comparing their secrets.
        if redacted_by is None or (redacted_by is not self.redactor and not redacted_by.covers(self.redactor)):
            arguments = self.redactor.value(arguments)
        name = tool if isinstance(tool, str) else tool.name
        return AuditRow(
            time=time.time(), kind="tool", client=client or caller.client, agent=agent or caller.agent, tool=name,
            api=None if isinstance(tool, str) else tool.api, arguments=arguments,
            approval=approval or caller.approvals.get(name), run_id=caller.run_id, subject=caller.subject,
            status=status,
        )

    def _settle(self, row: AuditRow, result: ToolResult) -> None:
        row.status = "ok" if result.ok else (result.error_type or "error")
        row.http_status = result.status
        row.latency_ms = result.duration_ms
        row.bytes = result.bytes
        row.approval = row.approval or result.approval_id
        if result.error:
            row.error = self.redactor.text(result.error)
        elif result.warning:
            row.error = _warning(result, self.redactor)
        else:
            row.error = None

    async def record_chat(self, *, agent: str, status: str, latency_ms: float, usage: Mapping[str, Any] | None = None,
                          run_id: str | None = None, error: str | None = None, client: str | None = None) -> None:
        """One chat request (or resumed run): its outcome and the tokens it used; `AuditUnavailable` when it is not
        stored."""
        caller = current_caller()
        await self._write(AuditRow(
            time=time.time(), kind="chat", client=client or caller.client, agent=agent, status=status,
            latency_ms=latency_ms, usage=dict(usage) if usage else None, run_id=run_id or caller.run_id,
            error=self.redactor.text(error) if error else None, subject=caller.subject,
        ))

    def open_now(self, row: AuditRow) -> bool:
        """Write the row of a call about to be sent at once, when the store can without waiting (`Store.add_audit_now`)
        and no retention sweep is due: True once written; False: nothing was written, `open_tool` (awaited) writes
        it. `AuditUnavailable` when it cannot be written, and then the call must not be sent."""
        if row.time - self._pruned_at >= PRUNE_INTERVAL:
            return False  # `open_tool` writes it and sweeps
        try:
            return self.store.add_audit_now(row)
        except Exception as exc:
            raise self._unavailable(exc, row, sending=True) from exc

    def close_now(self, row: AuditRow, result: ToolResult) -> bool:
        """The outcome of a call `open_tool` or `open_now` recorded, written at once when the store can without
        waiting (`Store.update_audit_now`): True once written; False: `close_tool` (awaited) writes it.
        `AuditUnavailable` as `close_tool`."""
        self._settle(row, result)
        try:
            return self.store.update_audit_now(row)
        except Exception as exc:
            raise self._unavailable(exc, row, update=True) from exc

    async def _write(self, row: AuditRow, *, sending: bool = False, update: bool = False) -> None:
        try:
            if update:
                await self.store.update_audit(row)
            else:
                await self.store.add_audit(row)
        except Exception as exc:
            raise self._unavailable(exc, row, sending=sending, update=update) from exc
        if not update and row.time - self._pruned_at >= PRUNE_INTERVAL:  # an update's time was its insert's
            # Retention runs on the write path (at most hourly) so it needs no background task of its own.
            self._pruned_at = row.time
            try:
                await self.prune(row.time)
            except Exception as exc:
                logger.warning("audit retention failed: %s", exc)

    @staticmethod
    def _unavailable(exc: Exception, row: AuditRow, *, sending: bool = False,
                     update: bool = False) -> AuditUnavailable:
        """A row the store did not take, logged, as the error the door answers 503 for."""
        # Fail closed: the README promises the row is written before the answer returns.
        logger.error("audit row not written (%s: %s): %s %s/%s", type(exc).__name__, exc, row.kind, row.agent,
                     row.tool)
        what = {"tool": f"tool call {row.tool!r}", "decision": f"decision on approval {row.approval}"}.get(
            row.kind, "chat")
        if sending:
            done = "so the gateway did not send it: nothing ran upstream."
        elif update:
            done = ("so the gateway withholds its answer. The call was sent and may have run upstream: check "
                    "before repeating a write (its audit row says `running`).")
        else:
            done = "so the gateway withholds its answer."
        return AuditUnavailable(f"The audit log cannot record this {what} ({type(exc).__name__}: {exc}), "
                                f"{done} The operator must fix the store (gateway.store).")

    async def recent(self, limit: int = 100, agents: set[str] | None = None,
                     query: AuditQuery | None = None) -> list[dict[str, Any]]:
        """The newest rows first, as JSON-ready dicts; `agents` restricts to what a client may see, `query`
        filters further (agent, client, tool, status, time range)."""
        return [row.to_dict() for row in await self.store.list_audit(limit=limit, agents=agents, query=query)]

    async def record_decision(self, *, approval: str, agent: str, tool: str, approve: bool, by: str | None,
                              arguments: Any = None, reason: str | None = None, run_id: str | None = None) -> None:
        """A human's decision on an approval: `client` is who decided (not who asked), status approved|denied."""
        await self._write(AuditRow(
            time=time.time(), kind="decision", client=by, agent=agent, tool=tool,
            arguments=self.redactor.value(arguments) if arguments is not None else None,
            status="approved" if approve else "denied", approval=approval, run_id=run_id or current_caller().run_id,
            error=self.redactor.text(reason) if reason else None,
        ))

    async def record_reopen(self, *, approval: str, run_id: str, agent: str, tool: str, reason: str) -> None:
        """A decision taken back because nothing of it could be carried out: the approval is pending again."""
        await self._write(AuditRow(time=time.time(), kind="decision", status="reopened", agent=agent, tool=tool,
                                   approval=approval, run_id=run_id,
                                   error=self.redactor.text(reason) if reason else None))

    async def prune(self, now: float | None = None) -> int:
        """Delete audit rows and stored conversations past their retention; the number of audit rows deleted."""
        now = now if now is not None else time.time()
        if self.conversation_days is not None:
            gone = await self.store.prune_conversations(now - self.conversation_days * 86400)
            if gone:
                logger.info("conversation retention: removed %d stored conversations or runs older than %g days",
                            gone, self.conversation_days)
        if self.retention_days is None:
            return 0
        removed = await self.store.prune_audit(now - self.retention_days * 86400)
        if removed:
            logger.info("audit retention: removed %d rows older than %g days", removed, self.retention_days)
        return removed


def _warning(result: ToolResult, redactor: Redactor) -> str | None:
    """A success's warning, in the row's `error` text (its status stays `ok`: the call succeeded)."""
    return f"warning: {redactor.text(result.warning)}" if result.warning else None


class RecordCall:
    """The pipeline's audit stage (the outermost): one row per call with its final verdict, or no answer.

    A call that was sent has its row already (`RecordBeforeSend`): the verdict is written onto it. A call that
    was not (refused, held, limited) gets its row here. A delegation or a script (`HostedCall`: an agent offered
    as a tool, `run_code`) takes the same two stages (`Pipeline.hosted`): its row is written before the sub-agent
    or the script starts, and the calls they make get rows of their own."""

    def __init__(self, audit: AuditLog, redactor: Redactor | None = None) -> None:
        self.audit = audit
        self.redactor = redactor

    def before_send(self) -> RecordBeforeSend:
        """The stage that writes the row of a call about to be sent (the last before the execution)."""
        return RecordBeforeSend(self)

    def before_run(self) -> RecordBeforeSend:
        """The stage that writes the row of a hosted call about to start (a delegation's sub-agent, a script): as
        `before_send`, but not counted as a send (`watch_sends`): it sends nothing itself, the calls it makes count."""
        return RecordBeforeSend(self, counts=False)

    async def __call__(self, invocation: A, proceed: Callable[[A], Awaitable[ToolResult]]) -> ToolResult:
        started = time.perf_counter()
        try:
            result = await proceed(invocation)
        except asyncio.CancelledError:
            # Not retried, only recorded: the request may have reached the api, so repeating it could double a write.
            cancelled = ToolResult.failure("transport_error",
                                           CANCELLED if invocation.record is not None else CANCELLED_UNSENT,
                                           duration_ms=(time.perf_counter() - started) * 1000)
            try:
                # Shielded: an anyio cancel scope (the MCP door) cancels every await of a cancelled task again.
                await asyncio.shield(self._record(invocation, cancelled))
            except AuditUnavailable:
                pass  # logged by the audit log; the caller is gone, nobody to answer
            raise
        except AuditUnavailable:
            raise  # the row before sending (then nothing was sent) or one of a stage's own: nothing to add
        except Exception as exc:
            if invocation.record is not None:  # sent: its row must not stay `running` for a failure after it
                failed = ToolResult.failure(
                    "transport_error", f"The gateway failed after sending the call ({type(exc).__name__}: {exc}); "
                    "it may have run upstream.", duration_ms=(time.perf_counter() - started) * 1000)
                try:
                    await self._record(invocation, failed)
                except AuditUnavailable:
                    pass  # logged; the stage's own error is what the caller hears
            raise
        # At once when the store can (no await); else not shielded (a shield is a task per call): a store takes
        # the row before its first suspension and writes it even if the caller is cancelled while it waits
        # (`Store.add_audit`), so nothing is lost.
        row = invocation.record
        if row is None or not self.audit.close_now(row, result):
            await self._record(invocation, result)
        return result

    def _record(self, invocation: Invocation | HostedCall, result: ToolResult) -> Awaitable[None]:
        """The write of the call's verdict, to be awaited (or shielded)."""
        row = invocation.record
        if row is not None:
            return self.audit.close_tool(row, result)
        return self.audit.record_tool(invocation.tool, self._arguments(invocation), result,
                                     approval=invocation.approval, agent=invocation.agent, client=invocation.client,
                                     redacted_by=self.redactor)

    def _arguments(self, invocation: Invocation | HostedCall) -> Any:
        call = invocation.call
        # A call whose arguments could not be read (`Pipeline.refused`): the text as it came, in their place.
        given = call.unread_text() if call.parse_error is not None else invocation.arguments
        return self.redactor.value(given) if self.redactor is not None else given


class RecordBeforeSend:
    """The stage just before the execution: the call's row is written (status `running`) or the call is not sent
    (`AuditUnavailable`). `RecordCall` writes the outcome onto the same row."""

    def __init__(self, record: RecordCall, *, counts: bool = True) -> None:
        """Parameters: counts: count each call whose row it wrote as sent (`watch_sends`)."""
        self.record = record
        self.counts = counts

    def __call__(self, invocation: A, proceed: Callable[[A], Awaitable[ToolResult]]) -> Awaitable[ToolResult]:
        # A plain function when the row is written at once: it hands back `proceed`'s awaitable, so no frame of this
        # stage's waits (and is resumed) through the send; a row that must be awaited goes through `_write_then_send`.
        record = self.record
        redactor = record.redactor
        # `is not None`, not truth: an empty redactor hands the value back as it is, and asking its truth is a call.
        # Arguments the validation searched already, under the redactor's current epoch, are not searched again.
        arguments = invocation.arguments
        if redactor is not None and (invocation.vetted is not arguments
                                     or invocation.vetted_under is not redactor.epoch):
            arguments = redactor.value(arguments)
        audit = record.audit
        row = audit.running_row(invocation.tool, arguments, approval=invocation.approval, agent=invocation.agent,
                                client=invocation.client, redacted_by=redactor)
        # Set first: a caller cancelled while the row waits to be written has its outcome written after it.
        invocation.record = row
        try:
            written = audit.open_now(row)
        except AuditUnavailable:
            invocation.record = None  # no row, and nothing sent
            raise
        if not written:
            return self._write_then_send(invocation, proceed, row)
        if self.counts:
            invocation.sent = True
            _count_send()
        return proceed(invocation)

    async def _write_then_send(self, invocation: A, proceed: Callable[[A], Awaitable[ToolResult]],
                               row: AuditRow) -> ToolResult:
        try:
            await self.record.audit.open_tool(row)
        except AuditUnavailable:
            invocation.record = None  # no row, and nothing sent
            raise
        if self.counts:
            invocation.sent = True
            _count_send()
        return await proceed(invocation)


def _count_send() -> None:
    sends = _sends.get()
    while sends is not None:
        sends.count += 1
        sends = sends.outer
