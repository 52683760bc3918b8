"""The audit log: one row per tool call and per chat, written to the `Store` before the answer leaves.

`RecordCall` is the call pipeline's audit stage, the outermost: every door's tool calls pass it, so each
gets exactly one row with its final verdict (refused, waiting for approval, rate limited, executed), also
when the caller is cancelled mid-call (a disconnecting client). Who is calling (client, agent) travels in
the `Invocation`; for chats, and for work started inside a request, in a context variable (`bind_caller`)
set once per request by the auth middleware and inherited by every task the request starts.

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
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..catalog import Tool
from ..config.settings import DEFAULT_RETENTION_DAYS
from ..errors import AuditUnavailable
from ..kernel.caller import current_caller
from ..kernel.redaction import Redactor
from ..messages import ToolResult
from ..store import AuditQuery, AuditRow, Store

if TYPE_CHECKING:
    from ..kernel.calls import Invocation, Proceed

__all__ = ["CANCELLED", "DEFAULT_RETENTION_DAYS", "AuditLog", "RecordCall"]

logger = logging.getLogger("gateway.audit")

PRUNE_INTERVAL = 3600.0
CANCELLED = "The caller went away; the call was cancelled (and will not be repeated)."


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
                          approval: str | None = None, agent: str | None = None, client: str | None = None) -> None:
        """One tool call (executed, refused, or waiting for approval); `AuditUnavailable` when it is not stored."""
        caller = current_caller()
        name = tool if isinstance(tool, str) else tool.name
        api = None if isinstance(tool, str) else tool.api
        status = "ok" if result.ok else (result.error_type or "error")
        await self._write(AuditRow(
            time=time.time(), kind="tool", client=client or caller.client, agent=agent or caller.agent, tool=name,
            api=api,
            arguments=self.redactor.value(arguments), status=status, http_status=result.status,
            latency_ms=result.duration_ms, bytes=result.bytes,
            approval=approval or result.approval_id or caller.approvals.get(name), run_id=caller.run_id,
            error=self.redactor.text(result.error) if result.error else None,
        ))

    async def record_chat(self, *, agent: str, status: str, latency_ms: float, usage: Mapping[str, Any] | None = None,
                          run_id: str | None = None, error: str | None = None, client: str | None = None) -> None:
        """One chat request (or resumed run): its outcome and the tokens it used; `AuditUnavailable` when it is not
        stored."""
        caller = current_caller()
        await self._write(AuditRow(
            time=time.time(), kind="chat", client=client or caller.client, agent=agent, status=status,
            latency_ms=latency_ms, usage=dict(usage) if usage else None, run_id=run_id or caller.run_id,
            error=self.redactor.text(error) if error else None,
        ))

    async def _write(self, row: AuditRow) -> None:
        try:
            await self.store.add_audit(row)
        except Exception as exc:
            # Fail closed: the README promises the row is written before the answer returns.
            logger.error("audit row not written (%s: %s): %s %s/%s", type(exc).__name__, exc, row.kind, row.agent,
                         row.tool)
            what = f"tool call {row.tool!r}" if row.kind == "tool" else "chat"
            ran = " It may have run upstream: check before repeating a write." if row.kind == "tool" else ""
            raise AuditUnavailable(f"The audit log cannot record this {what} ({type(exc).__name__}: {exc}), so "
                                   f"the gateway withholds its answer.{ran} The operator must fix the store "
                                   "(gateway.store).") from exc
        if row.time - self._pruned_at >= PRUNE_INTERVAL:
            # Retention runs on the write path (at most hourly) so it needs no background task of its own.
            self._pruned_at = row.time
            try:
                await self.prune(row.time)
            except Exception as exc:
                logger.warning("audit retention failed: %s", exc)

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


class RecordCall:
    """The pipeline's audit stage (the outermost): one row per call with its final verdict, or no answer."""

    def __init__(self, audit: AuditLog, redactor: Redactor | None = None) -> None:
        self.audit = audit
        self.redactor = redactor

    async def __call__(self, invocation: Invocation, proceed: Proceed) -> ToolResult:
        started = time.perf_counter()
        try:
            result = await proceed(invocation)
        except asyncio.CancelledError:
            # Not retried, only recorded: the request may have reached the api, so repeating it could double a write.
            cancelled = ToolResult.failure("transport_error", CANCELLED,
                                           duration_ms=(time.perf_counter() - started) * 1000)
            try:
                # Shielded: an anyio cancel scope (the MCP door) cancels every await of a cancelled task again.
                await asyncio.shield(self._record(invocation, cancelled))
            except AuditUnavailable:
                pass  # logged by the audit log; the caller is gone, nobody to answer
            raise
        # Not shielded (a shield is a task per call): a store takes the row before its first suspension and
        # writes it even if the caller is cancelled while it waits (`Store.add_audit`), so nothing is lost.
        await self._record(invocation, result)
        return result

    async def _record(self, invocation: Invocation, result: ToolResult) -> None:
        arguments = self.redactor.value(invocation.arguments) if self.redactor else invocation.arguments
        await self.audit.record_tool(invocation.tool, arguments, result, approval=invocation.approval,
                                     agent=invocation.agent, client=invocation.client)
