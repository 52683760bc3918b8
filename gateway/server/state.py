"""What the server keeps between requests: the current runtime and the call pipeline built for it.

A `Generation` pairs one `Runtime` (catalog + manifest + toolsets) with what is built from it: the
`Executor`, the call pipeline every door uses (`gateway.execution.pipeline.build_pipeline`, with the
safety layer's stages when the gateway keeps a store), the tool runner in front of it, and the provider
adapters. Hot reload swaps in a new generation atomically; a request holds the generation it started with
(`GatewayState.use()`), so a reload never changes the tools or the credentials under a running chat, and the
old executor is closed once its last request is done.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from ..config.hooks_budgets import HookEvent
from ..config.model import AgentConfig, ProviderConfig
from ..errors import ConfigError
from ..execution.executor import Executor
from ..execution.pipeline import build_pipeline
from ..execution.runner import ToolRunner
from ..hooks import ConfiguredHooks
from ..kernel.calls import ToolHooks
from ..kernel.redaction import Redactor
from ..observe.metrics import Metrics
from ..observe.runs import RunObserver
from ..providers import get_adapter
from ..runtime import Runtime, RuntimeHolder
from ..safety.budgets import BudgetBook
from ..store import MemoryStore, Store
from ..toolsets import Toolset
from .errors import APIError

if TYPE_CHECKING:
    from ..safety.guards import Safeguards

logger = logging.getLogger("gateway.server")

AdapterFactory = Callable[[ProviderConfig], Any]


class Holding:
    """A request's hold on a generation (`GatewayState.use`). A class rather than `asynccontextmanager`: every
    call of every door takes one, and the generator-based manager costs several times as much."""

    __slots__ = ("generation",)

    def __init__(self, generation: Generation) -> None:
        self.generation = generation

    async def __aenter__(self) -> Generation:
        self.generation.active += 1
        return self.generation

    async def __aexit__(self, *exc: object) -> None:
        generation = self.generation
        generation.active -= 1
        if generation.retired and generation.active == 0:
            await generation.aclose()


class Generation:
    """One runtime with everything built from it; requests hold it while they run."""

    def __init__(self, runtime: Runtime, *, upstream_transport: httpx.AsyncBaseTransport | None,
                 adapter_factory: AdapterFactory, safety: Safeguards | None = None,
                 hooks: Sequence[ToolHooks] = (), metrics: Metrics | None = None,
                 budget_book: BudgetBook | None = None) -> None:
        self.runtime = runtime
        # One redactor for the generation: the executor teaches it tokens learned at run time, and the pipeline's
        # redaction and audit stages use it.
        self.redactor = Redactor()
        self.executor = Executor(runtime.manifest, runtime.catalog, transport=upstream_transport,
                                 redactor=self.redactor,
                                 connections=safety.connections if safety is not None else None)
        # The configured `hooks:` are the generation's (a reload brings new ones); code-given ToolHooks run first.
        self.hooks = ConfiguredHooks(runtime.manifest,
                                     on_decision=_count_decision(metrics) if metrics is not None else None)
        tool_hooks = [*hooks, self.hooks] if self.hooks else list(hooks)
        self.pipeline = build_pipeline(self.executor, safeguards=safety, hooks=tool_hooks, metrics=metrics)
        self._adapter_factory = adapter_factory
        self._adapters: dict[str, Any] = {}
        self.observer = RunObserver(metrics=metrics, hooks=self.hooks, budgets=runtime.manifest.budgets,
                                    book=budget_book)
        self.runner = ToolRunner(runtime, self.pipeline, self.adapter, observer=self.observer)
        self.cache: dict[Any, Any] = {}
        """Per-generation memo of derived views (rendered tool lists, MCP listings): built once, reused."""
        self.active = 0
        self.retired = False
        self.closed = False

    def adapter(self, provider: ProviderConfig | str) -> Any:
        """The provider adapter (one pooled client per provider and generation)."""
        config = provider if isinstance(provider, ProviderConfig) else self.runtime.manifest.providers[provider]
        adapter = self._adapters.get(config.name)
        if adapter is None:
            adapter = self._adapters[config.name] = self._adapter_factory(config)
        return adapter

    def agent(self, name: str, *, code: str = "unknown_agent", param: str | None = None) -> AgentConfig:
        agent = self.runtime.manifest.agents.get(name)
        if agent is None:
            known = ", ".join(sorted(self.runtime.manifest.agents)) or "none"
            raise APIError(404, f"Unknown agent {name!r}; the agents are: {known}.", code=code, param=param)
        return agent

    def toolset(self, agent: str) -> Toolset:
        self.agent(agent)
        return self.runtime.toolsets.get(agent) or Toolset(agent=agent)

    def memo(self, key: Any, build: Callable[[], Any]) -> Any:
        """A value derived from this generation's runtime, computed on first use."""
        try:
            return self.cache[key]
        except KeyError:
            value = self.cache[key] = build()
            return value

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        await self.executor.aclose()
        await self.hooks.aclose()
        for adapter in self._adapters.values():
            close = getattr(adapter, "aclose", None)
            if close is not None:
                await close()


