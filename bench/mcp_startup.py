"""How long a desktop client waits for `gateway mcp`: from the process's start to its tools listed, with the
official `mcp` client (its stdio transport and `ClientSession`), as a client starts the server itself.

    python -m bench.mcp_startup [--rounds 7] [--no-peer] [--no-github] [--no-floor] [--tree PATH ...]

Two projects, each with a warm compiler cache (`GATEWAY_CACHE_DIR` in a temporary folder, one per tree, filled by
the warm-up): the repository's example (`weather`, one Open-Meteo tool) and GitHub's spec from ../shared/corpus (an
agent with every operation, 1,000+ tools). A round starts a new process per side; the sides take turns, so a
busy machine disturbs them alike. The time runs from just before the client starts the process to
`list_tools()` returning (`initialize`, `initialized` and `tools/list` on the way); the client (this process)
imported the SDK before the first round, so its own start-up is not counted. Beside the wall time, each side's
server CPU: the process's user+system time (every thread, read from the kernel's CPU clock of the process) at the
moment `list_tools()` returned, which does not count the waits on a busy machine's other processes (it still
moves with the VM's speed). Figures are the median and the minimum over rounds; the load average is printed
before and after.

Bytecode: every side reads and writes its compiled bytecode under one folder of the run
(`PYTHONPYCACHEPREFIX`), filled by the first run: as an installed gateway runs (pip compiles at install; an
editable checkout writes `__pycache__` on first use), and the same for every tree, whatever `__pycache__` a tree
has or lacks (with `PYTHONDONTWRITEBYTECODE` a tree without it compiles every module at every start: 0.2 s of CPU
here), and nothing is written into a tree.

Sides: `floor`, the SDK's own low-level `Server` with one tool over its stdio transport (its public API only): what
any server on this SDK pays before it can list (`--no-floor` leaves it out). Peers, when installed: FastMCP's
`from_openapi` over stdio on the same spec (`pip install -e '.[bench]'`). With several `--tree`s (source
checkouts, e.g. main's and a branch's) each tree's gateway is a side of its own (its folder first on
`PYTHONPATH`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from bench.support import GITHUB, ROOT, cpu_seconds, median, peer_installed

EXAMPLE_AGENT = "weather"
GITHUB_YAML = """\
providers:
  openai: {kind: openai, base_url: "http://127.0.0.1:9/v1", api_key: unused}
apis:
  github: {base_url: "http://127.0.0.1:9"}
agents:
  github:
    model: openai/none
    tools: [{api: github}]
"""
_PEER = """\
import json, sys
from pathlib import Path
import httpx2 as client_lib
from fastmcp import FastMCP
spec = json.loads(Path(sys.argv[1]).read_text())
FastMCP.from_openapi(openapi_spec=spec, client=client_lib.AsyncClient(base_url="http://127.0.0.1:9"),
                     name="peer").run("stdio", show_banner=False)
"""
_FLOOR = """\
import anyio
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

TOOL = {"name": "getForecast", "description": "The weather forecast for a place.",
        "inputSchema": {"type": "object", "properties": {"latitude": {"type": "number"},
                                                         "longitude": {"type": "number"}}}}

async def list_tools(ctx, params):
    return {"tools": [TOOL]}

async def main():
    server = Server("floor", on_list_tools=list_tools)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())

anyio.run(main)
"""


class Listed(NamedTuple):
    """One start: seconds to the tools listed, the server's CPU seconds by then, how many tools."""

    seconds: float
    cpu: float
    tools: int


def _children() -> set[int]:
    """The processes this one started that are still there (the kernel's list per thread, /proc)."""
    pids: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        with contextlib.suppress(OSError):
            pids.update(int(pid) for pid in (task / "children").read_text().split())
    return pids


