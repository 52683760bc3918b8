"""The reloadable state of a gateway: one compiled catalog, the manifest and every agent's toolset.

`load_runtime(specs_dir, agents_path)` builds a `Runtime`; a `RuntimeHolder` keeps the current one
and, while `watch()` runs, swaps in a new one when `specs/` or `agents.yaml` change. The server only
holds the holder and reads `holder.current` once per request, so a request never sees half of a reload.

A reload is refused, and the last good runtime keeps serving, when the new manifest has errors or
when a spec that compiled before now yields no api at all while its file is still there (a broken
edit, not a deletion). The refusal is logged on `gateway.runtime` and kept in `holder.last_error`; putting
the files back as they were (the content that serves) ends it. A reload that takes a tool away from an agent
because its spec no longer has the operation is made, and logged at WARNING and kept in `holder.warnings`.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.to_thread

from .catalog import AgentTool, Catalog, Diagnostic
from .config.model import AgentConfig, Manifest
from .config.settings import GatewaySettings, differ_from_start
from .configuration import load_configuration
from .errors import ConfigError
from .toolsets import Toolset

logger = logging.getLogger("gateway.runtime")

ReloadCallback = Callable[["Runtime"], Awaitable[None] | None]


@dataclass(slots=True, kw_only=True)
class Runtime:
    """Everything a request needs that comes from configuration; immutable once built."""

    catalog: Catalog
    manifest: Manifest
    toolsets: dict[str, Toolset]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    """The catalog's and the manifest's diagnostics (warnings only when the manifest loaded)."""
    specs_dir: Path
    agents_path: Path
    use_cache: bool = True
    fingerprint: str = ""
    """A hash of every input file's name and content at load time."""
    loaded_at: float = field(default_factory=time.time)

    @property
    def agents(self) -> list[str]:
        return list(self.manifest.agents)

    def agent(self, name: str) -> AgentConfig:
        """The agent's configuration; KeyError naming the known agents when there is none."""
        try:
            return self.manifest.agents[name]
        except KeyError:
            raise KeyError(f"no agent named {name!r} (known: {', '.join(self.manifest.agents) or 'none'})") from None

    def toolset(self, agent: str) -> Toolset:
        self.agent(agent)
        return self.toolsets[agent]

    def tools(self, agent: str) -> list[AgentTool]:
        return list(self.toolset(agent))

    def tool(self, agent: str, name: str) -> AgentTool | None:
        return self.toolset(agent).get(name)


def refusal_lines(error: ConfigError) -> list[str]:
    """Why a reload was refused, for /healthz and the console: the message (it lists the manifest's errors), then
    the diagnostics' errors it does not name; a warning about the refused files is no reason for the refusal."""
    message = str(error)
    return [message, *(str(d) for d in error.diagnostics if d.level == "error" and str(d) not in message)]


def missing_inputs(specs_dir: Path, agents_path: Path) -> list[str]:
    """What a command run from another folder than the project's lacks, worded so it can be fixed (empty: the
    specs folder and agents.yaml are both there)."""
    missing = []
    specs, agents = Path(specs_dir).resolve(), Path(agents_path).resolve()
    if not specs.is_dir():
        missing.append(f"no specs folder at {specs}: pass --specs DIR (or set GATEWAY_SPECS), or run this where "
                       "specs/ is")
    if not agents.exists():
        missing.append(f"no agents manifest at {agents}, so no agent is defined: pass --agents FILE (or set "
                       "GATEWAY_AGENTS), or run this where agents.yaml is")
    return missing


