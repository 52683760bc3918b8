"""Machine instructions from `gateway mcp`'s start to its first listing, which do not move with the machine's load.

    python -m bench.mcp_startup_instructions [--tree PATH ...] [--no-github] [--no-floor]

Each side of `bench.mcp_startup` (the SDK's one-tool floor; the example and GitHub's spec per `--tree`) runs once
under valgrind's callgrind, driven over stdio by a raw JSON-RPC client (`initialize`, `initialized`, `tools/list`);
the moment the listing arrives its counters are dumped (`callgrind_control --dump`), so the figure is the
interpreter's start, every import, the runtime's load and the first listing, and nothing after. Each tree has its
own warm compiler cache and every side reads its bytecode from one folder (as in `bench.mcp_startup`), both filled
by a plain run first. Needs `valgrind` on the PATH; a side takes several minutes (GitHub's the longest).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

from bench.mcp_startup import sides

_MESSAGES = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]


def _listed(process: subprocess.Popen[bytes]) -> int:
    """Send the handshake and the listing; the number of tools listed."""
    stdin: IO[bytes] | None = process.stdin
    stdout: IO[bytes] | None = process.stdout
    assert stdin is not None and stdout is not None
    tools = 0
    for message in _MESSAGES:
        stdin.write(json.dumps(message).encode() + b"\n")
        stdin.flush()
        if "id" in message:
            answer = json.loads(stdout.readline())
            tools = len(answer.get("result", {}).get("tools", []))
    return tools


def _run(command: list[str], env: dict[str, str], cwd: Path, out: Path | None) -> tuple[int, int | None]:
    """Start the side (under callgrind when `out` is given), list, stop; the tools listed and the instructions to
    the listing."""
    prefix = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no"] if out else []
    with subprocess.Popen([*prefix, *command], cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL) as process:
        tools = _listed(process)
        if out is not None:
            subprocess.run(["callgrind_control", "--dump=listed", str(process.pid)], capture_output=True, check=True)
            time.sleep(1)  # the dump is written by the server's own thread
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=600)
    if out is None:
        return tools, None
    dump = Path(f"{out}.1")
    for line in dump.read_text().splitlines():
        if line.startswith("summary:"):
            return tools, int(line.split()[1])
    raise RuntimeError(f"{dump}: no summary line")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-github", action="store_true", help="the example only")
    parser.add_argument("--no-floor", action="store_true", help="without the SDK's empty server")
    parser.add_argument("--tree", type=Path, action="append",
                        help="a source checkout to run (repeatable; default: this one)")
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.tree or [Path(__file__).resolve().parent.parent]]
    with tempfile.TemporaryDirectory() as tmp:
        runs = sides(Path(tmp), peer=False, github=not args.no_github, floor=not args.no_floor, trees=trees)
        print("instructions from the start to the first tools/list answer (callgrind), warm cache")
        for index, (name, (command, env, cwd)) in enumerate(runs.items()):
            _run(command, env, cwd, None)  # fills the compiler's cache and the bytecode
            tools, instructions = _run(command, env, cwd, Path(tmp) / f"side-{index}.out")
            print(f"  {name:<26} {instructions or 0:>15,}  ({tools} tools)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
