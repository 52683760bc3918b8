"""Token and cost budgets (`budgets:` in agents.yaml): per run, and per agent and per client over a window.

Before each model call the loop's observer `reserve`s it: the run's own usage is checked, and in each windowed
scope (the agent, the client) the call holds what a call of that agent used last (`estimate`) while it runs;
`settle` then replaces the hold with what the call used. A call is let through only while what was spent and
what calls in flight hold is below the limit; when only the holds stand in the way it waits for them to settle
(then the spent part decides), so many calls at once cannot all pass a check made before any of them was charged.
The windows are sliding. `BudgetBook` keeps them in this process; with `gateway.redis` every instance and worker
shares them (`gateway.safety.shared_budgets.SharedBudgetBook`). A price table turns tokens into cost (per million
tokens); a budget may cap either or both. Over budget, `BudgetExceeded` names the scope and what was used; the
loop ends the run with it (or, with `on_exceed: summary`, makes one last call without tools and marks the answer).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from ..config.hooks_budgets import BudgetLimit, Budgets, RunBudget
from ..errors import BudgetExceeded
from ..kernel.usage import Usage


@dataclass(slots=True)
class _Charge:
    at: float
    tokens: int
    cost: float


FIRST_ESTIMATE = 4000
"""Tokens a model call of an agent not seen yet is held at (later: what its previous call used)."""


@dataclass(slots=True, kw_only=True)
class Hold:
    """A model call's reservation in the windowed scopes it is charged to, until it is settled."""

    id: str
    agent: str
    client: str | None
    scopes: list[tuple[str, str, BudgetLimit]] = field(default_factory=list)
    """(scope, name, limit) of each windowed budget the call counts against."""
    tokens: int = 0
    cost: float = 0.0


