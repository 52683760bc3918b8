"""Where a direct call's critical path waits: system calls per call, by thread, of each serving process.

    python -m bench.syscalls [--tree /path/to/other/tree ...] [--bare] [--calls 200] [--door http|mcp|mcp2026]

A caller waits for the work between its request's arrival and the answer's last byte, and for every hand-over
on the way: the event loop's thread sleeps in `epoll_pwait` until the request's body, the upstream's answer (which
pyreqwest's thread reads and hands back through the loop's eventfd) or the next request arrives; a thread that wakes
another writes an eventfd; a thread that wakes while the other holds the interpreter's lock waits on a `futex`.
Counting them says how many hand-overs a call makes and whether a change adds one, which a latency figure on a
shared machine cannot tell apart from noise. Method: `gateway serve` from each tree (and `--bare`: the bare proxy,
bench/bare_proxy.py, on the same upstream), warmed with 50 calls, then `perf trace -s` attached to the process
for `--calls` sequential calls 3 ms apart (so that each call's work after its answer is done before the next
request arrives, as a client's turnaround allows natively); each thread's system calls divided by the calls.
The counts of a call's own work (SQLite's locks and writes, the answer's writes, the wake-ups) are exact; the
loop's `epoll_pwait` and `futex` counts move by about one a call with the load (whether a message has arrived by
the time the loop looks). Needs `perf` and the right to trace the processes (root here).
"""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from bench.ledger import Calls, door_calls
from bench.machine_instructions import _calls
from bench.support import bench_upstream, free_port, side, side_arguments, sides, spawned

PAUSE = 0.003


def per_call(pid: int, call: Calls, calls: int, folder: Path) -> dict[str, dict[str, float]]:
    """Each thread's system calls per call (`name/tid` -> call -> count), over `calls` calls."""
    call(50, 0.0)
    out = folder / f"perf-{pid}.txt"
    tracer = subprocess.Popen(["perf", "trace", "-s", "-p", str(pid), "-o", str(out)], stderr=subprocess.DEVNULL)
    time.sleep(2)  # attached
    call(calls, PAUSE)
    time.sleep(0.2)
    tracer.send_signal(signal.SIGINT)
    tracer.wait()
    threads: dict[str, dict[str, float]] = {}
    thread: dict[str, float] | None = None
    for line in out.read_text().splitlines():
        head = re.match(r"\s*(\S+) \((\d+)\), \d+ events", line)
        if head:
            thread = threads.setdefault(f"{head.group(1)}/{head.group(2)}", {})
            continue
        row = re.match(r"^\s+(\w+)\s+(\d+)\s+\d+\s+[\d.]+", line)
        if row and thread is not None:
            thread[row.group(1)] = int(row.group(2)) / calls
    return threads


def main() -> None:
    args = side_arguments(__doc__, 200, doors=True)
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        folder = Path(tmp)
        upstream = bench_upstream(stack)
        for name, tree in sides(args.tree, args.bare):
            port = free_port()
            server = side(tree, upstream, folder, port)
            with spawned(server.command, server.ready, env=server.env, cwd=server.cwd) as (process, _):
                url = f"http://127.0.0.1:{port}"
                call = door_calls(args.door, url) if tree is not None else \
                    (lambda count, pause, url=url, path=server.path:
                     asyncio.run(_calls(url, path, count, post=False, pause=pause)))
                threads = per_call(process.pid, call, args.calls, folder)
            print(f"{name}: system calls per call ({args.calls} calls)")
            for thread, counts in threads.items():
                shown = ", ".join(f"{call} {count:.2f}" for call, count in sorted(counts.items(), key=lambda i: -i[1])
                                  if count >= 0.05)
                if shown and thread.split("/")[0] in ("python", "pyreqwest"):
                    print(f"  {thread}: {shown}")


if __name__ == "__main__":
    main()
