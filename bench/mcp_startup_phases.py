"""Where `gateway mcp`'s instructions to its first listing go: per module imported and per step of the load.

    python -m bench.mcp_startup_phases [--tree PATH] [--github] [--min 1.5] [--sdk-first]

One side of `bench.mcp_startup` (the example, or with `--github` GitHub's spec) runs once under valgrind's callgrind
with a dump at every boundary: on entering and leaving each gateway module's import and each import a gateway module
makes (a `sys.meta_path` hook around the loader), and around the steps of the load (`load_runtime` and its
`file_digests`, `compile_specs`, `load_yaml`, `read_manifest`, `check_security`, `build_toolsets`; the safeguards'
`open`; `serve_stdio` up to the listing). A dump is a valgrind client request (`CALLGRIND_DUMP_STATS_AT`), issued
through ctypes by a five-line C library built here with the system's compiler from valgrind's `callgrind.h`; each
dump holds the instructions since the one before, summed here per innermost module or step and printed as a tree
(`incl`: with what it imported or called; `self`: without). The bench driving it dumps once more when the listing
arrives (`callgrind_control --dump`), as `bench.mcp_startup_instructions` does.

With `--sdk-first` the harness imports what the floor imports (the SDK's low-level server and stdio transport,
anyio) before any gateway module, as `gateway mcp` itself does before it loads agents.yaml: pydantic, ssl, asyncio
and the rest are then the floor's, and what the tree charges to a gateway module is what that module adds (without
it a module that happens to import pydantic first is charged for pydantic).

The hook and the wrappers cost instructions of their own (about 35 M here), and the steps are wrapped by importing
their modules first, so the total is above `bench.mcp_startup_instructions`' and the order of imports differs: compare
trees with that bench, and use this one to find where the instructions go. A module's figure covers the imports it
makes that are not counted apart (a third-party module's own imports). Note: about a second after it starts, the
runtime's watcher hashes every input again (its first settled poll); under valgrind's slowdown that can land before
the listing's dump (GitHub's spec: some 360 M instructions): the tree shows it as a `file_digests` of its own.
Needs valgrind, its headers and a C compiler.
"""

from __future__ import annotations

import argparse
import glob
import json
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.mcp_startup import sides

_MARK_C = """#include <valgrind/callgrind.h>
void mark(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }
"""
_HARNESS = """
import ctypes, importlib.abc, sys
_mark = ctypes.CDLL(sys.argv[1]).mark
_mark.argtypes = [ctypes.c_char_p]
stack = []

def mark(label):
    _mark(label.encode())

class Loader(importlib.abc.Loader):
    def __init__(self, inner, name):
        self.inner, self.name = inner, name
    def create_module(self, spec):
        return self.inner.create_module(spec)
    def exec_module(self, module):
        mark("enter " + self.name); stack.append(self.name)
        try:
            self.inner.exec_module(module)
        finally:
            stack.pop(); mark("exit " + self.name)
    def __getattr__(self, name):
        return getattr(self.inner, name)

class Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is None:
                continue
            counted = name.startswith("gateway") or (stack and stack[-1].startswith("gateway"))
            if counted and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = Loader(spec.loader, name)
            return spec
        return None

def step(owner, name, is_async=False):
    inner = getattr(owner, name, None)
    if inner is None:
        return
    if is_async:
        async def wrapped(*args, **kwargs):
            mark("before " + name)
            try:
                return await inner(*args, **kwargs)
            finally:
                mark("after " + name)
    else:
        def wrapped(*args, **kwargs):
            mark("before " + name)
            try:
                return inner(*args, **kwargs)
            finally:
                mark("after " + name)
    setattr(owner, name, staticmethod(wrapped) if isinstance(owner, type) else wrapped)

mark("interpreter")
if sys.argv[2] == "--sdk-first":  # what the floor imports, before ours: the rest is charged to ours alone
    del sys.argv[2]
    import anyio, mcp.server.lowlevel.server, mcp.server.stdio
    mark("sdk")
sys.meta_path.insert(0, Finder())
import gateway.config.loader, gateway.configuration, gateway.openapi, gateway.runtime, gateway.server.run
import gateway.server.mcp.stdio, gateway.safety.serving
run, runtime = gateway.server.run, gateway.runtime
for owner, name in [(run, "load_or_report"), (run, "load_runtime"), (run, "tune_gc"),
                    (gateway.safety.serving.ServingSafeguards, "open"), (runtime, "file_digests"),
                    (runtime, "load_configuration"), (gateway.openapi, "compile_specs"),
                    (gateway.configuration, "read_checked"), (gateway.configuration, "build_toolsets"),
                    (gateway.configuration, "check_security"), (gateway.config.loader, "read_manifest"),
                    (gateway.config.loader, "check_manifest"), (gateway.config.loader, "load_yaml")]:
    step(owner, name)
step(gateway.server.mcp.stdio, "serve_stdio", is_async=True)
import runpy
sys.argv = ["gateway", *sys.argv[2:]]
mark("main")
runpy.run_module("gateway", run_name="__main__", alter_sys=True)
"""
_MESSAGES: list[dict[str, Any]] = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]


