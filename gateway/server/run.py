"""Starting the server from the command line: `gateway serve` (uvicorn) and `gateway mcp AGENT` (stdio).

Both load the runtime once, print what is wrong with it in terms of files and lines, and exit 1 when
it is unusable; they never print a traceback for a configuration mistake.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import gc
import json
import logging
import logging.config
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from ..errors import ConfigError
from ..kernel import tracing
from ..runtime import Runtime, RuntimeHolder, load_runtime, missing_inputs

logger = logging.getLogger("gateway.server")

GRACEFUL_SHUTDOWN_SECONDS = 30
"""`gateway serve --graceful-timeout`'s default: on SIGTERM or SIGINT the server stops accepting at once and gives
the requests in flight this long to end; a run still going then is cut (its caller is told the instance stopped
and whether a tool call was sent: `stopping`; a streamed Responses answer is closed unfinished). As Kubernetes'
default grace period, before it sends SIGKILL: raise both for longer runs."""
STARTUP_FAILURE = 3
"""`gateway serve`'s exit status when the app did not start (uvicorn's own for it)."""
KEEP_ALIVE_SECONDS = 65
"""How long an idle client connection stays open. uvicorn's default (5 s) equals httpx's own idle expiry, so a
client reusing a connection just as the server drops it gets a ReadError; longer than the clients' (httpx 5 s,
load balancers 60 s) the server is never the one to close first."""


def load_or_report(specs: Path, agents: Path, *, use_cache: bool = True, out: TextIO = sys.stderr) -> Runtime | None:
    """The runtime, or None after printing every diagnostic that made it unusable."""
    try:
        runtime = load_runtime(specs, agents, use_cache=use_cache)
    except ConfigError as exc:
        # The message's first line says which file is unusable; its diagnostics are `gateway validate`'s lines.
        print(f"gateway: {str(exc).splitlines()[0]}", file=out)
        for diagnostic in exc.diagnostics:
            print(f"  {diagnostic.level}: {diagnostic}", file=out)
        return None
    missing = missing_inputs(specs, agents)
    for line in missing:  # served all the same (files may appear: they are watched), but surely not meant
        print(f"gateway: {line}", file=out)
    errors = [d for d in runtime.diagnostics if d.level == "error"]
    if errors and not missing:
        print(f"gateway: {len(errors)} operation(s) or setting(s) skipped (`gateway validate` lists them)", file=out)
    return runtime


YOUNG_GC_THRESHOLD = 50_000
"""Allocations between two collections of young objects (Python's default: 700). A proxied call allocates a few
hundred short-lived objects, nearly none of them in cycles (reference counting frees them), so the default
collected once or twice per call for nothing (`python -m bench.calls` measures the effect)."""


def tune_gc() -> None:
    """The cyclic GC for a long-running server, called once everything is loaded.

    What is alive now (the catalog, the manifest, the imported modules) lives as long as the server: frozen out
    of the cyclic GC, whose full collections otherwise walk all of it again (tens of ms every thousand calls
    with GitHub's spec loaded); again once the MCP SDK is imported in the background. A reload's objects are
    not frozen, and frozen objects are still freed by reference counting. Young objects are collected every
    `YOUNG_GC_THRESHOLD` allocations (the older generations keep their ratios).
    """
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_GC_THRESHOLD, middle, old)


def log_config(log_format: str = "text") -> dict[str, Any]:
    """uvicorn's logging configuration, with the gateway's own loggers (reloads, refused requests, audit
    trouble) at INFO on the same stderr handler (Python's default shows only warnings of unconfigured loggers,
    so a good reload logged nothing), and the access log written by `log_access`. Every line starts with its
    time in UTC (`gateway.server.loglines`); `log_format="json"` writes one JSON object per line instead."""
    from uvicorn.config import LOGGING_CONFIG

    from .accesslog import LINE_FORMAT
    from .loglines import DRIVER_LOGGER

    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["access"]["()"] = "gateway.server.accesslog.AccessLineFormatter"  # the same line, cheaper
    config["formatters"]["access"]["fmt"] = LINE_FORMAT  # the time first
    config["formatters"]["default"]["()"] = "gateway.server.loglines.LineFormatter"  # quoted text made inert
    config["formatters"]["default"]["fmt"] = "%(asctime)s " + config["formatters"]["default"]["fmt"]
    for handler in config["handlers"].values():  # each line flushed under the lock its write holds
        handler["class"] = "gateway.server.loglines.LineHandler"
    if log_format == "json":
        for name in ("access", "default"):
            config["formatters"][name] = {"()": "gateway.server.loglines.JsonLineFormatter"}
    config["loggers"]["gateway"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    # The store's driver warns when PostgreSQL goes away ("error connecting in 'pool-1': ..."): unconfigured, Python's
    # last-resort handler wrote its two lines bare, with no level and a raw newline, among the gateway's own.
    config["loggers"]["psycopg"] = {"handlers": ["default"], "level": "WARNING", "propagate": False}
    # ... and repeats each warning, two lines each, on every attempt: one line each, once per outage (loglines).
    config.setdefault("filters", {})["driver_lines"] = {"()": "gateway.server.loglines.driver_lines"}
    config["loggers"][DRIVER_LOGGER] = {"filters": ["driver_lines"]}
    # The access line comes from `gateway.server.accesslog` (after the answer has left), through uvicorn's access
    # handler and formatter; uvicorn's own access logger gets no handler, so uvicorn writes no second line.
    config["loggers"]["gateway.access"] = {"handlers": ["access"], "level": "INFO", "propagate": False}
    config["loggers"]["uvicorn.access"] = {"handlers": [], "level": "INFO", "propagate": False}
    return config


def serve_http(specs: Path, agents: Path, *, host: str, port: int, use_cache: bool = True,
               allow_public: bool = False, access_log: bool = True, workers: int = 1,
               graceful_timeout: int = GRACEFUL_SHUTDOWN_SECONDS, log_format: str = "text", **options: Any) -> int:
    """`gateway serve`: one process, or `workers` processes sharing the port and the store (uvicorn's
    supervisor starts each worker, which builds its own app: `worker_app`)."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from ..observe.metrics import MULTIPROCESS_DIR  # not at the top: `gateway mcp` counts nothing
    from .bounded_head import server_options
    from .listening import CANNOT_LISTEN_EXIT, CannotListen, open_listeners
    from .metrics_folder import MetricsFolder

    # Logging as uvicorn will configure it, before the store opens: what it does at start (the migrations it
    # applies) is logged, not dropped by Python's unconfigured loggers (which show warnings only).
    logging.config.dictConfig(log_config(log_format))
    built = _build_app(specs, agents, host=host, use_cache=use_cache, allow_public=allow_public,
                       access_log=access_log, **options)
    if built is None:
        return 1
    app, runtime = built
    try:  # bound before it says where it listens: a taken port is one line of its own, not uvicorn's exit 3
        listeners = open_listeners(host, port, shared=workers > 1)
    except CannotListen as exc:
        asyncio.run(app.state.gateway_safety.aclose())
        print(f"gateway: {exc}", file=sys.stderr)
        return CANNOT_LISTEN_EXIT
    port = listeners[0].getsockname()[1]  # `--port 0`: the one the system chose (the same on each address)
    shown = f"[{host}]" if ":" in host else host
    each = [_shown(sock.getsockname()[0]) for sock in listeners]
    where = f" ({' and '.join(each)})" if each != [shown] else ""  # `localhost`: each address it listens on
    summary = (f"{len(runtime.catalog)} tools, {len(runtime.manifest.agents)} agents "
               f"({', '.join(runtime.manifest.agents) or 'none'}) on http://{shown}:{port}{where} "
               f"(console: http://{shown}:{port}/console)" + (f" ({workers} workers)" if workers > 1 else ""))
    if log_format == "json":  # a log shipper reads one object per line: what was loaded is one of them
        logger.info("%s", summary)
    else:
        print(f"gateway: {summary}", file=sys.stderr)
    serving = _serving_rows(host, port, workers, graceful_timeout)
    app.state.gateway_serving = serving
    target: Any = app
    metrics_folder: MetricsFolder | None = None
    if workers > 1:
        # The parent checked everything (and applied migrations) above; each worker does it again for itself.
        asyncio.run(app.state.gateway_safety.aclose())
        if not os.environ.get(MULTIPROCESS_DIR):
            # /metrics counts every worker's work, whichever worker answers (gateway.observe.metrics); the folder
            # goes with this process however it ends (`metrics_folder`).
            metrics_folder = MetricsFolder()
            os.environ[MULTIPROCESS_DIR] = metrics_folder.path
        os.environ[_WORKER_OPTIONS] = json.dumps({"specs": str(specs), "agents": str(agents), "host": host,
                                                  "use_cache": use_cache, "allow_public": allow_public,
                                                  "access_log": access_log, "supervisor": os.getpid(),
                                                  "metrics_folder": metrics_folder and metrics_folder.path,
                                                  "serving": serving})
        target = "gateway.server.run:worker_app"
    # uvicorn stops accepting on SIGINT/SIGTERM and lets in-flight requests finish (up to the grace period),
    # then the app's lifespan closes the executors and provider clients.
    # anyio (under the MCP SDK) asks sniffio which event loop runs on every checkpoint, event and memory-stream
    # operation; unset, each answer probes asyncio.current_task() behind an import. Every task of uvicorn's
    # (asyncio) loop inherits this context, and it is reset once the loop is gone.
    # (Without sniffio installed anyio asks asyncio.get_running_loop() itself, which is cheap already.)
    # What `uvicorn.run` does, with the socket bound above: one Server on it, or its supervisor's workers sharing it.
    config = uvicorn.Config(target, host=host, port=port, lifespan="on", log_level="info",
                            log_config=log_config(log_format), timeout_graceful_shutdown=graceful_timeout,
                            timeout_keep_alive=KEEP_ALIVE_SECONDS, factory=workers > 1,
                            workers=workers if workers > 1 else None, **server_options())
    server = uvicorn.Server(config)
    try:
        with _asyncio_declared():
            if workers > 1:
                Multiprocess(config, sockets=listeners).run()
            else:
                server.run(sockets=listeners)
    except KeyboardInterrupt:  # as `uvicorn.run`: Ctrl-C is how a terminal's server ends
        pass
    finally:
        for listener in listeners:
            listener.close()
        if metrics_folder is not None:
            metrics_folder.close()
    if workers == 1 and not server.started:  # the app did not start (its lifespan failed): as `uvicorn.run` says it
        return STARTUP_FAILURE
    return 0


def _serving_rows(host: str, port: int, workers: int, graceful_timeout: int) -> list[dict[str, Any]]:
    """`gateway serve`'s own settings as `GET /settings` lists them beside the process's (`gateway.config.layers`
    rows): read at start only, from the command line or their defaults (`gateway serve --help`)."""
    rows = []
    for key, value, default in (("host", host, "127.0.0.1"), ("port", port, 8080), ("workers", workers, 1),
                                ("graceful_timeout", graceful_timeout, GRACEFUL_SHUTDOWN_SECONDS)):
        given = value != default
        rows.append({"key": key, "value": value, "layer": "command line" if given else "default",
                     "source": f"gateway serve --{key.replace('_', '-')}" if given else "built in"})
    return rows


def _shown(address: str) -> str:
    return f"[{address}]" if ":" in address else address


_WORKER_OPTIONS = "GATEWAY_WORKER_OPTIONS"


def worker_app() -> Any:
    """The app of one `gateway serve --workers N` worker process (uvicorn calls it in each); the worker stops when
    its supervisor is gone (`supervisor_watch`)."""
    from .metrics_folder import leave
    from .supervisor_watch import AfterOrphanedShutdown, watch_supervisor

    options = json.loads(os.environ[_WORKER_OPTIONS])
    orphaned = watch_supervisor(options["supervisor"])  # first: a supervisor killed while this loads is seen too
    built = _build_app(Path(options["specs"]), Path(options["agents"]), host=options["host"],
                       use_cache=options["use_cache"], allow_public=options["allow_public"],
                       access_log=options["access_log"])
    if built is None:
        raise SystemExit(1)
    built[0].state.gateway_serving = options["serving"]
    folder = options.get("metrics_folder")
    if folder is None:
        return built[0]
    # Orphaned, the worker takes its metrics files (and the folder, when it is the last) with it: nobody is left to
    # remove them (`metrics_folder`).
    return AfterOrphanedShutdown(built[0], orphaned, functools.partial(leave, folder))


def _build_app(specs: Path, agents: Path, *, host: str, use_cache: bool, allow_public: bool, access_log: bool,
               **options: Any) -> tuple[Any, Runtime] | None:
    """The app with its safety layer, or None after printing why not (a bad manifest, an unreachable store)."""
    from .app import create_app
    from .listening import check_bind
    from .supervision import Safety

    runtime = load_or_report(specs, agents, use_cache=use_cache)
    if runtime is None:
        return None
    try:  # client keys, rate limits, audit, approvals (gateway.server.supervision)
        check_bind(host, runtime.manifest.clients, allow_public=allow_public)
        safety = Safety.open(runtime, allow_public=allow_public)
    except ConfigError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return None
    if tracing.configure_from_environment():  # before the app: the MCP door keeps the SDK's spans when traced
        print("gateway: exporting traces over OTLP (OTEL_* variables)", file=sys.stderr)
    app = create_app(RuntimeHolder(runtime), host=host, access_log=access_log, **{**safety.app_options(), **options})
    app.state.gateway_safety = safety
    tune_gc()
    app.state.mcp.after_preload.append(gc.freeze)
    return app, runtime


def migrate_store(agents: Path, *, store: str | None = None, out: TextIO = sys.stderr) -> int:
    """`gateway migrate`: bring the PostgreSQL store named by agents.yaml (or `store`) up to this version's schema."""
    from ..config.loader import load_manifest
    from ..store.postgres_schema import LATEST, migrate, safe_url

    try:
        location = store
        if location is None:
            manifest, _ = load_manifest(agents)
            location = manifest.gateway.store_location(agents.parent)
        if not location.startswith(("postgresql://", "postgres://")):
            print(f"gateway: the store {location} needs no migrations (SQLite and memory: are made on open)",
                  file=out)
            return 0
        applied = migrate(location)
    except ConfigError as exc:
        print(f"gateway: {exc}", file=out)
        return 1
    done = f"applied {', '.join(map(str, applied))}" if applied else "nothing to apply"
    print(f"gateway: {safe_url(location)} at schema version {LATEST} ({done})", file=out)
    return 0


@contextlib.contextmanager
def _asyncio_declared() -> Iterator[None]:
    try:
        import sniffio
    except ImportError:
        yield
        return
    token = sniffio.current_async_library_cvar.set("asyncio")
    try:
        yield
    finally:
        sniffio.current_async_library_cvar.reset(token)


def serve_mcp_stdio(specs: Path, agents: Path, agent: str, *, use_cache: bool = True) -> int:
    from ..assembly import GatewayState
    from .loglines import quiet_drivers
    from .mcp.stdio import serve_stdio

    # stdout is the MCP wire: every log line goes to stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    quiet_drivers()  # the store's driver: one line per warning, once per outage, as under `serve`
    runtime = load_or_report(specs, agents, use_cache=use_cache)
    if runtime is None:
        return 1
    if agent not in runtime.manifest.agents:
        known = ", ".join(runtime.manifest.agents) or "none"
        print(f"gateway: unknown agent {agent!r}; the agents in {agents} are: {known}", file=sys.stderr)
        return 2

    # The safeguards every door shares, and users' connections when a call first needs them; not the HTTP half
    # (`gateway.server.supervision`: client keys, the resource server, Starlette's routing, httpx), which a stdio
    # listing never uses and whose import cost a desktop client waits for.
    from ..safety.serving import ServingSafeguards

    try:  # approvals wait in the store (decide them with `gateway approvals`); every call is audited
        safety = ServingSafeguards.open(runtime)
    except ConfigError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 1

    tracing.configure_from_environment()
    # As `serve` does once loaded: the catalog lives as long as the process, so the cyclic GC's full collections
    # need not walk it (one such walk over GitHub's catalog landed before or after the first listing, depending on
    # how much was allocated on the way).
    tune_gc()

    async def main() -> None:
        holder = RuntimeHolder(runtime)
        # No /metrics over stdio; what runs a call is built at the first call, after the first listing.
        state = GatewayState(holder, safety=safety, metrics=False, calls_on_first_use=True)
        holder.on_reload.append(state.on_reload)
        watcher = asyncio.create_task(holder.watch())
        try:
            await serve_stdio(state, agent)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            await state.aclose()
            await safety.aclose()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    return 0
