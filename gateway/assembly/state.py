"""The live gateway: the current generation, its swap on a hot reload, and what outlives a generation.

`GatewayState` is what every door holds: the HTTP app (`create_app`), `gateway mcp` over stdio, and the commands
(`open_local` for `gateway call` and `gateway chat`; `gateway approvals` and `gateway audit` resume runs on it).
It keeps the safety layer, the metrics and the budget book across reloads, and builds a new `Generation` from
each runtime the holder swaps in.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from ..kernel.calls import ToolHooks
from ..runtime import Runtime, RuntimeHolder
from ..safety.budgets import BudgetBook
from ..safety.guards import Safeguards
from ..safety.shares import RUNS, SANDBOXES, LocalShares
from ..store import MemoryStore, Store
from .generation import Generation, Holding

if TYPE_CHECKING:
    import httpx

    from ..observe.metrics import Metrics

logger = logging.getLogger("gateway.server")


class GatewayState:
    """The live generation, the reload hook, and the safety layer the doors report to.

    Args:
        holder: the runtime and its reloader.
        upstream_transport: httpx transport for tool calls (tests); provider_transport: for LLM calls.
        safety: the safety layer (audit, approvals, limits, breakers); None: a gateway without a store.
        hooks: `ToolHooks` for every call's pipeline.
        metrics: count requests and tool calls for `/metrics`; False for a door that has no `/metrics` to read them
            (`gateway mcp` over stdio: nothing counted, `prometheus_client` not even imported).
        calls_on_first_use: each generation builds what runs a call (executor, pipeline, runner) when a call first
            needs it (`gateway mcp`: its first listing does not wait for them); the safety layer is open already.
    """

    def __init__(self, holder: RuntimeHolder, *, upstream_transport: httpx.AsyncBaseTransport | None = None,
                 provider_transport: httpx.AsyncBaseTransport | None = None, safety: Safeguards | None = None,
                 hooks: Sequence[ToolHooks] = (), metrics: bool = True, calls_on_first_use: bool = False) -> None:
        self.holder = holder
        self.safety = safety
        self.hooks = tuple(hooks)
        self.metrics: Metrics | None = None
        if metrics:
            from ..observe.metrics import Metrics

            self.metrics = Metrics()
        """The gateway's Prometheus metrics (`/metrics`), kept across reloads."""
        self.budget_book = safety.budget_book() if safety is not None else BudgetBook()
        """What agents and clients spent recently, kept across reloads (in Redis with `gateway.redis`)."""
        shared = safety.shared if safety is not None else lambda kind: None
        self.runs = shared(RUNS) or LocalShares(RUNS)
        """Each client's chat runs in flight under `gateway.max_runs_per_client`, kept across reloads (in Redis with
        `gateway.redis`)."""
        self.sandboxes = shared(SANDBOXES)
        """Each client's code-mode sandboxes under `gateway.max_code_workers_per_client` across instances (Redis with
        `gateway.redis`); None: the sandbox's own count in this process (`gateway.codemode.sandbox`)."""
        self._own_store: Store | None = None
        self._upstream_transport = upstream_transport
        self._provider_transport = provider_transport
        self._calls_on_first_use = calls_on_first_use
        self.generation = self._build(holder.current)
        self.reloads = 0

    def _build(self, runtime: Runtime) -> Generation:
        return Generation(runtime, upstream_transport=self._upstream_transport,
                          provider_transport=self._provider_transport, safety=self.safety, hooks=self.hooks,
                          metrics=self.metrics, budget_book=self.budget_book, runs=self.runs,
                          sandboxes=self.sandboxes, calls_on_first_use=self._calls_on_first_use)

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
        # The runtime's holder said "reloaded: N agents, M tools" already; a second line said it again in other words.
        logger.debug("rebuilt the pipeline for reload %d", self.reloads)

    async def aclose(self) -> None:
        self.generation.retired = True
        await self.generation.aclose()


@contextlib.asynccontextmanager
async def open_local(runtime: Runtime, *, store: str | None = None) -> AsyncIterator[GatewayState]:
    """`async with open_local(runtime) as state`: the gateway a terminal command runs in-process, with the same
    pipeline as `gateway serve`.

    It opens the store agents.yaml names (`gateway.store`, default `.gateway/state.db` beside it; `store`
    overrides it), so the command's calls are audited, rate limited, guarded by the breakers and held for approval
    exactly as on the server's doors, and `gateway audit` / `gateway approvals` see them.
    """
    # Log records are the terminal's own; the server scrubs its process's records, a command needs not.
    safety = Safeguards.open(runtime, store=store, redact_log_records=False)
    state = GatewayState(RuntimeHolder(runtime), safety=safety)
    try:
        yield state
    finally:
        try:
            await state.aclose()
        finally:
            await safety.aclose()
