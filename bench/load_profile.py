"""Where a serving process's event loop spends its wall time under concurrent callers: py-spy samples it.

    python -m bench.load_profile [--side http|bare] [--seconds 15] [--callers 32] [--tree PATH] [--gil] [--native]
                                  [--switches]

The upstream (bench/upstream.py) and one side in processes of their own on 127.0.0.1: `gateway serve` on the bench
spec (the HTTP door's `listIssues`, from `--tree`'s source when given) or the bare proxy on pyreqwest; `--callers`
callers, each on its own httpx client, call it back to back for two seconds (warm-up), then for `--seconds` while
`py-spy record` samples every thread of the side at 200 Hz, idle samples included (`--gil`: only samples that hold
the GIL). Printed: the throughput, and the event loop's samples by where they were: in the loop's own native code
(waiting or running callbacks' C parts), in the audit's two SQLite statements, in pyreqwest's send, in uvicorn's
send, and the rest by the innermost gateway, Starlette or uvicorn frame. A share of the loop's wall time, not of its
CPU: a thread the kernel did not run is sampled where it stood. Each share is also given in µs a call (the share of
the run's wall time over the calls made in it): sides that answer at different rates are compared per call, not
by share (a side that answers more calls a second spends a smaller share of its time on each). `--native`: native
frames too, and each place's samples by the innermost frame (py-spy pauses the process to unwind them: the
throughput drops). `--switches`: no sampling; each thread's time on a CPU, its time runnable but waiting for a
CPU (the kernel's schedstat) and its voluntary and involuntary context switches, a call. Sampling needs `py-spy`
(the `bench` extra) and the right to trace a child process.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from bench.support import CALL_ARGS, DIRECT_PATH, DOOR, ROOT, free_port, python_module, spawned, write_project

PLACES = (
    ("the audit's SQLite statements", ("add_audit_now", "update_audit_now", "commit_outcomes", "_bound_ran_out")),
    ("pyreqwest's send", ("ReqwestWire.send",)),
    ("uvicorn's send (the answer's write)", ("RequestResponseCycle.send",)),
    ("the access line (logging)", ("log_access", "LogRecord", "Handler.handle")),
)
"""Where a sample counts first: the first place (in this order) any of whose names is in one of its frames."""
INNERMOST = (("Starlette's own code", "starlette/"), ("uvicorn's own code", "uvicorn/"),
             ("the gateway's own Python", "gateway/"))
"""Else by its innermost frame of these packages (every request passes through Starlette's and uvicorn's frames)."""


async def _load(url: str, body: Any, callers: int, seconds: float) -> float:
    stop = time.perf_counter() + seconds
    done = [0]

    async def caller() -> None:
        async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
            while time.perf_counter() < stop:
                answer = await (client.get(url) if body is None else client.post(url, json=body))
                assert answer.status_code == 200, answer.text
                done[0] += 1

    await asyncio.gather(*(caller() for _ in range(callers)))
    return done[0] / seconds


def _places(raw: Path, inside: dict[str, collections.Counter[str]] | None = None
            ) -> tuple[int, collections.Counter[str]]:
    """The event loop's samples (py-spy's raw format, one stack a line) by place; with `inside`, each place's samples
    also by their innermost frame (with `--native`: the native function the thread stood in)."""
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, number = line.rpartition(" ")
        frames = stack.split(";")
        if "MainThread" not in frames[0]:
            continue
        total += int(number)
        # The innermost Python frame (with `--native` the stack goes on into native frames: `epoll_pwait (libc...)`).
        innermost = next((frame for frame in reversed(frames) if ".py:" in frame), frames[-1])
        if innermost.startswith("Runner.run"):
            place = "the loop's own native code (waiting, or a callback's C part)"
        else:
            place = next((label for label, names in PLACES
                          if any(name in frame for frame in frames for name in names)), "")
            place = place or next((label for frame in reversed(frames) for label, folder in INNERMOST
                                   if folder in frame), "other (the loop's Python, asyncio)")
        counts[place] += int(number)
        if inside is not None:
            inside.setdefault(place, collections.Counter())[frames[-1]] += int(number)
    return total, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--side", choices=("http", "bare"), default="http")
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--callers", type=int, default=32)
    parser.add_argument("--tree", type=Path, default=ROOT, help="the gateway's source tree (its own PYTHONPATH)")
    parser.add_argument("--gil", action="store_true", help="only samples that hold the GIL (default: idle too)")
    parser.add_argument("--switches", action="store_true",
                        help="no sampling: each thread's CPU, wait for a CPU and context switches a call")
    parser.add_argument("--native", action="store_true",
                        help="native frames too; each place's samples also by the innermost frame")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        folder = Path(tmp)
        port = free_port()
        upstream = f"http://127.0.0.1:{port}"
        stack.enter_context(spawned(python_module("bench.upstream", "--port", str(port)), upstream + "/"))
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        if args.side == "bare":
            command = python_module("bench.bare_proxy", "--port", str(port), "--upstream", upstream,
                                    "--client", "reqwest")
            process = stack.enter_context(spawned(command, base + "/"))[0]
            url, body = base + DIRECT_PATH, None
        else:
            write_project(folder, upstream, github=False)
            tree = args.tree.resolve()
            command = python_module("gateway", "serve", "--port", str(port), "--specs", str(folder / "specs"),
                                    "--agents", str(folder / "agents.yaml"))
            env = {"GATEWAY_CACHE_DIR": str(folder / "cache"), "PYTHONPATH": str(tree)}
            process = stack.enter_context(spawned(command, base + "/healthz", env=env, cwd=tree))[0]
            url, body = base + DOOR, CALL_ARGS
        asyncio.run(_load(url, body, args.callers, 2.0))
        if args.switches:
            before = _scheduling(process.pid)
            rate = asyncio.run(_load(url, body, args.callers, args.seconds))
            after = _scheduling(process.pid)
            print(f"{args.side} ({args.tree}): {rate:,.0f} calls/s with {args.callers} callers, not sampled")
            _print_scheduling(before, after, rate * args.seconds)
            return
        raw = folder / "samples.txt"
        spy = _tool("py-spy")
        sampler = subprocess.Popen([spy, "record", "--pid", str(process.pid), "--format", "raw", "--threads",
                                    "--gil" if args.gil else "--idle", "--rate", "200", "-o", str(raw),
                                    "--duration", str(int(args.seconds)), *(["--native"] if args.native else [])],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rate = asyncio.run(_load(url, body, args.callers, args.seconds))
        sampler.wait()
        inside: dict[str, collections.Counter[str]] | None = {} if args.native else None
        total, counts = _places(raw, inside)
    print(f"{args.side} ({args.tree}): {rate:,.0f} calls/s with {args.callers} callers; the event loop's "
          f"{total} samples ({'holding the GIL' if args.gil else 'idle included'}):")
    # A share of wall time is per call only at equal throughput: µs a call = share / (calls a second).
    for place, count in counts.most_common():
        print(f"  {count / total:6.1%}  {count / total / rate * 1e6:7.1f} µs a call  {place}")
        for frame, number in (inside or {}).get(place, collections.Counter()).most_common(6):
            print(f"          {number / total:6.1%}  {number / total / rate * 1e6:7.1f} µs a call  {frame}")


def _scheduling(pid: int) -> dict[int, tuple[str, int, int, int, int]]:
    """Each live thread of a process: name, ns on a CPU, ns waiting on a run queue (runnable, not run: the kernel's
    `/proc/PID/task/TID/schedstat`), voluntary and involuntary context switches (its `status`)."""
    out: dict[int, tuple[str, int, int, int, int]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ran, waited = (int(field) for field in (task / "schedstat").read_text().split()[:2])
            status = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines() if ":\t" in line)
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended between the listing and the read
        tid = int(task.name)
        out[tid] = ("event loop" if tid == pid else status["Name"].strip(), ran, waited,
                    int(status["voluntary_ctxt_switches"]), int(status["nonvoluntary_ctxt_switches"]))
    return out


def _print_scheduling(before: dict[int, tuple[str, int, int, int, int]],
                      after: dict[int, tuple[str, int, int, int, int]], calls: float) -> None:
    print("  per call, by thread: µs on a CPU, µs runnable but not run (waiting for a CPU), voluntary and "
          "involuntary context switches")
    for tid, (name, ran, waited, voluntary, involuntary) in sorted(after.items()):
        was = before.get(tid, (name, 0, 0, 0, 0))
        spent = [(now - then) / calls for now, then in zip((ran, waited, voluntary, involuntary), was[1:], strict=True)]
        if spent[0] / 1e3 >= 1 or spent[2] + spent[3] >= 0.05:
            print(f"    {name:12} {spent[0] / 1e3:7.1f} µs on a CPU {spent[1] / 1e3:8.1f} µs waiting for one "
                  f"{spent[2]:5.2f} voluntary {spent[3]:5.2f} involuntary")


def _tool(name: str) -> str:
    """The tool next to this interpreter (the venv's), else on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} is not installed (pip install -e '.[bench]')")
    return found


if __name__ == "__main__":
    main()
