"""Start-up of the commands a person or a desktop client runs most: `gateway validate`, and `gateway mcp` until
its first `tools/list` answer (a stdio MCP client starts the process itself, so this is its wait).

    python -m bench.cli_startup [--rounds 7] [--tree PATH ...]

The project is the repository's example (specs/ and agents.yaml); one run of each fills the compiler's cache
(`GATEWAY_CACHE_DIR` in a temporary folder), then every round starts new processes. With several `--tree`s
(source checkouts, e.g. main's and a branch's) the rounds alternate between them, so a busy machine disturbs
both alike; each tree is run with its folder first on PYTHONPATH and this interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from bench.support import ROOT, median

AGENT = "weather"


def _env(tree: Path, cache: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree), "GATEWAY_CACHE_DIR": str(cache)}


def _reap(process: subprocess.Popen[bytes]) -> float:
    """Wait for the process; the CPU seconds (user + system) it used, which a busy machine disturbs less than
    the wall clock."""
    _, _, usage = os.wait4(process.pid, 0)
    process.returncode = 0  # reaped here; Popen must not wait for it again
    return usage.ru_utime + usage.ru_stime


def _validate(tree: Path, project: Path, cache: Path) -> tuple[float, float]:
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "gateway", "validate", "--specs", str(project / "specs"),
                                "--agents", str(project / "agents.yaml")], env=_env(tree, cache), cwd=project,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cpu = _reap(process)
    return time.perf_counter() - started, cpu


def _send(pipe: IO[bytes], message: dict[str, Any]) -> None:
    pipe.write(json.dumps(message).encode() + b"\n")
    pipe.flush()


def _answer(pipe: IO[bytes], request_id: int) -> dict[str, Any]:
    while True:
        line = pipe.readline()
        if not line:
            raise RuntimeError("gateway mcp closed its output before answering")
        message = json.loads(line)
        if message.get("id") == request_id:
            return message  # type: ignore[no-any-return]


def _mcp(tree: Path, project: Path, cache: Path) -> tuple[float, float]:
    """Popen -> the answer to `tools/list` (after `initialize`), as a stdio client waits for it; and the CPU
    seconds of the whole process (start, those two answers, exit on end of input)."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "gateway", "mcp", AGENT, "--specs", str(project / "specs"),
                                "--agents", str(project / "agents.yaml")], env=_env(tree, cache), cwd=project,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdin is not None and process.stdout is not None
    try:
        _send(process.stdin, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        _answer(process.stdout, 1)
        _send(process.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(process.stdin, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        listed = _answer(process.stdout, 2)
        elapsed = time.perf_counter() - started
        if not listed.get("result", {}).get("tools"):
            raise RuntimeError(f"tools/list answered no tools: {listed}")
    except BaseException:
        process.kill()
        process.wait()
        raise
    process.stdin.close()  # end of input: the server exits
    return elapsed, _reap(process)


def measure(trees: list[Path], rounds: int) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        shutil.copytree(ROOT / "specs", project / "specs")
        shutil.copy(ROOT / "agents.yaml", project / "agents.yaml")
        kinds = ("validate", "validate_cpu", "mcp", "mcp_cpu")
        times: dict[Path, dict[str, list[float]]] = {tree: {kind: [] for kind in kinds} for tree in trees}
        for tree in trees:  # fill each tree's cache (its compiler may key it differently) and warm the OS's
            _validate(tree, project, Path(tmp) / tree.name)
            _mcp(tree, project, Path(tmp) / tree.name)
        for _ in range(rounds):
            for tree in trees:
                for kind, run in (("validate", _validate), ("mcp", _mcp)):
                    wall, cpu = run(tree, project, Path(tmp) / tree.name)
                    times[tree][kind].append(wall)
                    times[tree][f"{kind}_cpu"].append(cpu)
    return {str(tree): {kind: median(values) for kind, values in figures.items()} for tree, figures in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tree", type=Path, action="append",
                        help="a source checkout to run (repeatable; default: this one)")
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.tree or [ROOT]]
    figures = measure(trees, args.rounds)
    print(f"median of {args.rounds} rounds, seconds (cached catalog, the example project); wall: from start to "
          "exit (validate) or to the tools/list answer (mcp); cpu: user + system of the whole process")
    print(f"{'tree':<32} {'validate wall':>14} {'validate cpu':>13} {'mcp wall':>9} {'mcp cpu':>8}")
    for tree, row in figures.items():
        print(f"{tree:<32} {row['validate']:>14.3f} {row['validate_cpu']:>13.3f} {row['mcp']:>9.3f} "
              f"{row['mcp_cpu']:>8.3f}")


if __name__ == "__main__":
    main()
