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
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ..config.model import AgentConfig, ProviderConfig
from ..kernel.calls import ToolHooks
from ..runtime import Runtime
from ..safety.budgets import BudgetBook
from ..safety.guards import Safeguards
from ..toolsets import Toolset

if TYPE_CHECKING:
    import httpx

    from ..config.hooks_budgets import HookEvent
    from ..execution.executor import Executor
    from ..execution.pipeline import Pipeline
    from ..execution.runner import ToolRunner
    from ..hooks import ConfiguredHooks
    from ..kernel.redaction import Redactor
    from ..observe.metrics import Metrics
    from ..observe.runs import RunObserver
    from ..providers import AdapterPool, ProviderAdapter
    from ..safety.shares import ShareBook


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
        metrics: the gateway's Prometheus metrics; budget_book: what agents and clients spent; runs: where each
            client's runs are counted (a delegation outside a chat is one; None: not counted); sandboxes: where each
            client's code-mode sandboxes are counted across instances (None: in this process) (all outlive a
            generation).
        calls_on_first_use: build the executor, pipeline and runner when a call first needs them, not now.
    """

    def __init__(self, runtime: Runtime, *, upstream_transport: httpx.AsyncBaseTransport | None = None,
                 provider_transport: httpx.AsyncBaseTransport | None = None, safety: Safeguards | None = None,
                 hooks: Sequence[ToolHooks] = (), metrics: Metrics | None = None,
                 budget_book: BudgetBook | None = None, runs: ShareBook | None = None,
                 sandboxes: ShareBook | None = None,
                 calls_on_first_use: bool = False) -> None:
        self.runtime = runtime
        self._upstream_transport = upstream_transport
        self._safety = safety
        self._code_hooks = tuple(hooks)
        self._metrics = metrics
        self._budget_book = budget_book
        self._runs = runs
        self._sandboxes = sandboxes
        self._provider_transport = provider_transport
        self._adapters: AdapterPool | None = None
        if not calls_on_first_use:
            self.runner  # noqa: B018 - the executor, hooks, pipeline, observer and runner, built now
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

    # What runs a call, built from the runtime when first asked (at once unless `calls_on_first_use`: `gateway mcp`
    # lists its tools before it imports the executor, the HTTP client and the stages). Each is then a plain
    # attribute of the instance (`cached_property`), read on every call at no extra cost.

    @cached_property
    def executor(self) -> Executor:
        from ..execution.executor import Executor
        from ..kernel.redaction import Redactor

        # One redactor for the generation: the executor teaches it tokens learned at run time, and the pipeline's
        # redaction and audit stages use it.
        safety = self._safety
        return Executor(self.runtime.manifest, self.runtime.catalog, transport=self._upstream_transport,
                        redactor=Redactor(), limit_concurrency=safety is None,
                        connections=safety.connections if safety is not None else None)

    @cached_property
    def redactor(self) -> Redactor:
        """The generation's redactor (the executor's)."""
        return self.executor.redactor

    @cached_property
    def hooks(self) -> ConfiguredHooks:
        """The configured `hooks:` (a reload brings new ones)."""
        from ..hooks import ConfiguredHooks

        metrics = self._metrics
        return ConfiguredHooks(self.runtime.manifest,
                               on_decision=_count_decision(metrics) if metrics is not None else None)

    @cached_property
    def pipeline(self) -> Pipeline:
        from .composition import build_pipeline

        tool_hooks = [*self._code_hooks, self.hooks] if self.hooks else list(self._code_hooks)  # code-given first
        return build_pipeline(self.executor, safeguards=self._safety, hooks=tool_hooks, metrics=self._metrics)

    @cached_property
    def observer(self) -> RunObserver:
        from ..observe.runs import RunObserver

        manifest = self.runtime.manifest
        return RunObserver(metrics=self._metrics, hooks=self.hooks, budgets=manifest.budgets, book=self._budget_book,
                           code_workers_per_client=manifest.gateway.max_code_workers_per_client,
                           sandboxes=self._sandboxes, redactor=self.redactor)

    @cached_property
    def runner(self) -> ToolRunner:
        from ..execution.runner import ToolRunner

        return ToolRunner(self.runtime, self.pipeline, self.adapter, observer=self.observer, runs=self._runs,
                          approvals=self._safety.approvals if self._safety is not None else None)

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
        built = self.__dict__
        if "executor" in built:  # nothing to close of what was never built
            await self.executor.aclose()
        if "hooks" in built:
            await self.hooks.aclose()
        if self._adapters is not None:
            await self._adapters.aclose()


def _count_decision(metrics: Metrics) -> Callable[[HookEvent, str], None]:
    def count(event: HookEvent, decision: str) -> None:
        metrics.hook_decisions.labels(event=event, decision=decision).inc()

    return count