class GatewayState:
    """The live generation, the reload hook, and the safety layer the doors report to.

    Args:
        holder: the runtime and its reloader.
        upstream_transport: httpx transport for tool calls (tests); provider_transport: for LLM calls.
        adapter_factory: `ProviderConfig -> adapter`, replacing `gateway.providers.get_adapter`.
        safety: the safety layer (audit, approvals, limits, breakers); None: a gateway without a store.
        hooks: `ToolHooks` for every call's pipeline.
    """

    def __init__(self, holder: RuntimeHolder, *, upstream_transport: httpx.AsyncBaseTransport | None = None,
                 provider_transport: httpx.AsyncBaseTransport | None = None,
                 adapter_factory: AdapterFactory | None = None, safety: Safeguards | None = None,
                 hooks: Sequence[ToolHooks] = ()) -> None:
        self.holder = holder
        self.safety = safety
        self.hooks = tuple(hooks)
        self.metrics = Metrics()
        """The gateway's Prometheus metrics (`/metrics`), kept across reloads."""
        self.budget_book = BudgetBook()
        """What agents and clients spent recently, kept across reloads."""
        self._own_store: Store | None = None
        self._upstream_transport = upstream_transport
        self._adapter_factory = adapter_factory or (lambda config: get_adapter(config, transport=provider_transport))
        self.generation = self._build(holder.current)
        self.reloads = 0

    def _build(self, runtime: Runtime) -> Generation:
        return Generation(runtime, upstream_transport=self._upstream_transport, adapter_factory=self._adapter_factory,
                          safety=self.safety, hooks=self.hooks, metrics=self.metrics, budget_book=self.budget_book)

    @property
    def store(self) -> Store:
        """The safety layer's store, or (a gateway built without one) a process-local store of the state's own
        (stored responses and handed-back turns need one)."""
        if self.safety is not None:
            return self.safety.store
        if self._own_store is None:
            self._own_store = MemoryStore()
        return self._own_store

    @property
    def current(self) -> Generation:
        return self.generation

    def use(self) -> Holding:
        """`async with state.use() as generation`: the current generation, held (not closed by a reload) until the
        block ends."""
        return Holding(self.generation)

    async def on_reload(self, runtime: Runtime) -> None:
        """Called by the holder after it swapped in a new runtime: rebuild the executor and adapters."""
        if runtime is self.generation.runtime:
            return
        old, self.generation = self.generation, self._build(runtime)
        self.reloads += 1
        old.retired = True
        if old.active == 0:
            await old.aclose()
        logger.info("reloaded: %d tools, %d agents", len(runtime.catalog), len(runtime.manifest.agents))

    async def aclose(self) -> None:
        self.generation.retired = True
        await self.generation.aclose()


def _count_decision(metrics: Metrics) -> Callable[[HookEvent, str], None]:
    def count(event: HookEvent, decision: str) -> None:
        metrics.hook_decisions.labels(event=event, decision=decision).inc()

    return count


def describe_config_error(exc: ConfigError) -> str:
    lines = [str(exc)] + [f"  {d}" for d in exc.diagnostics]
    return "\n".join(lines)
