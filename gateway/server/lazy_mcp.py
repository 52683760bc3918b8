"""The MCP endpoint, built on its first request: the `mcp` SDK is not imported while the gateway starts.

Importing the SDK (pydantic models for every message type) was half of `gateway serve`'s start-up time,
paid even by gateways whose clients never speak MCP. `LazyMCP` stands at `/mcp/{agent}`; the first request
builds the real `MCPEndpoint` and starts its session manager inside the app's lifespan, where it runs until
shutdown like before.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus
from starlette.types import Receive, Scope, Send


class LazyMCP:
    def __init__(self, build: Callable[[], Any]) -> None:
        """Parameters: build: returns the `MCPEndpoint` (imports the SDK)."""
        self._build = build
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

    @staticmethod
    async def _serve(endpoint: Any, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with endpoint.manager.run():
            task_status.started()
            await anyio.sleep_forever()
