"""Two source trees of the gateway side by side: the direct-call door's p50 and server CPU per call, A vs B.

    python -m bench.ab --a /work/main --b . [--rounds 7] [--calls 300]

Each side is a `gateway serve` process run from its tree (`PYTHONPATH` and working folder), both on the same
project and upstream; rounds alternate A and B so the machine's drift hits both alike. A figure is the median
over rounds (CPU: the mean, to the nanosecond: `bench.support.cpu_seconds`); the ratio B/A is what a change costs or
saves.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

from bench.support import CALL_ARGS, cpu_seconds, free_port, python_module, spawned, write_project

DOOR = "/agents/bench/tools/listIssues"


async def _round(url: str, calls: int) -> list[float]:
    timings = []
    async with httpx.AsyncClient(base_url=url, timeout=30, trust_env=False) as client:
        for _ in range(calls):
            started = time.perf_counter()
            response = await client.post(DOOR, json=CALL_ARGS)
            timings.append(time.perf_counter() - started)
            if response.status_code != 200:
                raise RuntimeError(f"{url}: {response.status_code} {response.text[:200]}")
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--a", type=Path, required=True, help="the baseline tree")
    parser.add_argument("--b", type=Path, required=True, help="the changed tree")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, ExitStack() as stack:
        upstream_port = free_port()
        upstream = f"http://127.0.0.1:{upstream_port}"
        stack.enter_context(spawned(python_module("bench.upstream", "--port", str(upstream_port)), upstream))
        sides = {}
        for name, tree in (("A", args.a), ("B", args.b)):
            project = write_project(Path(folder) / name, upstream, github=False)
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            command = python_module("gateway", "serve", "--port", str(port), "--specs", str(project / "specs"),
                                    "--agents", str(project / "agents.yaml"))
            env = {"PYTHONPATH": str(tree.resolve()), "GATEWAY_CACHE_DIR": str(Path(folder) / f"cache-{name}")}
            process, _ = stack.enter_context(spawned(command, f"{url}/healthz", env=env, cwd=tree.resolve()))
            sides[name] = (url, process)
        p50: dict[str, list[float]] = {"A": [], "B": []}
        cpu: dict[str, list[float]] = {"A": [], "B": []}
        for url, _ in sides.values():
            asyncio.run(_round(url, 50))  # warm-up
        for index in range(args.rounds):
            order = ("A", "B") if index % 2 == 0 else ("B", "A")
            for name in order:
                url, process = sides[name]
                before = cpu_seconds(process.pid)
                timings = asyncio.run(_round(url, args.calls))
                cpu[name].append((cpu_seconds(process.pid) - before) / args.calls * 1e6)
                p50[name].append(statistics.median(timings) * 1e6)
    a_p50, b_p50 = statistics.median(p50["A"]), statistics.median(p50["B"])
    # The mean, not the median: every call of every round counts (the CPU clock is exact; a median of rounds would
    # drop the rounds a collection or a checkpoint landed in).
    a_cpu, b_cpu = statistics.fmean(cpu["A"]), statistics.fmean(cpu["B"])
    print(f"direct door, {args.rounds} rounds x {args.calls} calls (medians over rounds)")
    print(f"  p50        A {a_p50:8.0f} us   B {b_p50:8.0f} us   B/A {b_p50 / a_p50:.2f}")
    print(f"  server CPU A {a_cpu:8.0f} us   B {b_cpu:8.0f} us   B/A {b_cpu / a_cpu:.2f}  (per call, mean over rounds)")
    print(f"  p50 per round A: {', '.join(f'{v:.0f}' for v in p50['A'])}")
    print(f"  p50 per round B: {', '.join(f'{v:.0f}' for v in p50['B'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
