"""The `hooks:` and `budgets:` sections of agents.yaml as typed settings.

```yaml
hooks:                                   # global: every agent's steps (before the agent's own hooks)
  - on: before_tool_call                 # before_model_call | after_model_call | before_tool_call | after_tool_call
    call: guards:no_repo_writes          # a Python callable, `module:function` (installed by the user)
    tools: ["delete*", "create*"]        # optional: only these tools (globs; tool hooks only)
    timeout: 2                           # seconds (default 5)
    on_error: deny                       # allow | deny (default): what a failing or late hook means
  - on: after_tool_call
    url: http://127.0.0.1:9100/mask      # or an HTTP endpoint: POST of the step as JSON
agents:
  clerk:
    hooks: [...]                         # this agent's own, same shape
budgets:
  on_exceed: error                       # error (default) | summary: one last call without tools
  run: {tokens: 20000}                   # per run; `cost: 0.50` with a price table
  agent: {tokens: 1000000, window: 24h}  # each agent over a sliding window (agents: {NAME: ...} per agent)
  client: {cost: 5, window: 1h}          # each caller key (clients: {NAME: ...} per client)
  prices:                                # per million tokens, keyed by `provider/model` or the model id
    openai/gpt-4o: {input: 2.5, output: 10}
```
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, WithJsonSchema, model_validator
from pydantic.json_schema import SkipJsonSchema

from .fields import (
    HOOK_CALL,
    HTTP_URL,
    Count,
    Names,
    NonNegative,
    Positive,
    Seconds,
    Section,
    TextMap,
    at_key,
    derived,
    doc,
)

HookEvent = Literal["before_model_call", "after_model_call", "before_tool_call", "after_tool_call"]
HOOK_EVENTS: tuple[HookEvent, ...] = ("before_model_call", "after_model_call", "before_tool_call", "after_tool_call")
DEFAULT_HOOK_TIMEOUT = 5.0
DEFAULT_WINDOW = 86_400.0
_WINDOW = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)\s*$")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0}


class HookConfig(Section):
    """One hook: a Python callable or an HTTP endpoint that sees a step (and may deny or change it)."""

    model_config = ConfigDict(frozen=True)

    event: HookEvent = doc("The step it watches.", alias="on")
    call: str | None = doc("A Python callable, `module:function` (exactly one of `call` and `url`).", None,
                           pattern=HOOK_CALL)
    url: str | None = doc("An HTTP endpoint that gets the step as JSON (POST); exactly one of `call` and `url`.",
                          None, pattern=HTTP_URL)
    timeout: Seconds = doc("Seconds the hook may take; then it counts as failed.", DEFAULT_HOOK_TIMEOUT)
    on_error: Literal["allow", "deny"] = doc("What a failing or late hook means for the step.", "deny")
    tools: Names = doc("Tool-name globs a tool hook is limited to (default: every tool).", default=[])
    headers: TextMap = doc("Extra headers of an HTTP hook (e.g. its own token).", default={})
    agent: SkipJsonSchema[str | None] = derived(None)
    """The agent whose `hooks:` declared it; None: the global section."""

    @model_validator(mode="after")
    def _one_target(self) -> HookConfig:
        if (self.call is None) == (self.url is None):
            raise ValueError("a hook needs exactly one of 'call' (module:function) or 'url' (an HTTP endpoint)")
        if self.tools and not self.event.endswith("tool_call"):
            raise at_key("tools", "'tools' limits a tool hook; a model hook sees every model call")
        return self


def parse_window(value: Any) -> float | None:
    """`30m`, `1h`, `1d`, `90s` or a number of seconds; None when it is none of those."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if value > 0 else None
    match = _WINDOW.match(str(value))
    if match is None or float(match.group(1)) <= 0:
        return None
    return float(match.group(1)) * _UNITS[match.group(2)]


def _window(value: Any) -> Any:
    seconds = parse_window(value)
    if seconds is None:
        raise ValueError(f"expected a duration such as 30m, 1h or 1d, got {value!r}")
    return seconds


Window = Annotated[float, BeforeValidator(_window), WithJsonSchema({"anyOf": [
    {"type": "string", "pattern": _WINDOW.pattern}, {"type": "number", "exclusiveMinimum": 0}]})]
"""A duration: `30m`, `1h`, `1d`, `90s`, or seconds."""


class RunBudget(Section):
    """A ceiling on one run's tokens or cost (either or both)."""

    tokens: Count | None = doc("Tokens (input and output) at most.", None)
    cost: Positive | None = doc("Cost at most, in the price table's currency (needs `prices`).", None)

    @model_validator(mode="after")
    def _something(self) -> RunBudget:
        if self.tokens is None and self.cost is None:
            raise ValueError("a budget needs 'tokens' or 'cost' (or both)")
        return self


class BudgetLimit(RunBudget):
    """A ceiling on tokens or cost (either or both) over a sliding window."""

    window: Window = doc("The sliding window: `30m`, `1h`, `1d`, or seconds.", DEFAULT_WINDOW)


class Price(Section):
    """What a model costs per million tokens (the currency is the operator's)."""

    input: NonNegative = doc("Per million input tokens.", 0.0)
    output: NonNegative = doc("Per million output tokens.", 0.0)

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


class Budgets(Section):
    """Token and cost budgets: per run, per agent and per client key."""

    on_exceed: Literal["error", "summary"] = doc(
        "What a run past its budget gets: an error, or one last call without tools for a summary.", "error")
    run: RunBudget | None = doc("Each run's budget.", None)
    agent: BudgetLimit | None = doc("Each agent's budget over its window (unless `agents` names it).", None)
    client: BudgetLimit | None = doc("Each client key's budget over its window (unless `clients` names it).", None)
    agents: dict[str, BudgetLimit] = doc("Budgets of single agents, by name.", default={})
    clients: dict[str, BudgetLimit] = doc("Budgets of single clients, by name.", default={})
    prices: dict[str, Price] = doc("Prices per million tokens, keyed by `provider/model` or the model id.",
                                   default={})

    def __bool__(self) -> bool:
        return any((self.run, self.agent, self.client, self.agents, self.clients))

    def for_agent(self, name: str) -> BudgetLimit | None:
        return self.agents.get(name, self.agent)

    def for_client(self, name: str | None) -> BudgetLimit | None:
        if name is None:
            return None
        return self.clients.get(name, self.client)

    def price(self, model: str, model_id: str) -> Price | None:
        """The price of `provider/model` as written, else of the bare model id."""
        return self.prices.get(model) or self.prices.get(model_id)

    def costs_without_prices(self) -> bool:
        """A budget in cost with no price table: every call would cost 0."""
        limits = [self.run, self.agent, self.client, *self.agents.values(), *self.clients.values()]
        return any(limit is not None and limit.cost is not None for limit in limits) and not self.prices
