"""The MCP endpoint, built on its first request: the `mcp` SDK is not imported while the gateway starts.

Importing the SDK (pydantic models for every message type) was half of `gateway serve`'s start-up time,
paid even by gateways whose clients never speak MCP. `LazyMCP` stands at `/mcp/{agent}`; the first request
builds the real `MCPEndpoint` and starts its session manager inside the app's lifespan, where it runs until
shutdown like before. The import itself happens in a worker thread right after start-up (`preload`), so
the server answers at once and an MCP client rarely waits for it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup, TaskStatus
from starlette.types import Receive, Scope, Send

logger = logging.getLogger("gateway.server")


class LazyMCP:
    def __init__(self, build: Callable[[], Any], *, preload: Callable[[], None] | None = None) -> None:
        """Parameters: build: returns the `MCPEndpoint` (imports the SDK); preload: imports it, run in a worker
        thread once the app has started, so the first MCP client does not wait for the import either."""
        self._build = build
        self._preload = preload
        self.after_preload: list[Callable[[], None]] = []
        """Run on the event loop once the preload has succeeded (`gateway serve` freezes the GC's heap there)."""
        self._endpoint: Any = None
        self._group: TaskGroup | None = None
        self._lock = anyio.Lock()

    @property
    def endpoint(self) -> Any:
        """The endpoint if a request has built it already, else None."""
        return self._endpoint

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """For the app's lifespan: the session manager, once started, lives until this block ends."""
        async with anyio.create_task_group() as group:
            self._group = group
            if self._preload is not None:
                group.start_soon(self._warm, self._preload)
            try:
                yield
            finally:
                self._group = None
                group.cancel_scope.cancel()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self._endpoint or await self._start()
        await endpoint(scope, receive, send)

    async def _start(self) -> Any:
        async with self._lock:
            if self._endpoint is None:
                if self._group is None:
                    raise RuntimeError("the MCP endpoint needs the app's lifespan to run")
                endpoint = self._build()
                await self._group.start(self._serve, endpoint)
                self._endpoint = endpoint
        return self._endpoint

    async def _warm(self, preload: Callable[[], None]) -> None:
        try:
            await anyio.to_thread.run_sync(preload)
        except Exception:  # noqa: BLE001 - the first MCP request imports it again and reports what is wrong
            logger.warning("preloading the MCP endpoint failed", exc_info=True)
            return
        for callback in self.after_preload:
            callback()

    @staticmethod
    async def _serve(endpoint: Any, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with endpoint.run():
            task_status.started()
            await anyio.sleep_forever()
