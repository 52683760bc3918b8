"""The loop's seams for whole runs and model calls: spans, metrics, model hooks and budgets, in one place.

`RunObserver` is built once per generation (with the pipeline, by the composition root) and reaches the loop
through its `invoke` (`ToolRunner.observer`), so every door that runs the loop (chat, responses, an approval's
resume, `gateway chat`, a delegation) gets the same behaviour without knowing of it. Per model call, in order:
the budgets are checked and the call reserved in the agent's and client's windows (`BudgetExceeded`), the
`before_model_call` hooks run (`HookDenied`), the call runs inside a `chat {model}` span and its latency and
tokens are counted, the reservation is settled with the usage, the answer's text is redacted (the gateway's own
secrets, in every form the redactor knows: a model that read one where the redactor missed it, or was told one, does
not hand it to the caller, the store or a hook), and so is its reasoning (Anthropic's thinking, `reasoning_content`,
Gemini's thought parts, Responses' reasoning items, Ollama's thinking) for the store (`Message.kept_extras`; the
run echoes it as it came to the provider that wrote it), and the `after_model_call` hooks see (and may replace) the
answer. A streamed answer's text is redacted as it streams (`gateway.kernel.redaction.HeldText`, in the loop); its
reasoning is handed to no caller.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config.hooks_budgets import Budgets
from ..errors import BudgetExceeded
from ..hooks import ConfiguredHooks, model_step
from ..kernel import tracing
from ..kernel.usage import Usage
from ..safety.budgets import FIRST_ESTIMATE, BudgetBook, Hold

if TYPE_CHECKING:
    from ..config.model import AgentConfig
    from ..kernel.redaction import Redactor
    from ..providers.base import Turn
    from ..safety.shares import ShareBook
    from .metrics import Metrics


@dataclass(slots=True, kw_only=True)
class ModelCall:
    """One model call of a run, as the seams see it."""

    agent: AgentConfig
    provider: str
    """The provider's `gen_ai.provider.name` (`ProviderAdapter.telemetry_name`: `openai`, `gcp.gemini`, ...)."""
    client: str | None
    iteration: int
    messages: Sequence[Any]
    run_usage: Usage
    """The run's usage before this call."""
    summary: bool = False
    """The last call without tools (at a cap or a budget): not refused by the budget it ends the run for."""


class RunObserver:
    """Spans, metrics, hooks and budgets around a run and its model calls."""

    def __init__(self, *, metrics: Metrics | None = None, hooks: ConfiguredHooks | None = None,
                 budgets: Budgets | None = None, book: BudgetBook | None = None,
                 code_workers_per_client: int | None = None, sandboxes: ShareBook | None = None,
                 redactor: Redactor | None = None) -> None:
        self.metrics = metrics
        self.redactor = redactor
        """The generation's (the executor's: it learns tokens at run time): scrubs the model's answers."""
        self.hooks = hooks if hooks else None
        self.budgets = budgets if budgets else None
        self.book = book if book is not None else BudgetBook()
        self.code_workers_per_client = code_workers_per_client
        """The sandboxes one client's `run_code` scripts may hold at once (`gateway.max_code_workers_per_client`)."""
        self.sandboxes = sandboxes
        """Where they are counted across instances (`gateway.redis`); None: in this process."""

    @property
    def on_exceed(self) -> str:
        return self.budgets.on_exceed if self.budgets is not None else "error"

    def run_cost(self, agent: AgentConfig, usage: Usage) -> float | None:
        """The run's cost by the price table; None without a price for the agent's model."""
        if self.budgets is None or self.budgets.price(agent.model, agent.model_id) is None:
            return None
        return self.book.cost(self.budgets, agent.model, agent.model_id, usage)

    async def run(self, agent: AgentConfig, provider: str, body: Callable[[], Awaitable[Any]],
                  usage: Callable[[], Usage]) -> Any:
        """`invoke_agent {agent}` around a whole run (or a resumed part of one)."""
        started = time.perf_counter()
        with tracing.run_span(agent.name, provider=provider, model=agent.model_id):
            try:
                return await body()
            finally:
                if self.metrics is not None:
                    self.metrics.run_latency.labels(agent=agent.name).observe(time.perf_counter() - started)
                    self.metrics.run_tokens.labels(agent=agent.name).observe(usage().total_tokens)

    async def model_call(self, call: ModelCall, ask: Callable[[], Awaitable[Turn]]) -> Turn:
        agent = call.agent
        budgets = self.budgets
        hold: Hold | None = None
        if budgets is not None:
            if call.summary:  # not refused by the budget it ends the run for, but charged
                hold = Hold(id="", agent=agent.name, client=call.client)
            else:
                try:
                    hold = await self.book.reserve(
                        budgets, agent=agent.name, client=call.client, run_tokens=call.run_usage.total_tokens,
                        run_cost=self.book.cost(budgets, agent.model, agent.model_id, call.run_usage),
                        first_cost=self.book.cost(budgets, agent.model, agent.model_id,
                                                  Usage(input_tokens=FIRST_ESTIMATE)))
                except BudgetExceeded as exc:
                    if self.metrics is not None:
                        self.metrics.budget_exceeded.labels(scope=exc.scope).inc()
                    raise
        turn: Turn | None = None
        try:
            turn = await self._ask(call, ask)
        finally:
            if hold is not None and budgets is not None:
                # Settled whatever happened (a failed call is charged what it reported: nothing), shielded so a
                # cancelled run does not leave its hold standing in everyone's way.
                used = turn.usage if turn is not None else Usage()
                await asyncio.shield(self.book.settle(
                    hold, tokens=used.total_tokens,
                    cost=self.book.cost(budgets, agent.model, agent.model_id, used)))
        return turn

    async def _ask(self, call: ModelCall, ask: Callable[[], Awaitable[Turn]]) -> Turn:
        agent = call.agent
        hooks = self.hooks
        if hooks is not None:
            await hooks.before_model_call(agent.name, lambda: model_step(
                "before_model_call", agent=agent.name, client=call.client, model=agent.model,
                iteration=call.iteration, messages=call.messages))
        started = time.perf_counter()
        with tracing.model_span(provider=call.provider, model=agent.model_id) as span:
            turn = await ask()
            tracing.record_turn(span, input_tokens=turn.usage.input_tokens, output_tokens=turn.usage.output_tokens,
                                finish_reason=turn.raw_finish_reason or turn.finish_reason)
        if self.metrics is not None:
            self.metrics.model_latency.labels(agent=agent.name, model=agent.model).observe(
                time.perf_counter() - started)
            tokens = self.metrics.tokens
            tokens.labels(agent=agent.name, model=agent.model, type="input").inc(turn.usage.input_tokens)
            tokens.labels(agent=agent.name, model=agent.model, type="output").inc(turn.usage.output_tokens)
        redactor = self.redactor
        if redactor and turn.message.content:
            turn.message.content = redactor.text(turn.message.content)
        if redactor and turn.message.extras:  # the reasoning: the store keeps it redacted, the provider gets it back
            kept = redactor.value(turn.message.extras)
            if kept is not turn.message.extras:
                turn.message.kept_extras = kept
        if hooks is not None:
            def replace(content: str) -> None:
                turn.message.content = content

            await hooks.after_model_call(agent.name, lambda: model_step(
                "after_model_call", agent=agent.name, client=call.client, model=agent.model,
                iteration=call.iteration, messages=call.messages, answer=turn.message), replace)
        return turn
