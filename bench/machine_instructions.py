"""Machine instructions per direct call on the serving thread, native code included (valgrind's callgrind).

    python -m bench.machine_instructions [--tree /path/to/other/tree ...] [--bare] [--floor | --floor-each]
                                         [--calls 100]

`bench.opcodes` counts the Python bytecode a call runs; what those instructions cost, and the native work beside
them (the interpreter, orjson, jsonschema_rs, SQLite, httptools, pyreqwest's Python side), is what the CPU goal
is about, and the CPU time of a process moves with the machine's load. Here each server (`gateway serve` from each
`--tree`, as `bench.ab` runs it; `--bare`: bench/bare_proxy.py, the floor) runs under callgrind; after a warm-up
its counters are zeroed (`callgrind_control -z`), `--calls` sequential calls are made and the counters dumped. The
figure is the event loop's thread (the first) per call: other threads (pyreqwest's runtime, the MCP SDK's import
in the background, the reload watcher's) are listed but not compared. Deterministic to a few per cent (a call
under valgrind takes over 50 ms, so the disconnect watcher starts on every call, in every tree alike), once the
idle server's CPU has settled after the warm-up (`gateway serve` imports the MCP SDK in the background, and its
garbage collections land on the loop's thread: up to 15% between runs without the pause). Needs
`valgrind` on the PATH; each server takes about a minute. `--floor` adds the floor of the promises
(bench/promise_floor.py, every promise kept); `--floor-each` also the floor with each promise left out in turn and
with none, so that the difference from the whole floor is what each promise costs, in instructions.
"""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

from bench.promise_floor import PROMISES, floor_side
from bench.support import CALL_ARGS, Side, bench_upstream, free_port, side, side_arguments, sides, spawned


async def _calls(url: str, path: str, count: int, *, post: bool, pause: float = 0.0,
                 headers: dict[str, str] | None = None) -> None:
    """`count` calls one after another; `pause` seconds after each answer before the next request."""
    async with httpx.AsyncClient(base_url=url, timeout=300, trust_env=False, headers=headers) as client:
        for _ in range(count):
            response = await (client.post(path, json=CALL_ARGS) if post else client.get(path))
            if response.status_code != 200:
                raise RuntimeError(f"{url}{path}: {response.status_code} {response.text[:200]}")
            if pause:
                await asyncio.sleep(pause)


def _cpu_ticks(pid: int) -> int:
    """The process's user and system CPU so far, in clock ticks (/proc/PID/stat's utime and stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _settle(pid: int, limit: float = 180.0) -> None:
    """Wait until the idle server's CPU settles (under 5% of a core over 3 s): what `gateway serve` still does in the
    background after its first calls would otherwise be counted into the calls (up to 15% between runs)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        before = _cpu_ticks(pid)
        time.sleep(3)
        if _cpu_ticks(pid) - before < 15:
            return
    print(f"warning: the server's CPU did not settle within {limit:g} s; the count may include background work")


def measure(tree: Path | None, upstream: str, folder: Path, calls: int,
            floor_off: tuple[str, ...] | None = None) -> dict[str, int]:
    """Instructions per call by callgrind thread file (`...-01` is the event loop's); `tree` None: the bare proxy, or
    with `floor_off` the floor of the promises without those."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    out = folder / f"callgrind-{port}.out"
    server: Side = side(tree, upstream, folder, port) if floor_off is None else floor_side(upstream, port, floor_off)
    ready, path, post, cwd, env = server.ready, server.path, server.post, server.cwd, server.env
    headers = server.headers
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--separate-threads=yes",
               "--dump-instr=no", *server.command]
    with spawned(command, ready, env=env, cwd=cwd) as (process, _):
        asyncio.run(_calls(url, path, 30, post=post, headers=headers))  # warm: caches filled, lazy imports done
        _settle(process.pid)  # the MCP SDK's import in the background: its garbage collections land on the loop
        asyncio.run(_calls(url, path, 20, post=post, headers=headers))
        subprocess.run(["callgrind_control", "-z", str(process.pid)], check=True, capture_output=True)
        asyncio.run(_calls(url, path, calls, post=post, headers=headers))
        subprocess.run(["callgrind_control", "-d", str(process.pid)], check=True, capture_output=True)
    per_thread: dict[str, int] = {}
    for dump in sorted(folder.glob(out.name + ".*")):
        summary = next((line for line in dump.read_text().splitlines() if line.startswith("summary:")), None)
        if summary is not None:
            per_thread[dump.name.rsplit("-", 1)[-1]] = int(summary.split()[1]) // calls
    return per_thread


def main() -> None:
    args = side_arguments(__doc__, 100, floor=True)
    floors: list[tuple[str, tuple[str, ...]]] = [("the floor of the promises", ())] if args.floor or args.floor_each \
        else []
    if args.floor_each:
        floors += [(f"the floor without {name}", (name,)) for name in PROMISES]
        floors.append(("the floor without any promise", PROMISES))
    runs = [(name, tree, None) for name, tree in sides(args.tree, args.bare)] + \
        [(name, None, off) for name, off in floors]
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        folder = Path(tmp)
        upstream = bench_upstream(stack)
        for name, tree, off in runs:
            per_thread = measure(tree, upstream, folder, args.calls, off)
            others = ", ".join(f"{count:,}" for thread, count in per_thread.items() if thread != "01" and count)
            print(f"{name}: {per_thread.get('01', 0):,} instructions per call on the event loop's thread "
                  f"({args.calls} calls; other threads: {others or 'none'})", flush=True)


if __name__ == "__main__":
    main()
