"""The `hooks:` and `budgets:` sections of agents.yaml as typed data, and their readers.

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

import importlib.util
import re
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from .checker import Checker
from .yamlnodes import MISSING, KeyPath

HookEvent = Literal["before_model_call", "after_model_call", "before_tool_call", "after_tool_call"]
HOOK_EVENTS: tuple[HookEvent, ...] = ("before_model_call", "after_model_call", "before_tool_call", "after_tool_call")
HOOK_KEYS = ("on", "call", "url", "timeout", "on_error", "tools", "headers")
BUDGET_KEYS = ("on_exceed", "run", "agent", "client", "agents", "clients", "prices")
LIMIT_KEYS = ("tokens", "cost", "window")
PRICE_KEYS = ("input", "output")
DEFAULT_HOOK_TIMEOUT = 5.0
DEFAULT_WINDOW = 86_400.0
_WINDOW = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)\s*$")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0}


@dataclass(slots=True, kw_only=True, frozen=True)
class HookConfig:
    """One configured hook: where it runs and what it is."""

    event: HookEvent
    """The step it watches (YAML key `on`)."""
    call: str | None = None
    """`module:function`, a Python callable."""
    url: str | None = None
    """An HTTP endpoint that gets the step as JSON (POST)."""
    timeout: float = DEFAULT_HOOK_TIMEOUT
    on_error: Literal["allow", "deny"] = "deny"
    tools: tuple[str, ...] = ()
    """Tool-name globs the hook is limited to (tool hooks); empty: every tool."""
    headers: tuple[tuple[str, str], ...] = ()
    """Extra headers of an HTTP hook (e.g. its own token)."""
    agent: str | None = None
    """The agent whose `hooks:` declared it; None: the global section."""


@dataclass(slots=True, kw_only=True, frozen=True)
class BudgetLimit:
    """A ceiling on tokens or cost (either or both); `window` seconds for the per-agent and per-client ones."""

    tokens: int | None = None
    cost: float | None = None
    window: float = DEFAULT_WINDOW


@dataclass(slots=True, kw_only=True, frozen=True)
class Price:
    """What a model costs per million tokens (the currency is the operator's)."""

    input: float = 0.0
    output: float = 0.0

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


@dataclass(slots=True, kw_only=True)
class Budgets:
    on_exceed: Literal["error", "summary"] = "error"
    run: BudgetLimit | None = None
    agent: BudgetLimit | None = None
    client: BudgetLimit | None = None
    agents: dict[str, BudgetLimit] = field(default_factory=dict)
    clients: dict[str, BudgetLimit] = field(default_factory=dict)
    prices: dict[str, Price] = field(default_factory=dict)

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


def read_hooks(c: Checker, value: Any, path: KeyPath, *, agent: str | None = None) -> list[HookConfig]:
    """A `hooks:` list; every bad entry becomes a diagnostic and is left out."""
    hooks: list[HookConfig] = []
    for index, entry in enumerate(c.list_of(value, path) or []):
        hook = _read_hook(c, entry, (*path, index), agent)
        if hook is not None:
            hooks.append(hook)
    return hooks


def _read_hook(c: Checker, entry: Any, path: KeyPath, agent: str | None) -> HookConfig | None:
    m = c.mapping(entry, path, HOOK_KEYS)
    if m is None or entry is None:
        return None
    event = c.choice(m, path, "on", HOOK_EVENTS)
    if event is None:
        if "on" not in m:
            c.error(path, f"a hook needs 'on': one of {', '.join(HOOK_EVENTS)}")
        return None
    call, url = c.string(m, path, "call"), c.string(m, path, "url")
    if (call is None) == (url is None):
        c.error(path, "a hook needs exactly one of 'call' (module:function) or 'url' (an HTTP endpoint)")
        return None
    if call is not None and not re.match(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$", call):
        c.error((*path, "call"), f"expected 'module:function', got {call!r}")
        return None
    if call is not None and _module_missing(call.partition(":")[0]):
        c.warning((*path, "call"), f"no module {call.partition(':')[0]!r} on the gateway's path (PYTHONPATH); "
                  "every call of this hook will count as its on_error")
    if url is not None and not url.startswith(("http://", "https://")):
        c.error((*path, "url"), f"expected an http:// or https:// URL, got {url!r}")
        return None
    timeout = c.number(m, path, "timeout", minimum=0, exclusive=True)
    on_error = c.choice(m, path, "on_error", ("allow", "deny")) or "deny"
    tools = tuple(c.strings(m, path, "tools") or ())
    if tools and not event.endswith("tool_call"):
        c.error((*path, "tools"), "'tools' limits a tool hook; a model hook sees every model call")
    headers = tuple(c.string_map(m, path, "headers").items())
    return HookConfig(event=cast(HookEvent, event), call=call, url=url, on_error=cast(Any, on_error), tools=tools,
                      headers=headers, timeout=float(timeout) if timeout is not None else DEFAULT_HOOK_TIMEOUT,
                      agent=agent)


def _module_missing(module: str) -> bool:
    """Whether `module` cannot be found (without running it: only its parent packages are imported)."""
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


def read_budgets(c: Checker, value: Any, path: KeyPath = ("budgets",)) -> Budgets:
    budgets = Budgets()
    m = c.mapping(value, path, BUDGET_KEYS)
    if not m:
        return budgets
    budgets.on_exceed = cast(Any, c.choice(m, path, "on_exceed", ("error", "summary")) or "error")
    budgets.run = _read_limit(c, m.get("run"), (*path, "run"), windowed=False)
    budgets.agent = _read_limit(c, m.get("agent"), (*path, "agent"), windowed=True)
    budgets.client = _read_limit(c, m.get("client"), (*path, "client"), windowed=True)
    for key in ("agents", "clients"):
        section = c.mapping(m.get(key), (*path, key)) or {}
        limits = {name: limit for name, raw in section.items()
                  if (limit := _read_limit(c, raw, (*path, key, name), windowed=True)) is not None}
        setattr(budgets, key, limits)
    prices = c.mapping(m.get("prices"), (*path, "prices")) or {}
    for model, raw in prices.items():
        entry = c.mapping(raw, (*path, "prices", model), PRICE_KEYS)
        if entry is None:
            continue
        numbers = {k: c.number(entry, (*path, "prices", model), k) for k in PRICE_KEYS}
        budgets.prices[model] = Price(input=float(numbers["input"] or 0), output=float(numbers["output"] or 0))
    _check_costs(c, budgets, path)
    return budgets


def _read_limit(c: Checker, value: Any, path: KeyPath, *, windowed: bool) -> BudgetLimit | None:
    if value is None or value is MISSING:
        return None
    m = c.mapping(value, path, LIMIT_KEYS if windowed else ("tokens", "cost"))
    if m is None:
        return None
    tokens = c.number(m, path, "tokens", integer=True, minimum=1)
    cost = c.number(m, path, "cost", minimum=0, exclusive=True)
    if tokens is None and cost is None:
        c.error(path, "a budget needs 'tokens' or 'cost' (or both)")
        return None
    window = DEFAULT_WINDOW
    if windowed and m.get("window") is not None:
        parsed = parse_window(m["window"])
        if parsed is None:
            c.error((*path, "window"), f"expected a duration such as 30m, 1h or 1d, got {m['window']!r}")
        else:
            window = parsed
    return BudgetLimit(tokens=int(tokens) if tokens is not None else None,
                       cost=float(cost) if cost is not None else None, window=window)


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


def _check_costs(c: Checker, budgets: Budgets, path: KeyPath) -> None:
    limits = [budgets.run, budgets.agent, budgets.client, *budgets.agents.values(), *budgets.clients.values()]
    if any(limit is not None and limit.cost is not None for limit in limits) and not budgets.prices:
        c.warning((*path, "prices"), "a budget in cost needs a price table; without one every call costs 0")
