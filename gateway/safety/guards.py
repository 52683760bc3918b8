"""The safety layer without HTTP: the store and everything a tool call's pipeline needs from it.

`Safeguards` owns the store, the redactor of audited values, the audit log, the approval queue, the rate
limiter and the breakers, and hands the composition root (`gateway.assembly.build_pipeline`) its stages:
`audit_stages` (the outermost, and the last before sending) and `guard_stages` (approval -> rate limits -> breaker
and concurrency).
Every door that runs tool calls opens one: `gateway call` and `gateway chat` this one; `gateway mcp` a
`gateway.safety.serving.ServingSafeguards` (which adds users' own connections); `gateway serve` a
`gateway.server.supervision.Safety` (which adds the HTTP half: client keys, the resource server, routes and
middleware). Parts that depend on agents.yaml (limits, secrets to redact, breaker thresholds) follow hot reloads:
`sync` rebuilds them when the manifest object changes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

from ..config.model import AgentConfig, Manifest
from ..errors import StoreUnavailable
from ..kernel.caller import current_caller
from ..kernel.redaction import Redactor, redact_logs
from ..store import Store, open_store
from ..store.server_watch import caller_says_slow
from .approvals import ApprovalManager, HoldForApproval
from .audit import AuditLog, RecordBeforeSend, RecordCall
from .breaker import Breakers, GuardApi
from .budgets import BudgetBook
from .ratelimit import ChargeToolBucket, RateLimiter, RateLimits
from .shares import Kind, ShareBook

if TYPE_CHECKING:
    from ..errors import RunError
    from ..identity.connections import Connections
    from ..kernel.calls import Stage

logger = logging.getLogger("gateway.safety")

Failing = Literal["slow", "down", "failed"] | None
"""Why the stuck-runs sweep could not look for them (`Safeguards.sweep_once`); None: it could."""

SWEEP_SECONDS = 60.0
"""How often `sweep` looks for stuck runs (at most), and asks Redis (with `gateway.redis`) whether it answers."""


class Safeguards:
    def __init__(self, store: Store, manifest: Manifest, *, redact_log_records: bool = True) -> None:
        """The safety layer on `store` for the manifest (and its reloads).

        Parameters:
            store: approvals, audit rows and rate-limit buckets.
            manifest: the current agents.yaml (clients, `gateway:` settings, secrets).
            redact_log_records: also scrub the secrets from the process's log records.
        """
        self.store = store
        # One redactor for the audit rows, built before the secrets are known and taught them in `sync`: the
        # audit log keeps this very object (an empty redactor is falsy, so `redactor or Redactor()` lost it).
        self.redactor = Redactor()
        if redact_log_records:
            redact_logs(self.redactor)
        self.audit = AuditLog(store, self.redactor)
        self.approvals = ApprovalManager(store, self.audit)
        self.limiter = RateLimiter(store, RateLimits())
        self.guard_settings = manifest.gateway.guard
        self.breakers = Breakers(self.guard_settings)
        self._manifest: Manifest | None = None
        self.sync(manifest)

    @property
    def connections(self) -> Connections | None:
        """Users' own connections to `user_oauth` apis: None here (`gateway call` and `gateway chat` act for no
        signed-in user); a serving door's layer keeps them (`gateway.safety.serving`)."""
        return None

    @classmethod
    def open(cls, runtime: Any, *, store: str | None = None, **options: Any) -> Self:
        """Open the store named by `gateway.store` (relative to agents.yaml's folder) or by `store`."""
        base = Path(runtime.agents_path).parent if getattr(runtime, "agents_path", None) else None
        location = store or runtime.manifest.gateway.store_location(base)
        settings = runtime.manifest.gateway
        # gateway.redis: rate-limit buckets (and more) counted there
        return cls(open_store(location, redis=settings.redis, timeout=settings.shared_state_timeout),
                   runtime.manifest, **options)

    def sync(self, manifest: Manifest) -> None:
        """Rebuild what depends on agents.yaml, when it changed (cheap to call on every request)."""
        if manifest is self._manifest:
            return
        self.redactor.add(*manifest.secrets())
        settings = manifest.gateway  # typed once with the manifest (a bad value never loads)
        self.limiter = RateLimiter(self.store, settings.rate_limits)
        self.audit.retention_days = settings.audit_retention_days
        self.audit.conversation_days = settings.conversation_retention_days
        self.store.conversation_cap = settings.max_stored_conversations_per_client
        self.approvals.pending_cap = settings.max_pending_approvals_per_client
        self.guard_settings = self.breakers.settings = settings.guard
        self._manifest = manifest

    def audit_stages(self, redactor: Redactor | None = None) -> tuple[RecordCall, RecordBeforeSend]:
        """The outermost stage (one audit row per call, with its verdict) and the one just before the execution
        (the row written before the call is sent: a call it cannot record is not sent). `redactor`: the
        generation's (it knows tokens learned at run time too), applied to the arguments before the audit log's
        own."""
        record = RecordCall(self.audit, redactor)
        return record, record.before_send()

    def guard_stages(self, manifest: Manifest) -> list[Stage]:
        """Approval -> rate limits -> breaker and concurrency, for a generation built on `manifest`."""
        self.sync(manifest)
        guard: Stage = GuardApi(manifest, self.breakers, self.guard_settings)
        counters = getattr(self.store, "counters", None)  # gateway.redis: a CountedStore's Redis
        if counters is not None:
            from .shared_breaker import SharedGuardApi  # imports the Redis client: only when Redis is configured

            guard = SharedGuardApi(manifest, counters.guards, self.guard_settings)
        # The limiter is this manifest's (`sync`): without tool limits the rate-limit stage would charge nothing.
        charge: list[Stage] = [ChargeToolBucket(self.limiter)] if self.limiter.limits_tools else []
        return [HoldForApproval(self.approvals), *charge, guard]

    # -- what the chat door reports ------------------------------------------------------------------
    async def on_run_result(self, *, run_id: str, agent: AgentConfig, client: str | None, result: Any) -> None:
        """After each chat run: keep a paused run's approvals, say in the answer's text what waits, and record
        the chat with its usage."""
        await self.approvals.hold_run(run_id=run_id, agent=agent.name, client=client, result=result)
        describe_pause(result, self.redactor.value)
        await self._record_chat(agent.name, result, run_id=run_id)

    async def on_run_error(self, *, run_id: str, agent: AgentConfig, error: Any) -> None:
        """A streamed chat run that failed after its answer began (an error chunk, under status 200)."""
        caller = current_caller()
        latency = (time.perf_counter() - caller.started) * 1000 if caller.started is not None else 0.0
        await self.audit.record_chat(agent=agent.name, status="error", run_id=run_id, latency_ms=latency,
                                     error=f"HTTP {error.status} in the stream: {error.code or error.type}")

    async def _record_chat(self, agent: str, result: Any, *, run_id: str, started: float | None = None,
                           ended: RunError | None = None) -> None:
        """The chat's row: how its run ended, with the tokens it used; `ended`: the error that ended it after the
        loop returned (a pause its client's cap could not keep), status `error` with the reason."""
        caller = current_caller()
        begun = started if started is not None else caller.started
        budget = getattr(result, "budget_exceeded", None)
        status = "error" if ended is not None else "paused" if getattr(result, "pending_approvals", None) \
            else "budget_exceeded" if budget else "cut" if getattr(result, "cut", False) else "ok"
        usage: Any = getattr(result, "usage", None)
        await self.audit.record_chat(
            agent=agent, status=status, run_id=run_id, usage=usage.to_dict() if usage is not None else None,
            latency_ms=(time.perf_counter() - begun) * 1000 if begun is not None else 0.0,
            error=f"{ended.code}: {ended}" if ended is not None else budget,
        )

    def budget_book(self) -> BudgetBook:
        """Where model calls are reserved against the agents' and clients' budgets: Redis with `gateway.redis`
        (every instance and worker shares the windows), else this process."""
        counters = getattr(self.store, "counters", None)
        if counters is None:
            return BudgetBook()
        from .shared_budgets import SharedBudgetBook  # imports the Redis client: only when Redis is configured

        return SharedBudgetBook(counters.client, counters.url)

    def shared(self, kind: Kind) -> ShareBook | None:
        """Where each client's places of `kind` are counted across every instance and worker
        (`gateway.max_runs_per_client`, `gateway.max_code_workers_per_client`): Redis with `gateway.redis`; None
        without it (each process counts its own)."""
        counters = getattr(self.store, "counters", None)
        if counters is None:
            return None
        from .shared_shares import SharedShares  # imports the Redis client: only when Redis is configured

        # The process's one renewer (every kind, apis' slots too): one renewal a period for all the places held here.
        return SharedShares(counters.client, counters.url, kind, counters.keeper)

    # -- runs left between a decision and its end --------------------------------------------------
    def resume_grace(self) -> float:
        """Seconds after which a run still `resuming` cannot be resumed by anyone alive: twice the longest
        timeout of the manifest (a run's, a call's, a hook's), plus a margin."""
        manifest = self._manifest
        if manifest is None:
            return 600.0
        longest = [1.0]
        for agent in manifest.agents.values():
            longest += [agent.policy.timeout, agent.policy.tool_timeout or 0.0]
            longest += [hook.timeout for hook in agent.hooks]
            longest += [manifest.api(selection.api).timeout for selection in agent.tools]
            longest += [o.timeout or 0.0 for selection in agent.tools for o in selection.overrides.values()]
        longest += [api.timeout for api in manifest.apis.values()]
        longest += [hook.timeout for hook in manifest.hooks]
        return 2 * max(longest) + 5.0

    async def recover_runs(self) -> dict[str, list[str]]:
        """Reopen or fail the runs stuck past `resume_grace` (`ApprovalManager.recover`)."""
        return await self.approvals.recover(time.time() - self.resume_grace())

    async def sweep(self) -> None:
        """Recover stuck runs now (at start-up) and then every so often, until cancelled (`gateway serve`)."""
        failing: Failing = None
        while True:
            failing = await self.sweep_once(failing)
            await asyncio.sleep(min(SWEEP_SECONDS, max(1.0, self.resume_grace() / 4)))

    async def sweep_once(self, failing: Failing = None) -> Failing:
        """One round of `sweep`: stuck runs recovered, and Redis (with `gateway.redis`) asked one PING, either server
        asked a few questions more while one times out (`Store.check`), so that an idle instance's log also says when a
        shared server goes and when it is back (the store's and Redis's watches say it, `gateway.store.server_watch`;
        before, nothing until a request came). Why the stuck runs could not be looked for (None: they were), which
        `failing`, the last round's, said already: one line a spell, not one a round.

        `slow`: the store answers (`check` found it so), but not the sweep's question within its wait (another
        session's lock on the runs table, a long transaction): said here, in the sweep's own words, and not by the
        store's watch, whose slow line would come again every round (each answer of `check` ends its spell).
        `down`: the store answers nothing (or refuses connections): its watch's lines say when it goes and when it
        is back, and the sweep adds none. `failed`: anything else (a SQLite store's error), said here."""
        try:
            with caller_says_slow():
                await self.recover_runs()
        except Exception as exc:  # noqa: BLE001 - the store may be down or slow: the next round tries again
            error: Exception | None = exc
        else:
            error = None
        try:
            await self.store.check()  # Redis's PING; either server asked again while slow and gone are undecided
        except Exception:  # noqa: BLE001 - StoreUnavailable: the server's watch said it, once an outage
            pass
        why = None if error is None else self._why_not_swept(error)
        if why == failing:
            return why
        if why == "slow":
            logger.warning("could not look for stuck runs: the store answers, but not this question within %g s "
                           "(slow, not down: another session's lock on its runs table or a long transaction holds "
                           "it; said once: a line will say when it can again)", self.store.timeout)
        elif why == "failed":
            logger.warning("could not look for stuck runs: %s (said once: a line will say when it can again)", error)
        elif why is None and failing != "down":
            logger.info("looks for stuck runs again")
        return why

    def _why_not_swept(self, error: Exception) -> Failing:
        watch = self.store.watch
        if not isinstance(error, StoreUnavailable) or watch is None:
            return "failed"
        return "down" if watch.down is not None else "slow"

    async def aclose(self) -> None:
        await self.store.aclose()


def describe_pause(result: Any, redact: Callable[[Any], Any] = lambda value: value) -> None:
    """A paused run's answer says in plain words what waits for whom (the loop leaves its text empty)."""
    pending = getattr(result, "pending_approvals", None)
    message = getattr(result, "message", None)
    if not pending or message is None or message.content:
        return
    said = next((m.content for m in reversed(getattr(result, "messages", []) or [])
                 if m.role == "assistant" and m.content), "")
    lines = [f"- {p.tool} {json.dumps(redact(p.arguments), ensure_ascii=False)} (approval {p.id})" for p in pending]
    note = ("Waiting for a human's approval before running:\n" + "\n".join(lines) +
            "\nAn approver approves or denies each with POST /approvals/{id} (or `gateway approvals approve|deny ID`); "
            "the run then continues, and GET /approvals/{id} has its answer.")
    message.content = f"{said}\n\n{note}" if said else note