async def _listed(command: str, args: list[str], env: dict[str, str], cwd: Path) -> Listed:
    """Seconds from starting the server to its tools listed by the official client; its CPU by then; the number of
    tools."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command, args=args, env=env, cwd=str(cwd))
    before = _children()
    with open(os.devnull, "w") as errlog:
        started = time.perf_counter()
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            elapsed = time.perf_counter() - started
            server = _children() - before
            cpu = cpu_seconds(server.pop()) if len(server) == 1 else float("nan")
    if not tools:
        raise RuntimeError(f"{command} {args}: no tools listed")
    return Listed(elapsed, cpu, len(tools))


def sides(folder: Path, *, peer: bool, github: bool, floor: bool,
           trees: list[Path]) -> dict[str, tuple[list[str], dict[str, str], Path]]:
    """Each side's command line, environment and folder."""
    base = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    env = {**base, "GATEWAY_CACHE_DIR": str(folder / "cache"), "PYTHONPATH": str(ROOT),
           "PYTHONPYCACHEPREFIX": str(folder / "bytecode")}
    # One compiler cache per tree: an entry is kept per spec file and carries the compiler code's fingerprint, so
    # two trees whose compiler, catalog or search code differ would each overwrite the other's entry, and every
    # start after the other tree's would compile the spec again (seconds for GitHub's).
    envs = {("" if len(trees) == 1 else f" ({tree.name})"): {**env, "PYTHONPATH": str(tree),
                                                             "GATEWAY_CACHE_DIR": str(folder / f"cache-{index}")}
            for index, tree in enumerate(trees)}
    example = folder / "example"
    example.mkdir()
    shutil.copytree(ROOT / "specs", example / "specs")
    shutil.copy(ROOT / "agents.yaml", example / "agents.yaml")
    sides: dict[str, tuple[list[str], dict[str, str], Path]] = {}
    if floor:
        (folder / "floor.py").write_text(_FLOOR)
        sides["floor (SDK, 1 tool)"] = ([sys.executable, str(folder / "floor.py")], env, folder)
    sides.update({f"example{label}": ([sys.executable, "-m", "gateway", "mcp", EXAMPLE_AGENT], tree_env, example)
                  for label, tree_env in envs.items()})
    if peer:
        (folder / "peer.py").write_text(_PEER)
        # The peer reads the spec as JSON: the example's Open-Meteo spec, converted once.
        import yaml

        spec = folder / "open-meteo.json"
        spec.write_text(json.dumps(yaml.safe_load((ROOT / "specs" / "open-meteo.yaml").read_text())))
        sides["example, FastMCP"] = ([sys.executable, str(folder / "peer.py"), str(spec)], env, folder)
    if github and GITHUB.exists():
        project = folder / "github"
        (project / "specs").mkdir(parents=True)
        (project / "specs" / "github.json").symlink_to(GITHUB)
        (project / "agents.yaml").write_text(GITHUB_YAML)
        for label, tree_env in envs.items():
            sides[f"GitHub{label}"] = ([sys.executable, "-m", "gateway", "mcp", "github"], tree_env, project)
        if peer:
            sides["GitHub, FastMCP"] = ([sys.executable, str(folder / "peer.py"), str(GITHUB)], env, folder)
    return sides


async def measure(rounds: int, *, peer: bool = True, github: bool = True, floor: bool = True,
                  trees: list[Path] | None = None) -> dict[str, list[Listed]]:
    """Every round's start of every side."""
    with tempfile.TemporaryDirectory() as tmp:
        started = sides(Path(tmp), peer=peer, github=github, floor=floor, trees=trees or [ROOT])
        runs: dict[str, list[Listed]] = {name: [] for name in started}
        for _ in range(2):  # fills the compiler's cache and the bytecode, then warms the OS's caches
            for command, env, cwd in started.values():
                await _listed(command[0], command[1:], env, cwd)
        for _ in range(rounds):
            for name, (command, env, cwd) in started.items():
                runs[name].append(await _listed(command[0], command[1:], env, cwd))
    return runs


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument("--no-github", action="store_true", help="the example only")
    parser.add_argument("--no-floor", action="store_true", help="without the SDK's empty server")
    parser.add_argument("--tree", type=Path, action="append",
                        help="a source checkout to run (repeatable; default: this one)")
    args = parser.parse_args()
    import mcp.client.stdio  # noqa: F401 - the client's own import, before any round

    load = _load()
    runs = asyncio.run(measure(args.rounds, peer=not args.no_peer and peer_installed(), github=not args.no_github,
                               floor=not args.no_floor, trees=[tree.resolve() for tree in args.tree or [ROOT]]))
    print(f"start to tools listed (official mcp client, stdio), {args.rounds} rounds, warm cache; "
          f"load average {load} before, {_load()} after")
    print(f"  {'':<26} {'wall median':>11} {'min':>7}   {'server CPU median':>16} {'min':>7}")
    for name, listed in runs.items():
        wall, cpu = [run.seconds for run in listed], [run.cpu for run in listed]
        print(f"  {name:<26} {median(wall):9.3f} s {min(wall):5.3f} s   {median(cpu):14.3f} s {min(cpu):5.3f} s"
              f"  ({listed[0].tools} tools)")


if __name__ == "__main__":
    main()
