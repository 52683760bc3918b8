"""A process-local store: the same interface as SQLite, nothing on disk (tests, `store: memory`)."""

from __future__ import annotations

import copy
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .base import (
    FINISHED,
    ApprovalRecord,
    ApprovalStatus,
    AuditQuery,
    AuditRow,
    Bucket,
    ConnectionRecord,
    PendingConnection,
    ResponseRecord,
    RunRecord,
    RunStatus,
    Store,
    refill_bucket,
    wait_for,
)


class MemoryStore(Store):
    def __init__(self) -> None:
        self._runs: dict[str, RunRecord] = {}
        self._approvals: dict[str, ApprovalRecord] = {}
        self._audit: list[AuditRow] = []
        self._buckets: dict[str, tuple[float, float]] = {}
        self._responses: dict[str, ResponseRecord] = {}
        self._connections: dict[tuple[str, str], ConnectionRecord] = {}
        self._pending: dict[str, PendingConnection] = {}
        self._next_id = 0
        self._ended_sessions: dict[str, float] = {}
        # No awaits happen inside the methods below, so each one is atomic on the event loop.

    async def save_run(self, run: RunRecord, approvals: list[ApprovalRecord], *,
                       pending_cap: int | None = None) -> bool:
        if any(a.id in self._approvals for a in approvals):
            raise ValueError("approval id already exists")
        if pending_cap is not None and self._held_by(run.client) + len(approvals) > pending_cap:
            return False
        self._runs[run.id] = replace(run, state=copy.deepcopy(run.state), updated=time.time())
        for approval in approvals:
            self._approvals[approval.id] = copy.deepcopy(approval)
        return True

    def _held_by(self, client: str | None) -> int:
        return sum(a.status == "pending" and a.client == client for a in self._approvals.values())

    async def pending_count(self, client: str | None) -> int:
        return self._held_by(client)

    async def get_run(self, run_id: str) -> RunRecord | None:
        run = self._runs.get(run_id)
        return copy.deepcopy(run) if run else None

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        approval = self._approvals.get(approval_id)
        return copy.deepcopy(approval) if approval else None

    async def list_approvals(
        self, *, status: ApprovalStatus | None = "pending", run_id: str | None = None, client: str | None = None,
        limit: int = 100, fair: bool = False,
    ) -> list[ApprovalRecord]:
        found = [
            a for a in sorted(self._approvals.values(), key=lambda a: (a.created, a.id))
            if (status is None or a.status == status) and (run_id is None or a.run_id == run_id)
            and (client is None or a.client == client)
        ]
        if fair:
            earlier: Counter[str | None] = Counter()
            turn: dict[str, int] = {}
            for approval in found:
                turn[approval.id] = earlier[approval.client]
                earlier[approval.client] += 1
            found.sort(key=lambda a: turn[a.id])  # stable: oldest first within a turn
        return [copy.deepcopy(a) for a in found[:limit]]

    async def decide_approval(
        self, approval_id: str, *, approve: bool, arguments: dict[str, Any] | None = None, reason: str | None = None,
        by: str | None = None,
    ) -> ApprovalRecord | None:
        approval = self._approvals.get(approval_id)
        if approval is None or approval.status != "pending":
            return None
        approval.status = "approved" if approve else "denied"
        approval.decided = time.time()
        approval.reason = reason
        approval.decided_arguments = copy.deepcopy(arguments)
        approval.decided_by = by
        return copy.deepcopy(approval)

    async def claim_run(self, run_id: str) -> RunRecord | None:
        run = self._runs.get(run_id)
        if run is None or run.status != "paused":
            return None
        if any(a.run_id == run_id and a.status == "pending" for a in self._approvals.values()):
            return None
        run.status = "resuming"
        run.updated = time.time()
        return copy.deepcopy(run)

    async def finish_run(self, run_id: str, status: RunStatus) -> None:
        if run_id in self._runs:
            self._runs[run_id].status = status
            self._runs[run_id].updated = time.time()

    async def reopen_run(self, run_id: str, approval_ids: Sequence[str], *, status: RunStatus) -> bool:
        run = self._runs.get(run_id)
        if run is None or run.status != status:
            return False
        for approval_id in approval_ids:
            approval = self._approvals.get(approval_id)
            if approval is not None and approval.run_id == run_id and approval.status != "pending":
                approval.status = "pending"
                approval.decided = approval.reason = approval.decided_arguments = approval.decided_by = None
        run.status = "paused"
        run.updated = time.time()
        return True

    async def stuck_runs(self, before: float) -> list[RunRecord]:
        stuck = []
        for run in self._runs.values():
            mine = [a for a in self._approvals.values() if a.run_id == run.id]
            if run.status == "resuming" and run.updated < before:
                stuck.append(copy.deepcopy(run))
            elif run.status == "paused" and mine and all(a.status != "pending" for a in mine) \
                    and max(a.decided or 0.0 for a in mine) < before:
                stuck.append(copy.deepcopy(run))
        return stuck

    async def add_audit(self, row: AuditRow) -> None:
        row.id = self._next_id = self._next_id + 1
        self._audit.append(copy.deepcopy(row))

    async def update_audit(self, row: AuditRow) -> None:
        for index in range(len(self._audit) - 1, -1, -1):  # the newest first: an outcome follows its row soon
            if self._audit[index].id == row.id:
                self._audit[index] = copy.deepcopy(row)
                return

    async def list_audit(self, *, limit: int = 100, agents: set[str] | None = None,
                         query: AuditQuery | None = None) -> list[AuditRow]:
        query = (query or AuditQuery()).within(agents)
        rows = [r for r in reversed(self._audit) if query.matches(r)]
        return copy.deepcopy(rows[:limit])

    async def prune_audit(self, before: float) -> int:
        kept = [r for r in self._audit if r.time >= before]
        removed = len(self._audit) - len(kept)
        self._audit = kept
        return removed

    async def save_response(self, record: ResponseRecord, *, keep: int | None = None) -> list[str]:
        self._responses[record.id] = copy.deepcopy(record)
        if keep is None:
            return []
        own = sorted((r for r in self._responses.values() if r.client == record.client),
                     key=lambda r: (r.created, r.id), reverse=True)
        old = [r.id for r in own[keep:]][::-1]
        for key in old:
            del self._responses[key]
        return old

    async def get_response(self, response_id: str) -> ResponseRecord | None:
        record = self._responses.get(response_id)
        return copy.deepcopy(record) if record is not None else None

    async def get_responses(self, response_ids: Sequence[str]) -> dict[str, ResponseRecord]:
        return {i: copy.deepcopy(self._responses[i]) for i in response_ids if i in self._responses}

    async def prune_conversations(self, before: float) -> int:
        old = [key for key, record in self._responses.items() if record.created < before]
        finished = [key for key, run in self._runs.items() if run.status in FINISHED and run.updated < before]
        for key in old:
            del self._responses[key]
        for key in finished:
            del self._runs[key]
        gone = set(finished)
        approvals = [key for key, approval in self._approvals.items() if approval.run_id in gone]
        for key in approvals:
            del self._approvals[key]
        return len(old) + len(finished)

    async def end_session(self, session: str, until: float) -> None:
        now = time.time()
        self._ended_sessions = {k: v for k, v in self._ended_sessions.items() if v >= now}
        self._ended_sessions[session] = until

    async def session_ended(self, session: str) -> bool:
        return session in self._ended_sessions

    async def take_tokens(self, buckets: Sequence[Bucket], cost: float = 1.0) -> float:
        now = time.time()
        levels = [refill_bucket(*self._buckets[b.key], now, b) if b.key in self._buckets else b.burst for b in buckets]
        retry_after = max((wait_for(t, b, cost) for t, b in zip(levels, buckets, strict=True)), default=0.0)
        if retry_after == 0.0:
            for tokens, bucket in zip(levels, buckets, strict=True):
                self._buckets[bucket.key] = (tokens - cost, now)
        return retry_after

    async def save_connection(self, record: ConnectionRecord) -> None:
        self._connections[(record.subject, record.api)] = replace(record)

    async def get_connection(self, subject: str, api: str) -> ConnectionRecord | None:
        found = self._connections.get((subject, api))
        return replace(found) if found is not None else None

    async def list_connections(self, subject: str) -> list[ConnectionRecord]:
        return sorted((replace(r) for (who, _), r in self._connections.items() if who == subject), key=lambda r: r.api)

    async def delete_connection(self, subject: str, api: str) -> bool:
        return self._connections.pop((subject, api), None) is not None

    async def add_pending_connection(self, pending: PendingConnection) -> None:
        self._pending[pending.state] = replace(pending)

    async def take_pending_connection(self, state: str, now: float) -> PendingConnection | None:
        for key in [k for k, p in self._pending.items() if p.expires <= now]:
            del self._pending[key]
        return self._pending.pop(state, None)
