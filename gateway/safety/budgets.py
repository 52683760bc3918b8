"""Token and cost budgets (`budgets:` in agents.yaml): per run, and per agent and per client over a window.

The loop asks `BudgetBook.check` before each model call and reports each call's usage with `charge`. A run's
own usage is the loop's; the windows are sliding, kept in this process (each worker keeps its own). A price
table turns tokens into cost (per million tokens); a budget may cap either or both. Over budget, `check`
raises `BudgetExceeded`, which names the scope and what was used; the loop ends the run with it (or, with
`on_exceed: summary`, makes one last call without tools and marks the answer).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ..config.hooks_budgets import BudgetLimit, Budgets, RunBudget
from ..errors import BudgetExceeded
from ..kernel.usage import Usage


@dataclass(slots=True)
class _Charge:
    at: float
    tokens: int
    cost: float


class BudgetBook:
    """What each agent and client spent recently, against the configured budgets."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._charges: dict[tuple[str, str], deque[_Charge]] = {}

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
            _check_limit(budgets.run, "run", None, run_tokens, run_cost, "this run")
        limit = budgets.for_agent(agent)
        if limit is not None:
            tokens, cost = self.spent("agent", agent, limit.window)
            _check_limit(limit, "agent", agent, tokens, cost, f"agent {agent!r} in the last {_window(limit)}")
        limit = budgets.for_client(client)
        if limit is not None and client is not None:
            tokens, cost = self.spent("client", client, limit.window)
            _check_limit(limit, "client", client, tokens, cost, f"client {client!r} in the last {_window(limit)}")


def _check_limit(limit: RunBudget, scope: str, name: str | None, tokens: int, cost: float, who: str) -> None:
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
