"""BudgetBook: per run, per agent and per client, over sliding windows, in tokens and cost."""

from __future__ import annotations

import pytest

from gateway.config.hooks_budgets import BudgetLimit, Budgets, Price
from gateway.errors import BudgetExceeded
from gateway.kernel.usage import Usage
from gateway.safety.budgets import BudgetBook


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_run_budget_in_tokens() -> None:
    book = BudgetBook()
    budgets = Budgets(run=BudgetLimit(tokens=100))
    book.check(budgets, agent="a", client=None, run_tokens=99, run_cost=0)
    with pytest.raises(BudgetExceeded) as caught:
        book.check(budgets, agent="a", client=None, run_tokens=100, run_cost=0)
    assert caught.value.scope == "run" and caught.value.code == "budget_exceeded"
    assert "this run used 100 of 100 tokens" in str(caught.value)


def test_agent_window_slides() -> None:
    clock = Clock()
    book = BudgetBook(clock)
    budgets = Budgets(agent=BudgetLimit(tokens=50, window=60))
    book.charge(agent="a", client=None, tokens=50, cost=0)
    with pytest.raises(BudgetExceeded, match="agent 'a' in the last 1m used 50 of 50"):
        book.check(budgets, agent="a", client=None, run_tokens=0, run_cost=0)
    book.check(budgets, agent="b", client=None, run_tokens=0, run_cost=0)  # another agent's own window
    clock.now += 61
    book.check(budgets, agent="a", client=None, run_tokens=0, run_cost=0)


def test_client_budget_in_cost() -> None:
    book = BudgetBook()
    budgets = Budgets(clients={"ci": BudgetLimit(cost=1.0, window=3600)},
                      prices={"openai/gpt-4o": Price(input=2.5, output=10)})
    cost = book.cost(budgets, "openai/gpt-4o", "gpt-4o", Usage(input_tokens=200_000, output_tokens=50_000))
    assert cost == pytest.approx(1.0)
    book.charge(agent="a", client="ci", tokens=250_000, cost=cost)
    book.check(budgets, agent="a", client="other", run_tokens=0, run_cost=0)
    with pytest.raises(BudgetExceeded, match="client 'ci' in the last 1h cost 1.0000 of 1"):
        book.check(budgets, agent="a", client="ci", run_tokens=0, run_cost=0)
