"""Fault isolation per api: a circuit breaker and a concurrency limit around the executor.

`GuardedExecutor` has the executor's `execute` signature, so callers don't change. For each call it:
charges the tool's rate-limit bucket; refuses at once while the api's breaker is open (after
`failures` consecutive failures it stays open `reset_after` seconds, then lets one probe through:
success closes it, failure opens it again); waits for one of the api's `max_concurrency` slots (at
most the call's timeout, so a hung api makes its own callers wait, never the others'); runs the call;
and writes the audit row, even when the caller is cancelled mid-call (a disconnecting client), in
which case the call is not repeated.

Settings (agents.yaml): `gateway: {breaker: {failures: 5, reset_after: 30}, max_concurrency: 16}`;
`apis.<name>.max_concurrency` overrides the default for one api. With `gateway.redis` the breakers and
slots are counted in Redis for every instance (`gateway.store.redis_guards`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..catalog import Tool
from ..errors import ConfigError
from ..messages import ToolResult
from .audit import current_caller
from .ratelimit import RateLimited, RateLimiter

if TYPE_CHECKING:
    from ..config.model import Manifest
    from ..store.redis_guards import SharedGuards
    from .audit import AuditLog

State = Literal["closed", "open", "half_open"]
DEFAULT_MAX_CONCURRENCY = 16
CANCELLED = "The caller went away; the call was cancelled (and will not be repeated)."


class CircuitBreaker:
    def __init__(self, *, failures: int = 5, reset_after: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """One api's breaker.

        Parameters:
            failures: consecutive failures that open it.
            reset_after: seconds it stays open before one probe call may pass.
            clock: a monotonic clock (injectable for tests).
        """
        self.failures = failures
        self.reset_after = reset_after
        self._clock = clock
        self._state: State = "closed"
        self._consecutive = 0
        self._opened_at = 0.0
        self._probing = False

    @property
    def state(self) -> State:
        if self._state == "open" and self._clock() - self._opened_at >= self.reset_after:
            return "half_open"
        return self._state

    def retry_in(self) -> float:
        return max(0.0, self._opened_at + self.reset_after - self._clock())

    def allow(self) -> bool:
        """May a call go through now? In half-open state only one probe at a time."""
        state = self.state
        if state == "closed":
            return True
        if state == "half_open" and not self._probing:
            self._state = "half_open"
            self._probing = True
            return True
        return False

    def record(self, ok: bool) -> None:
        self._probing = False
        if ok:
            self._state = "closed"
            self._consecutive = 0
            return
        self._consecutive += 1
        if self._state == "half_open" or self._consecutive >= self.failures:
            self._state = "open"
            self._opened_at = self._clock()

    def release(self) -> None:
        """A call ended without a verdict (cancelled): let the next call probe instead."""
        if self._probing:
            self._probing = False
            self._state = "open"


@dataclass(slots=True, frozen=True)
class GuardSettings:
    failures: int = 5
    reset_after: float = 30.0
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None) -> GuardSettings:
        settings = settings or {}
        breaker = settings.get("breaker") or {}
        if not isinstance(breaker, Mapping):
            raise ConfigError("agents.yaml: gateway.breaker must be a mapping (failures, reset_after)")
        defaults = cls()
        values = {
            "failures": breaker.get("failures", defaults.failures),
            "reset_after": breaker.get("reset_after", defaults.reset_after),
            "max_concurrency": settings.get("max_concurrency", defaults.max_concurrency),
        }
        for key, value in values.items():
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                where = f"gateway.{key}" if key == "max_concurrency" else f"gateway.breaker.{key}"
                raise ConfigError(f"agents.yaml: {where} must be a positive number, got {value!r}")
        return cls(failures=int(values["failures"]), reset_after=float(values["reset_after"]),
                   max_concurrency=int(values["max_concurrency"]))


def is_failure(result: ToolResult) -> bool:
    """Failures that say the api is unwell (not the model's bad arguments, not a 4xx)."""
    if result.ok:
        return False
    if result.error_type in ("transport_error", "timeout"):
        return True
    return result.error_type == "upstream_error" and (result.status or 0) >= 500


class GuardedExecutor:
    def __init__(self, executor: Any, manifest: Manifest, *, limiter: RateLimiter | None = None,
                 audit: AuditLog | None = None, settings: GuardSettings | None = None,
                 breakers: dict[str, CircuitBreaker] | None = None, shared: SharedGuards | None = None) -> None:
        """Wrap `executor` (anything with `async execute(tool, arguments, *, timeout, max_result_bytes)`).

        Parameters:
            executor: the real executor (H3's `gateway.executor.Executor`).
            manifest: for each api's `max_concurrency` and `timeout`.
            limiter: charges each call to its tool's bucket; None: no tool limits.
            audit: records every call; None: no audit.
            settings: breaker thresholds and the default concurrency per api.
            breakers: per-api breakers to share (e.g. across hot reloads); default: this executor's own.
            shared: breakers and concurrency slots counted in Redis across instances (`gateway.redis`);
                then they replace the per-process ones.
        """
        self.inner = executor
        self.manifest = manifest
        self.limiter = limiter
        self.audit = audit
        self.settings = settings or GuardSettings.from_settings(manifest.settings)
        self._breakers: dict[str, CircuitBreaker] = breakers if breakers is not None else {}
        self._slots: dict[str, tuple[asyncio.Semaphore, int]] = {}
        self.shared = shared

    def __getattr__(self, name: str) -> Any:
        # Anything else (validate helpers, transports, ...) is the wrapped executor's.
        return getattr(self.inner, name)

    def breaker(self, api: str) -> CircuitBreaker:
        if api not in self._breakers:
            self._breakers[api] = CircuitBreaker(failures=self.settings.failures, reset_after=self.settings.reset_after)
        return self._breakers[api]

    def _limit_for(self, api: str) -> int:
        configured = self.manifest.apis.get(api)
        return (configured.max_concurrency if configured else None) or self.settings.max_concurrency

    def _slots_for(self, api: str) -> tuple[asyncio.Semaphore, int]:
        if api not in self._slots:
            limit = self._limit_for(api)
            self._slots[api] = (asyncio.Semaphore(limit), limit)
        return self._slots[api]

    async def execute(self, tool: Tool, arguments: dict[str, Any], *, timeout: float | None = None,
                      max_result_bytes: int | None = None) -> ToolResult:
        started = time.perf_counter()
        try:
            result = await self._guarded(tool, arguments, timeout=timeout, max_result_bytes=max_result_bytes)
        except asyncio.CancelledError:
            # Not retried, only recorded: the request may have reached the api, so repeating it could double a write.
            if self.audit is not None:
                elapsed = (time.perf_counter() - started) * 1000
                cancelled = ToolResult.failure("transport_error", CANCELLED, duration_ms=elapsed)
                # Shielded: an anyio cancel scope (the MCP door) cancels every await of a cancelled task again.
                await asyncio.shield(self.audit.record_tool(tool, arguments, cancelled))
            raise
        if self.audit is not None:
            # Not shielded (a shield is a task per call): a store takes the row before its first suspension and
            # writes it even if the caller is cancelled while it waits (`Store.add_audit`), so nothing is lost.
            await self.audit.record_tool(tool, arguments, result)
        return result

    async def _guarded(self, tool: Tool, arguments: dict[str, Any], *, timeout: float | None,
                       max_result_bytes: int | None) -> ToolResult:
        if self.limiter is not None:
            try:
                await self.limiter.check_tool(tool.name, *(n for n in (tool.operation_id,) if n))
            except RateLimited as exc:
                notes = current_caller().notes
                if notes is not None:  # lets a direct call's 429 carry Retry-After
                    notes["retry_after"] = exc.retry_after_header
                return ToolResult.failure("rate_limited", f"{exc} Wait before calling {tool.name} again.")
        if self.shared is not None:
            return await self._guarded_shared(self.shared, tool, arguments, timeout=timeout,
                                              max_result_bytes=max_result_bytes)
        breaker = self.breaker(tool.api)
        if not breaker.allow():
            return ToolResult.failure(
                "transport_error",
                f"The {tool.api} API is failing ({breaker.failures} failures in a row), so calls to it are paused "
                f"for {breaker.retry_in():.0f} more seconds. Try another tool or try again later.",
            )
        slots, limit = self._slots_for(tool.api)
        wait = timeout or self.manifest.api(tool.api).timeout
        try:
            if slots.locked():  # wait_for wraps the wait in a new task: only when there is a wait at all
                await asyncio.wait_for(slots.acquire(), wait)
            else:
                await slots.acquire()  # a free slot is taken at once, without suspending
        except TimeoutError:
            breaker.release()
            return ToolResult.failure(
                "timeout", f"The {tool.api} API is busy (all {limit} concurrent calls in use for {wait:g} s); "
                           "try again later.")
        result: ToolResult | None = None
        try:
            result = await self.inner.execute(tool, arguments, timeout=timeout, max_result_bytes=max_result_bytes)
        finally:
            slots.release()
            if result is None:
                breaker.release()
        breaker.record(not is_failure(result))
        return result

    async def _guarded_shared(self, shared: SharedGuards, tool: Tool, arguments: dict[str, Any], *,
                              timeout: float | None, max_result_bytes: int | None) -> ToolResult:
        """`_guarded`'s breaker and slots, counted in Redis for every instance (a round trip in, one out)."""
        settings = self.settings
        limit = self._limit_for(tool.api)
        wait = timeout or self.manifest.api(tool.api).timeout
        lease, retry_in = await shared.enter(tool.api, reset_after=settings.reset_after, limit=limit, wait=wait,
                                             lease=wait)
        if lease is None and retry_in > 0:
            return ToolResult.failure(
                "transport_error",
                f"The {tool.api} API is failing ({settings.failures} failures in a row), so calls to it are paused "
                f"for {retry_in:.0f} more seconds. Try another tool or try again later.",
            )
        if lease is None:
            return ToolResult.failure(
                "timeout", f"The {tool.api} API is busy (all {limit} concurrent calls in use for {wait:g} s); "
                           "try again later.")
        result: ToolResult | None = None
        try:
            result = await self.inner.execute(tool, arguments, timeout=timeout, max_result_bytes=max_result_bytes)
        finally:
            # Shielded: a cancelled call still gives its slot (and a held probe) back.
            verdict = None if result is None else not is_failure(result)
            await asyncio.shield(shared.settle(tool.api, lease, verdict, failures=settings.failures,
                                               reset_after=settings.reset_after))
        return result

    async def aclose(self) -> None:
        await self.inner.aclose()

