"""`GET /settings`: the settings a running gateway uses, for an admin (`gateway settings --url`).

`gateway settings` alone reads agents.yaml with the terminal's environment: what the file says, which is not what a
running instance uses when its environment differs (a `${VAR}` set there and not here, a `GATEWAY_*` variable), or
when the file changed since it loaded (a reload refused, or not yet tried: it runs the previous one), or when the
file is broken now. This route answers from inside the running process: the manifest of the generation it serves,
each value with the layer and line it was loaded from (`Manifest.key_sources`: the lines of the file as it was then,
not a copy of it), and whether the file now reads as that manifest, with its errors when it does not load (read with
the process's own environment, in a worker thread).
The rows are `gateway settings --json`'s, secrets `set` or `unset` only; only an admin key (or anyone, on a gateway
without `clients`, as its other routes) may read them: they name every agent, api and client.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Literal

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..catalog import Diagnostic
from ..config.layers import Setting, loaded_settings, process_settings
from ..config.loader import read_text
from ..config.settings import GatewaySettings, differ_from_start
from ..configuration import parse_configuration
from ..runtime import Runtime
from .api_errors import APIError
from .auth import rights_of
from .routes import state_of

PATH = "/settings"


async def running_settings(request: Request) -> Response:
    if not rights_of(request.scope).admin:
        raise APIError(403, "Only an admin key (clients.<name>.admin: true) may read the running settings: they name "
                            "every agent, api and client.", code="admin_only")
    agent = request.query_params.get("agent") or None
    state = state_of(request)
    runtime = state.current.runtime
    if agent is not None and agent not in runtime.manifest.agents:
        raise APIError(404, f"The running gateway has no agent {agent!r}.", code="unknown_agent", param="agent")
    holder = state.holder
    rows, file_reads, errors = await anyio.to_thread.run_sync(settings_of, runtime, holder.started_with, agent)
    return JSONResponse({
        "data": [row.as_json() for row in rows],
        "agents_yaml": file_reads,
        "agents_yaml_errors": [error.to_dict() for error in errors],
        "loaded_at": _when(runtime.loaded_at),
        "reloads": holder.generation,
        "reload_refused": str(holder.last_error) if holder.last_error is not None else None,
    })


FileReads = Literal["as loaded", "changed", "broken", "unreadable"]


def settings_of(runtime: Runtime, started: GatewaySettings,
                agent: str | None) -> tuple[list[Setting], FileReads, list[Diagnostic]]:
    """The running process's settings and its manifest's, each value with the line it was loaded from
    (`loaded_settings`), and how agents.yaml reads now: `as loaded`, `changed` (since the load: the values and lines
    shown are still the load's), `broken` or `unreadable` (with the file's errors, as `gateway validate` words
    them: the gateway runs on what it loaded). A setting read at start only (`gateway.store`, ...) that a reload
    changed shows the value the process still uses."""
    process = [_as_run(row, runtime) for row in process_settings(specs=None, agents=None,
                                                                  no_cache=not runtime.use_cache)]
    running = runtime.manifest
    kept = differ_from_start(started, running.gateway)
    if kept:
        running = running.model_copy(update={"gateway": running.gateway.model_copy(
            update={name: getattr(started, name) for name in kept})})
    at_start = tuple(f"gateway.{name}" for name in kept)
    settings = [Setting(row.key, row.value, row.layer, f"{row.source} (read at start: agents.yaml now says "
                                                       "otherwise, which a restart applies)")
                if any(row.key == key or row.key.startswith(f"{key}.") for key in at_start) else row
                for row in loaded_settings(running, agent=agent)]
    path = runtime.agents_path
    text, file, unreadable = read_text(path)
    if unreadable is not None:
        if runtime.manifest.key_sources is None and not path.exists():  # started without one, and still none
            return [*process, *settings], "as loaded", []
        return [*process, *settings], "unreadable", [unreadable]
    # Checked against the running specs, as a reload would check it: a tool selection naming no spec is broken too.
    now, _, diagnostics = parse_configuration(text, catalog=runtime.catalog, file=file, base_dir=path.parent)
    errors = [d for d in diagnostics if d.level == "error"]
    if errors:
        return [*process, *settings], "broken", errors
    return [*process, *settings], "as loaded" if now == runtime.manifest else "changed", []


def _as_run(row: Setting, runtime: Runtime) -> Setting:
    """The process setting `row` as the runtime was loaded with it: the folder and file it serves (given on the
    command line when neither the environment nor the default names them)."""
    served = {"specs": runtime.specs_dir, "agents": runtime.agents_path}.get(row.key)
    if served is None or _same_path(Path(str(row.value)), served):
        return row
    return Setting(row.key, str(served), "command line", f"gateway serve --{row.key}")


def _same_path(one: Path, other: Path) -> bool:
    return os.path.abspath(one) == os.path.abspath(other)


def _when(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))
