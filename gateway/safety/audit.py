"""The audit log: one row per tool call and per chat, written to the `Store` before the answer leaves.

Who is calling (client, agent) travels in a context variable (`bind_caller`), set once per request
by the auth middleware and inherited by every task the request starts, so the executor wrapper
(`gateway.breaker.GuardedExecutor`) records tool calls from every door (chat, direct call, MCP)
without threading the caller through each signature. Arguments and error texts pass through the
`Redactor` first: no credential reaches a row. Rows older than `audit_retention_days` (default 30;
0 or null keeps them forever) are deleted by `prune` (checked on the write path, at most hourly).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from ..catalog import Tool
from ..errors import ConfigError
from ..messages import ToolResult
from ..store import AuditQuery, AuditRow, Store
from .redaction import Redactor

logger = logging.getLogger("gateway.audit")

DEFAULT_RETENTION_DAYS = 30.0
PRUNE_INTERVAL = 3600.0


@dataclass(slots=True, frozen=True)
class Caller:
    """Who a piece of work is done for."""

    client: str | None = None
    agent: str | None = None
    run_id: str | None = None
    approvals: Mapping[str, str] = field(default_factory=dict)
    """Catalog tool name -> approval id, for calls a human approved (set while resuming a run)."""
    started: float | None = None
    """`time.perf_counter()` when the request began (for a chat's latency)."""
    notes: dict[str, Any] | None = None
    """Per-request scratch the request's own middleware reads back (e.g. `retry_after` of a refused call)."""


_caller: ContextVar[Caller] = ContextVar("gateway_caller", default=Caller())  # noqa: B039 - frozen, never mutated


def current_caller() -> Caller:
    return _caller.get()


class bind_caller:  # noqa: N801 - used as a function: `with bind_caller(agent=...):`
    """Set fields of the current caller for the block (and every task started inside it).

    A plain context manager rather than `contextlib.contextmanager` + `dataclasses.replace`: it runs on every
    call of every door, and those two were most of its cost."""

    __slots__ = ("_fields", "_token")

    def __init__(self, **fields: Any) -> None:
        self._fields = fields

    def __enter__(self) -> Caller:
        current = _caller.get()
        values = {"client": current.client, "agent": current.agent, "run_id": current.run_id,
                  "approvals": current.approvals, "started": current.started, "notes": current.notes}
        values.update(self._fields)  # an unknown field name fails in Caller() below, like replace() did
        caller = Caller(**values)
        self._token = _caller.set(caller)
        return caller

    def __exit__(self, *exc: object) -> None:
        _caller.reset(self._token)


def retention_days(settings: Mapping[str, Any] | None) -> float | None:
    value = (settings or {}).get("audit_retention_days", DEFAULT_RETENTION_DAYS)
    if value is None or value == 0:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"agents.yaml: gateway.audit_retention_days must be a number of days, got {value!r}")
    return float(value)


class AuditLog:
    def __init__(self, store: Store, redactor: Redactor | None = None, *,
                 retention_days: float | None = DEFAULT_RETENTION_DAYS) -> None:
        """Record tool calls and chats.

        Parameters:
            store: where rows go (each write is committed before the method returns).
            redactor: scrubs secrets from arguments and error texts; None: a redactor that knows none.
            retention_days: rows older than this are pruned; None keeps every row.
        """
        self.store = store
        self.redactor = redactor or Redactor()
        self.retention_days = retention_days
        self._pruned_at = 0.0

    async def record_tool(self, tool: Tool | str, arguments: Any, result: ToolResult, *,
                          approval: str | None = None, agent: str | None = None) -> None:
        """One tool call (executed, refused, or waiting for approval)."""
        caller = current_caller()
        name = tool if isinstance(tool, str) else tool.name
        api = None if isinstance(tool, str) else tool.api
        status = "ok" if result.ok else (result.error_type or "error")
        await self._write(AuditRow(
            time=time.time(), kind="tool", client=caller.client, agent=agent or caller.agent, tool=name, api=api,
            arguments=self.redactor.value(arguments), status=status, http_status=result.status,
            latency_ms=result.duration_ms, bytes=result.bytes,
            approval=approval or result.approval_id or caller.approvals.get(name), run_id=caller.run_id,
            error=self.redactor.text(result.error) if result.error else None,
        ))

    async def record_chat(self, *, agent: str, status: str, latency_ms: float, usage: Mapping[str, Any] | None = None,
                          run_id: str | None = None, error: str | None = None, client: str | None = None) -> None:
        """One chat request (or resumed run): its outcome and the tokens it used."""
        caller = current_caller()
        await self._write(AuditRow(
            time=time.time(), kind="chat", client=client or caller.client, agent=agent, status=status,
            latency_ms=latency_ms, usage=dict(usage) if usage else None, run_id=run_id or caller.run_id,
            error=self.redactor.text(error) if error else None,
        ))

    async def _write(self, row: AuditRow) -> None:
        try:
            await self.store.add_audit(row)
        except Exception as exc:  # the audit must not turn a served call into an error; say so loudly instead
            logger.error("audit row lost (%s): %s %s/%s", type(exc).__name__, row.kind, row.agent, row.tool)
            return
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
        if self.retention_days is None:
            return 0
        cutoff = (now if now is not None else time.time()) - self.retention_days * 86400
        removed = await self.store.prune_audit(cutoff)
        if removed:
            logger.info("audit retention: removed %d rows older than %g days", removed, self.retention_days)
        return removed
