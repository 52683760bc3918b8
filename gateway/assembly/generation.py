"""One generation: a runtime with everything built from it, held by the requests that use it.

A `Generation` pairs one `Runtime` (catalog + manifest + toolsets) with the `Executor` (built knowing whether the
safety layer's guard stage limits concurrency), the configured hooks, the call pipeline every door uses
(`build_pipeline`), the run observer (spans, metrics, model hooks, budgets), the tool runner in front of the
pipeline, and the provider adapters (one pooled client per provider). A request holds the generation it started
with (`Holding`), so a reload never changes the tools or the credentials under a running chat, and the old
generation is closed once its last request is done.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from ..config.hooks_budgets import HookEvent
from ..config.model import AgentConfig, ProviderConfig
from ..execution.executor import Executor
from ..execution.runner import ToolRunner
from ..hooks import ConfiguredHooks
from ..kernel.calls import ToolHooks
from ..kernel.redaction import Redactor
from ..observe.runs import RunObserver
from ..runtime import Runtime
from ..safety.budgets import BudgetBook
from ..safety.guards import Safeguards
from ..toolsets import Toolset
from .composition import build_pipeline

if TYPE_CHECKING:
    from ..observe.metrics import Metrics
    from ..providers import AdapterPool, ProviderAdapter


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
    """One runtime with everything built from it; requests hold it while they run.

    Args:
        runtime: the catalog, the manifest and the toolsets.
        upstream_transport: an httpx transport for tool calls (tests); provider_transport: for LLM calls.
        safety: the safety layer, whose stages go into the pipeline; None: a gateway without a store.
        hooks: `ToolHooks` given in code, run before the configured `hooks:`.
        metrics: the gateway's Prometheus metrics; budget_book: what agents and clients spent (both outlive a
            generation).
    """

    def __init__(self, runtime: Runtime, *, upstream_transport: httpx.AsyncBaseTransport | None = None,
                 provider_transport: httpx.AsyncBaseTransport | None = None, safety: Safeguards | None = None,
                 hooks: Sequence[ToolHooks] = (), metrics: Metrics | None = None,
                 budget_book: BudgetBook | None = None) -> None:
        self.runtime = runtime
        # One redactor for the generation: the executor teaches it tokens learned at run time, and the pipeline's
        # redaction and audit stages use it.
        self.redactor = Redactor()
        self.executor = Executor(runtime.manifest, runtime.catalog, transport=upstream_transport,
                                 redactor=self.redactor, limit_concurrency=safety is None,
                                 connections=safety.connections if safety is not None else None)
        # The configured `hooks:` are the generation's (a reload brings new ones); code-given ToolHooks run first.
        self.hooks = ConfiguredHooks(runtime.manifest,
                                     on_decision=_count_decision(metrics) if metrics is not None else None)
        tool_hooks = [*hooks, self.hooks] if self.hooks else list(hooks)
        self.pipeline = build_pipeline(self.executor, safeguards=safety, hooks=tool_hooks, metrics=metrics)
        self._provider_transport = provider_transport
        self._adapters: AdapterPool | None = None
        self.observer = RunObserver(metrics=metrics, hooks=self.hooks, budgets=runtime.manifest.budgets,
                                    book=budget_book)
        self.runner = ToolRunner(runtime, self.pipeline, self.adapter, observer=self.observer)
        if runtime.manifest.gateway.search_embeddings is not None:
            # The first search finds the tools' embeddings ready (computed off this thread meanwhile).
            from ..offer.toolsearch import prepare_search

            prepare_search(runtime.catalog, ((agent, self.toolset(name))
                                             for name, agent in runtime.manifest.agents.items()))
        self.cache: dict[Any, Any] = {}
        """Per-generation memo of derived views (rendered tool lists, MCP listings): built once, reused."""
        self.active = 0
        self.retired = False
        self.closed = False

    @property
    def adapters(self) -> AdapterPool:
        """The provider adapters, made on first use (a door that never calls a model, such as `gateway mcp`,
        never imports the providers)."""
        if self._adapters is None:
            from ..providers import AdapterPool

            self._adapters = AdapterPool(self.runtime.manifest, transport=self._provider_transport)
        return self._adapters

    def adapter(self, provider: ProviderConfig | str) -> ProviderAdapter:
        """The provider adapter (one pooled client per provider and generation)."""
        return self.adapters(provider)

    def agent(self, name: str) -> AgentConfig | None:
        """The agent's configuration; None when agents.yaml has no such agent."""
        return self.runtime.manifest.agents.get(name)

    def toolset(self, agent: str) -> Toolset:
        """The agent's tools (none for an agent without any)."""
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
        if self._adapters is not None:
            await self._adapters.aclose()


def _count_decision(metrics: Metrics) -> Callable[[HookEvent, str], None]:
    def count(event: HookEvent, decision: str) -> None:
        metrics.hook_decisions.labels(event=event, decision=decision).inc()

    return count