class BudgetBook:
    """What each agent and client spent recently, against the configured budgets (in this process)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._charges: dict[tuple[str, str], deque[_Charge]] = {}
        self._held: dict[tuple[str, str], dict[str, tuple[int, float]]] = {}
        self._estimates: dict[str, tuple[int, float]] = {}
        self._ids = itertools.count(1)
        self._settled: asyncio.Event | None = None

    # -- one model call: reserve, then settle -------------------------------------------------------
    async def reserve(self, budgets: Budgets, *, agent: str, client: str | None, run_tokens: int,
                      run_cost: float, first_cost: float = 0.0) -> Hold:
        """Check the run's budget and hold the call's estimate in its agent's and client's windows; waits while
        only calls in flight stand in the way; `BudgetExceeded` once what was spent reaches a limit.
        `first_cost`: the cost of `FIRST_ESTIMATE` tokens of the agent's model (held before its first call)."""
        if budgets.run is not None:
            check_limit(budgets.run, "run", None, run_tokens, run_cost, "this run")
        hold = Hold(id=f"{next(self._ids)}", agent=agent, client=client,
                    scopes=windowed_scopes(budgets, agent, client))
        if not hold.scopes:
            return hold
        hold.tokens, hold.cost = self.estimate(agent) if agent in self._estimates else (FIRST_ESTIMATE, first_cost)
        while True:
            blocked = False
            for scope, name, limit in hold.scopes:
                tokens, cost = self.spent(scope, name, limit.window)
                check_limit(limit, scope, name, tokens, cost, scope_label(scope, name, limit))
                held = self._held.get((scope, name), {}).values()
                blocked |= _reached(limit, tokens + sum(t for t, _ in held), cost + sum(c for _, c in held))
            if not blocked:
                for scope, name, _ in hold.scopes:
                    self._held.setdefault((scope, name), {})[hold.id] = (hold.tokens, hold.cost)
                return hold
            if self._settled is None:
                self._settled = asyncio.Event()
            await self._settled.wait()  # a call in flight settled: look again

    async def settle(self, hold: Hold, *, tokens: int, cost: float) -> None:
        """The call is over: its hold goes, what it used is charged (and is its agent's next estimate)."""
        for scope, name, _ in hold.scopes:
            self._held.get((scope, name), {}).pop(hold.id, None)
        self.charge(agent=hold.agent, client=hold.client, tokens=tokens, cost=cost)
        if tokens or cost:
            self._estimates[hold.agent] = (tokens, cost)
        settled, self._settled = self._settled, None
        if settled is not None:
            settled.set()

    def estimate(self, agent: str) -> tuple[int, float]:
        """What a model call of `agent` is held at: its previous call's usage, `FIRST_ESTIMATE` tokens before."""
        return self._estimates.get(agent, (FIRST_ESTIMATE, 0.0))

    def cost(self, budgets: Budgets, model: str, model_id: str, usage: Usage) -> float:
        price = budgets.price(model, model_id)
        return price.cost(usage.input_tokens, usage.output_tokens) if price is not None else 0.0

    def charge(self, *, agent: str, client: str | None, tokens: int, cost: float) -> None:
        now = self._clock()
        keys = [("agent", agent)] + ([("client", client)] if client is not None else [])
        for key in keys:
            self._charges.setdefault(key, deque()).append(_Charge(now, tokens, cost))

    def spent(self, scope: str, name: str, window: float) -> tuple[int, float]:
        """Tokens and cost charged to `scope`/`name` in the last `window` seconds."""
        charges = self._charges.get((scope, name))
        if not charges:
            return 0, 0.0
        horizon = self._clock() - window
        while charges and charges[0].at < horizon:
            charges.popleft()
        return sum(c.tokens for c in charges), sum(c.cost for c in charges)

    def check(self, budgets: Budgets, *, agent: str, client: str | None, run_tokens: int, run_cost: float) -> None:
        """Raise `BudgetExceeded` when a budget is spent: the run's, the agent's or the client's."""
        if not budgets:
            return
        if budgets.run is not None:
            check_limit(budgets.run, "run", None, run_tokens, run_cost, "this run")
        limit = budgets.for_agent(agent)
        if limit is not None:
            tokens, cost = self.spent("agent", agent, limit.window)
            check_limit(limit, "agent", agent, tokens, cost, f"agent {agent!r} in the last {_window(limit)}")
        limit = budgets.for_client(client)
        if limit is not None and client is not None:
            tokens, cost = self.spent("client", client, limit.window)
            check_limit(limit, "client", client, tokens, cost, f"client {client!r} in the last {_window(limit)}")


def windowed_scopes(budgets: Budgets, agent: str, client: str | None) -> list[tuple[str, str, BudgetLimit]]:
    """(scope, name, limit) of each windowed budget a model call of `agent` for `client` counts against."""
    scopes = []
    limit = budgets.for_agent(agent)
    if limit is not None:
        scopes.append(("agent", agent, limit))
    limit = budgets.for_client(client)
    if limit is not None and client is not None:
        scopes.append(("client", client, limit))
    return scopes


def scope_label(scope: str, name: str, limit: BudgetLimit) -> str:
    """How a `BudgetExceeded` message names a windowed scope: `client 'ci' in the last 1h`."""
    return f"{scope} {name!r} in the last {_window(limit)}"


def _reached(limit: BudgetLimit, tokens: float, cost: float) -> bool:
    return (limit.tokens is not None and tokens >= limit.tokens) or (limit.cost is not None and cost >= limit.cost)


def check_limit(limit: RunBudget, scope: str, name: str | None, tokens: int, cost: float, who: str) -> None:
    """`BudgetExceeded` when `tokens` or `cost` reached the limit (`who` names the scope in the message)."""
    if limit.tokens is not None and tokens >= limit.tokens:
        raise BudgetExceeded(scope, name, f"token budget exceeded: {who} used {tokens} of {limit.tokens} tokens; "
                             "no further model call was made")
    if limit.cost is not None and cost >= limit.cost:
        raise BudgetExceeded(scope, name, f"cost budget exceeded: {who} cost {cost:.4f} of {limit.cost:g}; "
                             "no further model call was made")


def _window(limit: BudgetLimit) -> str:
    seconds = limit.window
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