def load_runtime(
    specs_dir: Path, agents_path: Path, *, use_cache: bool = True, cache_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Runtime:
    """Compile the specs and load the manifest; raise `ConfigError` with every diagnostic when it is unusable.

    A missing agents file means no agents (the catalog alone still serves `gateway tools`).
    """
    from .openapi import compile_specs  # the compiler is heavy to import; the CLI may not need it

    specs_dir, agents_path = Path(specs_dir), Path(agents_path)
    digests = file_digests(specs_dir, agents_path)
    fingerprint = input_digest(specs_dir, agents_path, digests)
    # The compiler looks its cache up with these digests: a cached spec is not read and hashed a second time (GitHub's
    # is 13 MB: its second SHA-256 was a sizeable part of `gateway mcp`'s start).
    catalog = compile_specs(specs_dir, cache_dir=cache_dir, use_cache=use_cache, digests=digests)
    toolsets: dict[str, Toolset] = {}
    if agents_path.exists():
        # The toolsets the loader's checks built are the ones served: built once per load.
        manifest, toolsets, diagnostics = load_configuration(agents_path, catalog=catalog, environ=environ)
    else:
        manifest, diagnostics = Manifest(file=agents_path.name), []
    errors = [d for d in diagnostics if d.level == "error"]
    if errors:
        listing = "\n".join(f"  {d}" for d in errors)
        raise ConfigError(f"{agents_path.name} is unusable ({len(errors)} error(s)):\n{listing}",
                          [*catalog.diagnostics, *diagnostics])
    return Runtime(
        catalog=catalog, manifest=manifest, toolsets=toolsets, diagnostics=[*catalog.diagnostics, *diagnostics],
        specs_dir=specs_dir, agents_path=agents_path, use_cache=use_cache, fingerprint=fingerprint,
    )


def _input_files(specs_dir: Path, agents_path: Path) -> list[Path]:
    from .openapi import spec_files

    files = spec_files(specs_dir) if specs_dir.is_dir() else []
    return [*files, agents_path]


def input_stats(specs_dir: Path, agents_path: Path) -> tuple[tuple[str, int, int], ...]:
    """A cheap signature of the inputs (names, mtimes, sizes), polled to notice a change."""
    stats = []
    for path in _input_files(specs_dir, agents_path):
        try:
            stat = path.stat()
        except OSError:
            stats.append((str(path), -1, -1))
            continue
        stats.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(stats)


def file_digests(specs_dir: Path, agents_path: Path) -> dict[Path, str | None]:
    """The SHA-256 (hex) of each input file's bytes, in `_input_files`' order; None for one that cannot be read."""
    digests: dict[Path, str | None] = {}
    for path in _input_files(specs_dir, agents_path):
        try:
            digests[path] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            digests[path] = None
    return digests


def input_digest(specs_dir: Path, agents_path: Path, digests: Mapping[Path, str | None] | None = None) -> str:
    """A hash of the inputs' names and contents (`digests`: `file_digests`, when read already): a touched but
    unchanged file does not reload."""
    digest = hashlib.sha256()
    for path, content in (digests if digests is not None else file_digests(specs_dir, agents_path)).items():
        digest.update(str(path).encode() + b"\0" + (content or "missing").encode() + b"\0")
    return digest.hexdigest()


def _check_regressions(old: Runtime, new: Runtime) -> None:
    """Refuse a reload that lost a spec whose file is still there: it was broken by the edit."""
    lost = []
    for name, spec in old.catalog.apis.items():
        if not old.catalog.for_api(name) or new.catalog.for_api(name):
            continue
        if (old.specs_dir / spec.file).exists():
            lost.append(spec.file)
    if lost:
        related = [d for d in new.catalog.diagnostics if d.file in lost and d.level == "error"]
        listing = "\n".join(f"  {d}" for d in related) or "  (no diagnostics)"
        raise ConfigError(f"{', '.join(lost)} no longer compile(s) to any tool:\n{listing}", related)


@dataclass(frozen=True, slots=True)
class DroppedTool:
    """A tool an agent had before a reload and lost because its spec no longer has the operation."""

    agent: str
    message: str

    def __str__(self) -> str:
        return self.message


def dropped_tools(old: Runtime, new: Runtime) -> list[DroppedTool]:
    """What agents had before and lost because its spec no longer has the operation (not because agents.yaml
    stopped selecting it): a spec edit that silently takes a tool away from a working agent."""
    warnings = []
    for agent, toolset in old.toolsets.items():
        kept = new.toolsets.get(agent)
        if kept is None:
            continue
        still = {agent_tool.tool.name for agent_tool in kept if agent_tool.tool is not None}
        for agent_tool in toolset:
            tool = agent_tool.tool
            if tool is None or tool.name in still or new.catalog.get(tool.name) is not None:
                continue
            spec = old.catalog.apis.get(tool.api)
            where = spec.file if spec is not None else tool.api
            warnings.append(DroppedTool(agent, f"agent {agent!r} lost tool {agent_tool.name!r}: {where} no longer "
                                               f"has operation {tool.operation_id or tool.name!r} ({tool.method} "
                                               f"{tool.path})"))
    return warnings


class RuntimeHolder:
    """Holds the current `Runtime` and replaces it when the inputs change.

    Args:
        runtime: the runtime to serve first (from `load_runtime`).
        on_reload: callbacks run with the new runtime after each successful swap (sync or async);
            more can be appended to `holder.on_reload`. A failing callback is logged, not raised.
    """

    def __init__(self, runtime: Runtime, *, on_reload: list[ReloadCallback] | None = None) -> None:
        self._current = runtime
        self.on_reload: list[ReloadCallback] = list(on_reload or [])
        self.generation = 0
        """Incremented by every successful reload."""
        self.last_error: ConfigError | None = None
        """Why the last reload was refused; None after a successful one."""
        self.refused = 0
        """How many reloads were refused (the last good configuration kept serving): `/metrics` reports it."""
        self.reloaded_at: float | None = None
        """`time.time()` of the last successful reload (None: serving what it started with)."""
        self.refused_at: float | None = None
        """`time.time()` of the last refused reload."""
        self.warnings: list[DroppedTool] = []
        """What the last reload took away from agents that used it (a spec edit dropped the operation)."""
        self._failed_fingerprint: str | None = None
        self._lock: anyio.Lock | None = None
        self._started = runtime.manifest.gateway
        """The `gateway:` settings the process started with: those read at start stay in force until a restart."""
        self.started_manifest = runtime.manifest
        """The manifest the process started with, with the lines and variables its values came from: where a setting
        read at start only got the value the process runs on (`GET /settings`)."""
        self.started_at = runtime.loaded_at
        """When the first configuration was loaded: the process serves since then, whatever reloads came after."""

    @property
    def current(self) -> Runtime:
        return self._current

    @property
    def started_with(self) -> GatewaySettings:
        """The `gateway:` settings the process started with (`READ_AT_START`'s stay in force until a restart)."""
        return self._started

    async def watch(self, interval: float = 1.0) -> None:
        """Poll the inputs every `interval` seconds and reload on change; runs until cancelled.

        The first poll compares contents with the current runtime, so an edit made between loading
        and watching is not missed. A change is loaded once the inputs look the same on two polls in a row:
        a file caught half-written (an editor or a script that truncates, then writes) is never loaded as it
        was at that instant, when it may parse as a smaller, valid configuration.
        """
        Stats = tuple[tuple[str, int, int], ...]
        stats: Stats | None = None
        settling: Stats | None = None
        while True:
            runtime = self._current
            try:
                # asyncio's own thread hand-off, not anyio's: the poll runs every second of a serving gateway's life,
                # and anyio's (a capacity limiter and cancel scopes) runs over twice the Python on the event loop.
                latest: tuple[tuple[str, int, int], ...] | None = await asyncio.to_thread(
                    input_stats, runtime.specs_dir, runtime.agents_path)
            except OSError as exc:  # e.g. a folder made unreadable: keep serving, look again later
                logger.warning("cannot scan the inputs: %s", exc)
                latest = stats
            if latest != stats:
                if latest == settling:  # unchanged for one whole interval: the edit is complete
                    stats, settling = latest, None
                    await self.reload()
                else:
                    settling = latest
            await asyncio.sleep(interval)

    async def reload(self, *, force: bool = False) -> bool:
        """Load the inputs again now; True when a new runtime was swapped in.

        Unchanged content is not reloaded, nor content that failed before, unless `force`.
        """
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            old = self._current
            fingerprint = await anyio.to_thread.run_sync(input_digest, old.specs_dir, old.agents_path)
            if not force and fingerprint == old.fingerprint and self.last_error is not None:
                # The files are back to the content that serves: nothing to load, and nothing refused any more.
                self.last_error, self._failed_fingerprint = None, None
                logger.info("the inputs are back to the configuration that serves; the refused reload is over")
                return False
            if not force and fingerprint in (old.fingerprint, self._failed_fingerprint):
                return False
            load = functools.partial(load_runtime, old.specs_dir, old.agents_path, use_cache=old.use_cache)
            try:
                new = await anyio.to_thread.run_sync(load)
                _check_regressions(old, new)
            except ConfigError as exc:
                self._refuse(fingerprint, exc)
                return False
            except Exception as exc:  # noqa: BLE001 - a reload must never take down a serving gateway
                logger.exception("reload failed; the last good configuration keeps serving")
                self._refuse(fingerprint, ConfigError(f"reload failed: {exc}"), logged=True)
                return False
            self._current = new
            self.generation += 1
            self.last_error = None
            self.reloaded_at = time.time()
            self._failed_fingerprint = None
            self.warnings = dropped_tools(old, new)
        logger.info("reloaded: %d agents, %d tools in the catalog", len(new.manifest.agents), len(new.catalog))
        for warning in self.warnings:
            logger.warning("%s", warning)
        unapplied = differ_from_start(self._started, new.manifest.gateway)
        if unapplied:  # "reloaded" alone let an operator believe a new store, Redis or timeout was in force
            logger.warning("agents.yaml changes %s, read at start only: this process keeps the value%s it started "
                           "with until it is restarted", ", ".join(f"gateway.{name}" for name in unapplied),
                           "s" if len(unapplied) > 1 else "")
        # A spec added broken takes nothing away, so it is served around, not refused: its errors are said here, or
        # an owner who dropped it in would see "reloaded" and no tools.
        before = {str(d) for d in old.diagnostics if d.level == "error"}
        for diagnostic in new.diagnostics:
            if diagnostic.level == "error" and str(diagnostic) not in before:
                logger.warning("reloaded around an error (the rest serves): %s", diagnostic)
        for callback in list(self.on_reload):
            try:
                result = callback(new)
                if inspect.isawaitable(result):
                    await result
            except Exception:  # noqa: BLE001
                logger.exception("an on_reload callback failed")
        return True

    def _refuse(self, fingerprint: str, error: ConfigError, *, logged: bool = False) -> None:
        self._failed_fingerprint = fingerprint
        self.last_error = error
        self.refused += 1
        self.refused_at = time.time()
        if not logged:
            # One line per record: a multi-line message came out as one line of `\u000a` escapes (the formatter
            # makes a sender's line breaks inert), unreadable in a terminal and hard to grep. Each diagnostic has
            # its own line, saying it was refused.
            errors = [d for d in error.diagnostics if d.level == "error"]
            logger.error("reload refused; the last good configuration keeps serving: %s",
                         str(error).splitlines()[0].rstrip(":") if str(error) else "unusable")
            for diagnostic in errors or error.diagnostics:
                logger.error("reload refused: %s", diagnostic)