def _list(command: list[str], env: dict[str, str], cwd: Path, out: Path | None) -> None:
    prefix = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no"] if out else []
    with subprocess.Popen([*prefix, *command], cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL) as process:
        assert process.stdin is not None and process.stdout is not None
        for message in _MESSAGES:
            process.stdin.write(json.dumps(message).encode() + b"\n")
            process.stdin.flush()
            if "id" in message:
                process.stdout.readline()
        if out is not None:
            subprocess.run(["callgrind_control", "--dump=listed", str(process.pid)], capture_output=True, check=True)
            time.sleep(1)  # the dump is written by the server's own thread
        process.stdin.close()
        process.wait(timeout=600)


def _intervals(out: Path) -> list[tuple[str, int]]:
    """Each dump's label and the instructions since the dump before, in order."""
    rows = []
    for path in sorted(glob.glob(f"{out}.*"), key=lambda name: int(name.rsplit(".", 1)[1])):
        label, total = "", 0
        with open(path) as dump:
            for line in dump:
                if line.startswith("desc: Trigger:"):
                    label = line.split(":", 2)[2].strip().removeprefix("Client Request: ")
                elif line.startswith(("summary:", "totals:")):
                    total = int(line.split()[1])
                    break
        rows.append((label, total))
    return rows


@dataclass
class _Node:
    name: str
    depth: int
    inclusive: int = 0
    own: int = 0


def _tree(rows: list[tuple[str, int]], smallest: float) -> list[str]:
    """The intervals as a tree of modules and steps, `incl` and `self` in millions of instructions."""
    root = _Node("(start)", 0)
    stack, nodes, done = [root], [root], 0
    for label, count in rows:
        stack[-1].own += count
        done += count
        opening, _, name = label.partition(" ")
        if opening in ("enter", "before"):
            node = _Node(name if opening == "enter" else f"> {name}", len(stack) - 1, -done)
            stack.append(node)
            nodes.append(node)
        elif opening in ("exit", "after") and len(stack) > 1:
            stack.pop().inclusive += done
        else:  # `main`, `listed`: a top-level stretch of its own
            for node in stack[1:]:
                node.inclusive += done
            node = _Node(label, 0, -done)
            stack = [root, node]
            nodes.append(node)
    for node in stack[1:]:
        node.inclusive += done
    lines = [f"total {done / 1e6:,.1f} M; the interpreter's start {root.own / 1e6:,.1f} M"]
    for node in nodes[1:]:
        if max(node.inclusive, node.own) / 1e6 >= smallest:
            indent = "  " * node.depth
            lines.append(f"{indent}{node.name}  incl {node.inclusive / 1e6:,.1f}  self {node.own / 1e6:,.1f}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, help="a source checkout to run (default: this one)")
    parser.add_argument("--github", action="store_true", help="GitHub's spec instead of the example")
    parser.add_argument("--min", type=float, default=1.5, help="leave out what takes fewer millions (default 1.5)")
    parser.add_argument("--sdk-first", action="store_true",
                        help="import what the floor imports (the SDK's server, anyio) before ours, as `gateway mcp` "
                             "does: what the tree then charges to gateway modules is ours alone")
    args = parser.parse_args()
    trees = [args.tree.resolve()] if args.tree else [Path(__file__).resolve().parent.parent]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        library, harness = folder / "libmark.so", folder / "harness.py"
        (folder / "mark.c").write_text(_MARK_C)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(library), str(folder / "mark.c")], check=True)
        harness.write_text(_HARNESS)
        runs = sides(folder, peer=False, github=args.github, floor=False, trees=trees)
        name = next(name for name in runs if name.lower().startswith("github" if args.github else "example"))
        command, env, cwd = runs[name]
        sdk_first = ["--sdk-first"] if args.sdk_first else []
        command = [command[0], str(harness), str(library), *sdk_first, *command[3:]]  # python HARNESS LIB mcp AGENT
        _list(command, env, cwd, None)  # fills the compiler's cache and the bytecode
        _list(command, env, cwd, folder / "callgrind.out")
        print(f"{name}: instructions per module imported and per step, to the first listing (callgrind)")
        print("\n".join(_tree(_intervals(folder / "callgrind.out"), args.min)))


if __name__ == "__main__":
    main()
