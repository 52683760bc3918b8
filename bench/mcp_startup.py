"""How long a desktop client waits for `gateway mcp`: from the process's start to its tools listed, with the
official `mcp` client (its stdio transport and `ClientSession`), as a client starts the server itself.

    python -m bench.mcp_startup [--rounds 7] [--no-peer] [--no-github] [--tree PATH ...]

Two projects, each with a warm compiler cache (`GATEWAY_CACHE_DIR` in a temporary folder, filled by one run
first): the repository's example (`weather`, one Open-Meteo tool) and GitHub's spec from ../shared/corpus (an
agent with every operation, 1,000+ tools). A round starts a new process per side; the sides take turns, so a
busy machine disturbs them alike; a figure is the median over rounds. The time runs from just before the
client starts the process to `list_tools()` returning (`initialize`, `initialized` and `tools/list` on the
way). Peers, when installed: FastMCP's `from_openapi` over stdio on the same spec (`pip install -e
'.[bench]'`). With several `--tree`s (source checkouts, e.g. main's and a branch's) each tree's gateway is a side
of its own (its folder first on `PYTHONPATH`, bytecode not written into it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.support import GITHUB, ROOT, median, peer_installed

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


async def _listed(command: str, args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int]:
    """Seconds from starting the server to its tools listed by the official client; the number of tools."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command, args=args, env=env, cwd=str(cwd))
    with open(os.devnull, "w") as errlog:
        started = time.perf_counter()
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            elapsed = time.perf_counter() - started
    if not tools:
        raise RuntimeError(f"{command} {args}: no tools listed")
    return elapsed, len(tools)


def _sides(folder: Path, *, peer: bool, github: bool,
           trees: list[Path]) -> dict[str, tuple[list[str], dict[str, str], Path]]:
    """Each side's command line, environment and folder."""
    env = {**os.environ, "GATEWAY_CACHE_DIR": str(folder / "cache"), "PYTHONPATH": str(ROOT)}
    envs = {("" if len(trees) == 1 else f" ({tree.name})"): {**env, "PYTHONPATH": str(tree),
                                                             "PYTHONDONTWRITEBYTECODE": "1"} for tree in trees}
    example = folder / "example"
    example.mkdir()
    shutil.copytree(ROOT / "specs", example / "specs")
    shutil.copy(ROOT / "agents.yaml", example / "agents.yaml")
    sides = {f"example{label}": ([sys.executable, "-m", "gateway", "mcp", EXAMPLE_AGENT], tree_env, example)
             for label, tree_env in envs.items()}
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


async def measure(rounds: int, *, peer: bool = True, github: bool = True,
                  trees: list[Path] | None = None) -> dict[str, tuple[float, int]]:
    """The median seconds to the tools listed, and how many, per side."""
    with tempfile.TemporaryDirectory() as tmp:
        sides = _sides(Path(tmp), peer=peer, github=github, trees=trees or [ROOT])
        times: dict[str, list[float]] = {name: [] for name in sides}
        counts: dict[str, int] = {}
        for name, (command, env, cwd) in sides.items():  # fills the compiler's cache and warms the OS's
            _, counts[name] = await _listed(command[0], command[1:], env, cwd)
        for _ in range(rounds):
            for name, (command, env, cwd) in sides.items():
                elapsed, _ = await _listed(command[0], command[1:], env, cwd)
                times[name].append(elapsed)
    return {name: (median(values), counts[name]) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument("--no-github", action="store_true", help="the example only")
    parser.add_argument("--tree", type=Path, action="append",
                        help="a source checkout to run (repeatable; default: this one)")
    args = parser.parse_args()
    figures = asyncio.run(measure(args.rounds, peer=not args.no_peer and peer_installed(),
                                  github=not args.no_github, trees=[tree.resolve() for tree in args.tree or [ROOT]]))
    print(f"start to tools listed (official mcp client, stdio), median of {args.rounds} rounds, warm cache")
    for name, (seconds, tools) in figures.items():
        print(f"  {name:<24} {seconds:6.3f} s  ({tools} tools)")


if __name__ == "__main__":
    main()
