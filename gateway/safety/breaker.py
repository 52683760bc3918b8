"""Fault isolation per api: a circuit breaker per api and caller, and a concurrency limit per api.

`GuardApi` is the call pipeline's breaker-and-concurrency stage. It refuses at once while the breaker is
open (after `failures` consecutive failures it stays open `reset_after` seconds, then lets one probe through:
success closes it, failure opens it again), then waits for one of the api's `max_concurrency` slots (at most
the call's timeout, so a hung api makes its own callers wait, never the others').

A breaker belongs to an api *and a caller group* (the client key's name; callers without a key share one):
one client whose calls keep failing (bad data that makes the api answer 5xx, a tenant the api refuses) opens
the breaker for itself only. The price: when an api is down for everyone, each client learns it with its own
`failures` calls. The concurrency slots stay per api: they protect the api's capacity, which all share; but
they are handed over fairly (`gateway.safety.fair_slots`): when all are taken, a freed slot goes to the waiting
group that holds the fewest, so one client's flood of slow calls delays another client's call by one call at
most, not by its whole queue. `max_concurrency_per_client` caps what one group holds at once.

Settings (agents.yaml): `gateway: {breaker: {failures: 5, reset_after: 30}, max_concurrency: 16,
max_concurrency_per_client: 4}`; `apis.<name>.max_concurrency` and `apis.<name>.max_concurrency_per_client`
override the defaults for one api.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from ..config.settings import DEFAULT_MAX_CONCURRENCY, GuardSettings
from ..kernel.caller import current_caller
from ..messages import ToolResult
from .fair_slots import FairSlots

if TYPE_CHECKING:
    from ..catalog import AgentTool
    from ..config.model import Manifest
    from ..kernel.calls import Invocation, Proceed

__all__ = ["DEFAULT_MAX_CONCURRENCY", "Breakers", "CircuitBreaker", "GuardApi", "GuardSettings", "GuardTool",
           "circuit_open", "is_failure"]

State = Literal["closed", "open", "half_open"]
ANONYMOUS_GROUP = "anonymous"


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


def is_failure(result: ToolResult) -> bool:
    """Failures that say the api is unwell (not the model's bad arguments, not a 4xx)."""
    if result.ok:
        return False
    if result.error_type in ("transport_error", "timeout"):
        return True
    return result.error_type == "upstream_error" and (result.status or 0) >= 500


def too_many_waiting(api: str, client: str | None, cap: int) -> ToolResult:
    """The refusal of a call past its client's calls waiting for `api`'s slots (`gateway.max_waiting_calls_per_client`):
    unsent and unqueued, so one client's flood neither lengthens every other client's wait nor every hand-over."""
    who = f"Client {client!r}" if client is not None else "This caller"
    return ToolResult.failure(
        "rate_limited", f"{who} has as many calls waiting for the {api} API as it may ({cap}: "
        "gateway.max_waiting_calls_per_client); this call was neither sent nor queued. Call again once some of them "
        "are done.")


def circuit_open(api: str, failures: int, retry_in: float) -> ToolResult:
    """The refusal of a call while `api`'s breaker is open: its own type (`circuit_open`, nothing sent), not the
    failure that opened it, and when the breaker lets a probe through (a direct call's 503 carries it as
    Retry-After)."""
    seconds = max(1, math.ceil(retry_in))
    notes = current_caller().notes
    if notes is not None:
        notes["retry_after"] = str(seconds)
    in_a_row = f"{failures} failure{'s' if failures != 1 else ''} in a row"
    return ToolResult.failure(
        "circuit_open",
        f"The {api} API is failing ({in_a_row}), so its circuit breaker is open and calls to it are paused (this "
        f"one was not sent); it lets one call through again in {seconds} s. Try another tool or try again then.")


class Breakers:
    """The breakers of a gateway, by (api, caller group); kept across hot reloads (a failing api is still failing
    a second after agents.yaml changed)."""

    def __init__(self, settings: GuardSettings | None = None) -> None:
        self.settings = settings or GuardSettings()
        self._breakers: dict[tuple[str, str], CircuitBreaker] = {}

    def get(self, api: str, group: str | None = None) -> CircuitBreaker:
        key = (api, group or ANONYMOUS_GROUP)
        breaker = self._breakers.get(key)
        if breaker is None:
            breaker = self._breakers[key] = CircuitBreaker(failures=self.settings.failures,
                                                           reset_after=self.settings.reset_after)
        return breaker

    def states(self) -> list[tuple[str, str, State]]:
        """(api, caller group, state) of every breaker made so far (`/metrics`)."""
        return [(api, group, breaker.state) for (api, group), breaker in list(self._breakers.items())]


class GuardApi:
    """The pipeline's breaker-and-concurrency stage (see the module docstring)."""

    def __init__(self, manifest: Manifest, breakers: Breakers, settings: GuardSettings | None = None) -> None:
        self.manifest = manifest
        self.breakers = breakers
        self.settings = settings or breakers.settings
        self._slots: dict[str, FairSlots] = {}

    def slots(self, api: str) -> FairSlots:
        """The api's slots (made at its first call), shared by the calls of all its tools."""
        slots = self._slots.get(api)
        if slots is None:
            configured = self.manifest.apis.get(api)
            limit = (configured.max_concurrency if configured else None) or self.settings.max_concurrency
            per_client = (configured.max_concurrency_per_client if configured else None) \
                or self.settings.max_concurrency_per_client
            slots = self._slots[api] = FairSlots(limit, per_client, self.settings.max_waiting_calls_per_client)
        return slots

    def for_tool(self, agent_tool: AgentTool) -> GuardTool:
        """The stage for the calls of one tool: its api's slots and its wait for one found once, not per call."""
        api = agent_tool.tool.api if agent_tool.tool is not None else ""
        wait = agent_tool.timeout or self.manifest.api(api).timeout
        return GuardTool(self.breakers, api, self.slots(api), wait)

    async def __call__(self, invocation: Invocation, proceed: Proceed) -> ToolResult:
        return await self.for_tool(invocation.agent_tool)(invocation, proceed)


class GuardTool:
    """`GuardApi` for the calls of one tool: the breaker of its api and the caller's group, then one of its api's
    slots for that group, waited for at most `wait` seconds."""

    __slots__ = ("anonymous", "api", "breakers", "slots", "wait")

    def __init__(self, breakers: Breakers, api: str, slots: FairSlots, wait: float) -> None:
        self.breakers = breakers
        self.api = api
        self.slots = slots
        self.wait = wait
        self.anonymous: CircuitBreaker | None = None
        """The breaker of calls without a client, once found (`Breakers` keeps each breaker for good)."""

    async def __call__(self, invocation: Invocation, proceed: Proceed) -> ToolResult:
        api = self.api
        client = invocation.client
        if client is None:
            group = ANONYMOUS_GROUP
            breaker = self.anonymous
            if breaker is None:
                breaker = self.anonymous = self.breakers.get(api, None)
        else:
            group = client
            breaker = self.breakers.get(api, client)
        if not breaker.allow():
            return circuit_open(api, breaker.failures, breaker.retry_in())
        slots = self.slots
        if not slots.take(group):  # a free slot is taken at once: no task, no future, no timeout scope
            if not slots.may_wait(group):
                breaker.release()
                return too_many_waiting(api, client, slots.most_waiting or 0)
            capped = slots.per_group < slots.limit and slots.held(group) >= slots.per_group
            try:
                handed = await slots.wait(group, self.wait)
            except BaseException:
                breaker.release()  # a probe cancelled while it waited: the next call may probe
                raise
            if not handed:
                breaker.release()
                return self._busy(capped)
        result: ToolResult | None = None
        try:
            result = await proceed(invocation)
        finally:
            slots.release(group)
            if result is None:
                breaker.release()
        breaker.record(not is_failure(result))
        return result

    def _busy(self, capped: bool) -> ToolResult:
        """What a call that waited its whole timeout is told; `capped`: it waited because its client held its
        `max_concurrency_per_client`, not because the api's slots were all taken."""
        slots = self.slots
        if capped:
            why = f"this client's {slots.per_group} concurrent calls to it in use"
        else:
            why = f"all {slots.limit} concurrent calls in use"
        return ToolResult.failure("timeout", f"The {self.api} API is busy ({why} for {self.wait:g} s); "
                                             "try again later.")
