"""The Starlette application: every door of the gateway on one compiled runtime.

`create_app(holder)` wires the routes (chat, models, agents, tools, direct calls, MCP, the
gateway's own OpenAPI document, health), OpenAI-shaped errors, the request size limit, and a
lifespan that runs the MCP session manager and the hot-reload watcher and closes every pooled
client on shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio.to_thread
import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, request_response

from ..assembly import GatewayState, Generation
from ..kernel.calls import ToolHooks
from ..runtime import RuntimeHolder
from ..safety.guards import Safeguards
from .api_document import SAFETY_PATHS, openapi_document, tool_call_paths
from .api_errors import FastJSONResponse, error_handlers
from .auth import PUBLIC_PATHS, AgentGate, path_agent
from .chat import chat_completions
from .cut_doors import CutDoor, answer_cut
from .direct_call import PATH as DIRECT_CALL_PATH
from .direct_call import DirectCall
from .disconnect import DisconnectWatch
from .envelope import RequestEnvelope
from .hosts import PolicySource
from .mcp.lazy import LazyMCP
from .mcp.routing import PATHS as MCP_PATHS
from .mcp.routing import routed_agent
from .metrics_door import metrics_endpoint
from .responses import create_response, get_response
from .routes import SEARCH_ROUTE, render_agent_tools
from .routes import routes as plain_routes
from .stopping import CutRequests
from .supervision import Safety

logger = logging.getLogger("gateway.server")

DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024


def create_app(
    holder: RuntimeHolder,
    *,
    host: str | None = "127.0.0.1",
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    upstream_transport: httpx.AsyncBaseTransport | None = None,
    provider_transport: httpx.AsyncBaseTransport | None = None,
    watch: bool = True,
    watch_interval: float = 1.0,
    middleware: Sequence[Middleware] = (),
    access_log: bool = False,
    extra_routes: Sequence[BaseRoute] = (),
    safety: Safeguards | None = None,
    hooks: Sequence[ToolHooks] = (),
    watch_disconnects: bool = False,
) -> Starlette:
    """Build the gateway's ASGI app.

    Parameters:
        holder: the runtime (catalog, manifest, toolsets) and its reloader.
        host: the address the server binds; on loopback every door refuses foreign `Host`/`Origin` headers
            (DNS rebinding, cross-site requests; `gateway.server.hosts`), as the MCP endpoint does.
        max_body_bytes: requests with a larger body get 413.
        upstream_transport: httpx transport for tool calls (tests); provider_transport: for LLM calls.
        watch: reload specs/ and agents.yaml on change (executors are rebuilt on each reload).
        middleware: extra Starlette middleware, outermost first (client keys, rate limits).
        access_log: log one line per request (`gateway.server.accesslog`; `gateway serve` turns it on).
        extra_routes: more routes (approvals, audit).
        safety: the safety layer (`gateway.server.supervision.Safety`): its stages go into every call's pipeline (audit,
            approvals, rate limits, breakers) and finished chat runs are reported to it. None: no store.
        hooks: `ToolHooks` around every tool call (`gateway.execution.pipeline`).
        watch_disconnects: cancel a POST whose client goes away (`gateway.server.disconnect`), in the request
            envelope (one layer with it, not a middleware of its own).
    """
    state = GatewayState(holder, upstream_transport=upstream_transport, provider_transport=provider_transport,
                         safety=safety, hooks=hooks)
    def build_mcp() -> Any:
        from .mcp.endpoint import MCPEndpoint  # the SDK is imported on the first MCP request, not at start-up

        return MCPEndpoint(state, host=host, max_body_bytes=max_body_bytes)

    mcp = LazyMCP(build_mcp, preload=_import_mcp)
    cut = CutRequests()  # the POSTs in flight; those the stopping instance cuts are told so (`stopping`)
    policy = PolicySource(host, state.current.runtime.manifest)  # the envelope's; `follow`s every reload

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        watcher: asyncio.Task[Any] | None = None
        # Runs a dead process left between an approval's decision and its end are put right (reopened or failed).
        sweeper = asyncio.create_task(safety.sweep()) if safety is not None else None
        async with mcp.running():
            # Any reload, watched or not, swaps the host policy and rebuilds the executors, in the same turn of the
            # loop (both synchronously before the first await): no request sees one without the other.
            holder.on_reload.append(policy.follow)
            holder.on_reload.append(state.on_reload)
            if watch:
                watcher = asyncio.create_task(holder.watch(interval=watch_interval))
            try:
                yield
            finally:
                # The calls uvicorn cut are answered so (`stopping`), their rows written, before closing.
                await cut.drained()
                for task in (watcher, sweeper):
                    if task is not None:
                        task.cancel()
                        await asyncio.gather(task, return_exceptions=True)
                holder.on_reload.remove(state.on_reload)
                holder.on_reload.remove(policy.follow)
                await state.aclose()

    if isinstance(safety, Safety):  # the browser console signs in with the safety layer's client keys
        from .console import mount_console  # its templates are loaded by a server only

        extra_routes = [*extra_routes, mount_console(safety)]
    mounted = {getattr(route, "path", None) for route in extra_routes}
    documented = {path: item for path, item in SAFETY_PATHS.items() if path in mounted}

    def openapi_response(generation: Generation, base_url: str) -> Response:
        tool_paths = None
        if not generation.runtime.manifest.clients:  # open to all anyway: each tool's exact body is listed
            tool_paths = generation.memo("openapi_tool_paths", lambda: tool_call_paths({
                agent: render_agent_tools(generation, agent, "json") for agent in generation.runtime.manifest.agents}))
        return FastJSONResponse(openapi_document(base_url, documented, tool_paths=tool_paths))

    async def openapi_json(request: Request) -> Response:
        # Worked out in a worker thread: the tools' bodies are as large as the specs make them (21 MB for a 10 MB
        # spec of 20,000 operations: /healthz held 5.9 s), and this page asks for no key.
        return await anyio.to_thread.run_sync(openapi_response, state.current, str(request.base_url).rstrip("/"))

    # The router tries routes in order: the two doors every tool call takes come first (no other path matches them;
    # tool search, whose path the direct call's also matches, just before them: see SEARCH_ROUTE).
    # Each route but chat and responses (which admit the `model` of their body themselves), the direct call (which
    # admits its routed agent itself: no gate's frame around every call) and the public ones admits its agent.
    routes: list[BaseRoute] = [
        *gated([SEARCH_ROUTE]),
        Route(DIRECT_CALL_PATH, DirectCall(state, answer_cut), methods=["POST"]),
        *gated([Route(path, mcp) for path in MCP_PATHS], agent_of=routed_agent),  # `/mcp?agent=` too
        Route("/v1/chat/completions", CutDoor(request_response(chat_completions)), methods=["POST"]),
        # admits its body's `model` itself, too
        Route("/v1/responses", CutDoor(request_response(create_response)), methods=["POST"]),
        *gated([Route("/v1/responses/{id}", get_response, methods=["GET"]), *plain_routes(),
                 Route("/metrics", metrics_endpoint, methods=["GET"])]),
        Route("/openapi.json", openapi_json, methods=["GET"]),
        *gated(extra_routes),
    ]
    app = Starlette(
        routes=routes,
        # The envelope, before anything else can answer: the caller's traceparent continued; foreign hosts, origins
        # and non-JSON bodies refused; the size limit (no other middleware buffers more); every request counted by
        # door and status and its access line written.
        middleware=[Middleware(RequestEnvelope, policy=policy, max_body_bytes=max_body_bytes,
                               metrics=state.metrics,
                               access_log=logging.getLogger("gateway.access") if access_log else None,
                               watch=DisconnectWatch() if watch_disconnects else None, cut=cut),
                    *middleware],
        exception_handlers=error_handlers(),
        lifespan=lifespan,
    )
    app.state.gateway = state
    app.state.mcp = mcp
    return app


def gated(routes: Sequence[BaseRoute], *, agent_of: Callable[[Any], str | None] = path_agent) -> list[BaseRoute]:
    """`routes` with an `AgentGate` on each (but the public paths): the routed agent is admitted after routing."""
    out: list[BaseRoute] = []
    for route in routes:
        if isinstance(route, Route) and route.path not in PUBLIC_PATHS:
            route = Route(route.path, route.endpoint, methods=sorted(route.methods or ()) or None, name=route.name,
                          include_in_schema=route.include_in_schema,
                          middleware=[Middleware(AgentGate, agent_of=agent_of)])
        out.append(route)
    return out


def _import_mcp() -> None:
    from .mcp import endpoint  # noqa: F401 - warms the import for LazyMCP
