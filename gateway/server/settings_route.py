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

import json
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
from ..config.model import Manifest
from ..config.settings import differ_from_start
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
    rows, file_reads, errors, restart = await anyio.to_thread.run_sync(settings_of, runtime, holder.started_manifest,
                                                                       agent)
    serving = getattr(request.app.state, "gateway_serving", None) or []  # `gateway serve`'s own (not in tests' apps)
    return JSONResponse({
        "data": [*serving, *(row.as_json() for row in rows)],
        "agents_yaml": file_reads,
        "agents_yaml_errors": [error.to_dict() for error in errors],
        "loaded_at": _when(runtime.loaded_at),
        "reloads": holder.generation,
        "reload_refused": str(holder.last_error) if holder.last_error is not None else None,
        "restart_needed": restart,
    })


FileReads = Literal["as loaded", "changed", "broken", "unreadable"]


def settings_of(runtime: Runtime, started: Manifest,
                agent: str | None) -> tuple[list[Setting], FileReads, list[Diagnostic], list[str]]:
    """The running process's settings and its manifest's, each value with the line it was loaded from
    (`loaded_settings`); how agents.yaml reads now: `as loaded`, `changed` (since the load: the values and lines
    shown are still the load's), `broken` or `unreadable` (with the file's errors, as `gateway validate` words
    them: the gateway runs on what it loaded); and the settings read at start only (`gateway.store`, ...) whose
    value in agents.yaml now is not the one the process runs on, which only a restart applies. Each of those shows
    the value the process started with and where that came from, and beside it what the file says now and at which
    line (before: the start value beside the reloaded file's line; a file changed but not reloaded said nothing)."""
    process = [_as_run(row, runtime) for row in process_settings(specs=None, agents=None,
                                                                  no_cache=not runtime.use_cache)]
    running = runtime.manifest
    path = runtime.agents_path
    text, file, unreadable = read_text(path)
    if unreadable is not None:
        reads: FileReads = "as loaded" if running.key_sources is None and not path.exists() else "unreadable"
        errors = [] if reads == "as loaded" else [unreadable]  # started without one, and still none: as loaded
        now = running
    else:
        # Checked against the running specs, as a reload would check it: a tool selection naming no spec is broken.
        now, _, diagnostics = parse_configuration(text, catalog=runtime.catalog, file=file, base_dir=path.parent)
        errors = [d for d in diagnostics if d.level == "error"]
        reads = "broken" if errors else "as loaded" if now == running else "changed"
        if errors:
            now = running  # what a broken file would give is not known: only a reload that took it is compared
    restart = differ_from_start(started.gateway, now.gateway)
    settings = loaded_settings(running, agent=agent)
    if restart:
        settings = _as_started(settings, started, now, tuple(f"gateway.{name}" for name in restart))
    return [*process, *settings], reads, errors, [f"gateway.{name}" for name in restart]


def _as_started(rows: list[Setting], started: Manifest, now: Manifest, keys: tuple[str, ...]) -> list[Setting]:
    """`rows` with those under `keys` (settings read at start only) as the process started with them, each saying
    what agents.yaml gives now and where."""
    def under(key: str) -> bool:
        return any(key == prefix or key.startswith(f"{prefix}.") for prefix in keys)

    at_start = {row.key: row for row in loaded_settings(started) if under(row.key)}
    on_disk = {row.key: row for row in loaded_settings(now) if under(row.key)}
    out: list[Setting] = []
    for row in rows:
        if not under(row.key):
            out.append(row)
            continue
        first = at_start.get(row.key, row)
        disk = on_disk.get(row.key)
        if disk is None or disk.value == first.value:
            out.append(first)
            continue
        value = disk.value if isinstance(disk.value, str) else json.dumps(disk.value, default=str)
        out.append(Setting(first.key, first.value, first.layer,
                           f"{first.source} (read at start only: agents.yaml now gives {value} ({disk.source}), "
                           "which a restart applies)"))
    return out


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
