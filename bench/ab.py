"""Two source trees of the gateway side by side: a door's p50 and server CPU per call, A vs B.

    python -m bench.ab --a /work/main --b . [--rounds 7] [--calls 300] [--callers 1] [--bare] [--door http|mcp]
                       [--direct] [--log-format text|json]

Each side is a `gateway serve` process run from its tree (`PYTHONPATH` and working folder), both on the same
project and upstream; rounds alternate A and B so the machine's drift hits both alike. A figure is the median
over rounds (CPU: the mean, to the nanosecond: `bench.support.cpu_seconds`); the ratio B/A is what a change costs or
saves. The CPU is also split by thread (`bench.support.thread_cpu_ns`): the event loop's, pyreqwest's, the others'.
`--bare` adds the bare proxy (bench/bare_proxy.py, on the same upstream) as a third side taking its turn, the floor
of the CPU goal (<= 1.6x its CPU per call). `--door mcp` makes the calls MCP `tools/call`s of a 2025-06-18 session
(each round's client opens its own, before its timed calls), as `bench.calls` makes them, and `--door mcp2026`
stateless 2026-07-28 `tools/call`s with the envelope the official client sends by default; `--direct` adds the
upstream called directly (the call's floor) as a side taking its turn, so each tree's p50 is also given × direct.
`--callers N`: N callers at once share each round's calls (each on its own client, in this one process), and each
side's throughput is printed too.
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

from bench.support import (
    CALL_ARGS,
    CLIENT_THREADS,
    DIRECT_HEADERS,
    DIRECT_PATH,
    LOOP,
    cpu_seconds,
    cpu_split,
    free_port,
    mcp_call,
    mcp_open,
    mcp_stateless_call,
    python_module,
    spawned,
    thread_cpu_ns,
    thread_ticks,
    write_project,
)

DOOR = "/agents/bench/tools/listIssues"


async def _round(url: str, calls: int, door: str = "http", callers: int = 1) -> list[float]:
    """Each call's time; with `callers` > 1, that many callers, each on its own client, share the calls."""
    if callers > 1:
        share = [calls // callers + (index < calls % callers) for index in range(callers)]
        rounds = await asyncio.gather(*(_round(url, count, door) for count in share))
        return [timing for timings in rounds for timing in timings]
    timings = []
    async with httpx.AsyncClient(base_url=url, timeout=30, trust_env=False) as client:
        if door == "direct":
            async def call() -> None:
                response = await client.get(DIRECT_PATH, headers=DIRECT_HEADERS)
                if response.status_code != 200:
                    raise RuntimeError(f"{url}: {response.status_code} {response.text[:200]}")
                response.json()
        elif door == "mcp":
            headers = await mcp_open(client, f"{url}/mcp/bench")

            async def call() -> None:
                await mcp_call(client, f"{url}/mcp/bench", headers, "listIssues", CALL_ARGS)
        elif door == "mcp2026":
            async def call() -> None:
                await mcp_stateless_call(client, f"{url}/mcp/bench", "listIssues", CALL_ARGS)
        else:
            async def call() -> None:
                response = await client.post(DOOR, json=CALL_ARGS)
                if response.status_code != 200:
                    raise RuntimeError(f"{url}: {response.status_code} {response.text[:200]}")
        for _ in range(calls):
            started = time.perf_counter()
            await call()
            timings.append(time.perf_counter() - started)
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--a", type=Path, required=True, help="the baseline tree")
    parser.add_argument("--b", type=Path, required=True, help="the changed tree")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--callers", type=int, default=1,
                        help="concurrent callers sharing a round's calls, each on its own client (then: throughput)")
    parser.add_argument("--log-format", choices=("text", "json"), default="text",
                        help="both sides' `gateway serve --log-format` (the access line's format)")
    parser.add_argument("--bare", action="store_true", help="the bare proxy as a third side (the CPU goal's floor)")
    parser.add_argument("--door", choices=("http", "mcp", "mcp2026"), default="http",
                        help="the direct-call door, MCP in a 2025 session, or MCP stateless (2026-07-28)")
    parser.add_argument("--direct", action="store_true", help="the upstream called directly as a side of its own")
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
                                    "--agents", str(project / "agents.yaml"), "--log-format", args.log_format)
            env = {"PYTHONPATH": str(tree.resolve()), "GATEWAY_CACHE_DIR": str(Path(folder) / f"cache-{name}")}
            process, _ = stack.enter_context(spawned(command, f"{url}/healthz", env=env, cwd=tree.resolve()))
            sides[name] = (url, process)
        if args.bare:
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            process, _ = stack.enter_context(spawned(python_module(
                "bench.bare_proxy", "--port", str(port), "--upstream", upstream), f"{url}/"))
            sides["bare"] = (url, process)
        if args.direct:
            sides["direct"] = (upstream, None)
        doors = {"A": args.door, "B": args.door, "direct": "direct"}
        p50: dict[str, list[float]] = {name: [] for name in sides}
        cpu: dict[str, list[float]] = {name: [] for name in sides if name != "direct"}
        rate: dict[str, list[float]] = {name: [] for name in sides}
        places: dict[str, dict[str, float]] = {name: {"loop": 0.0, "client": 0.0, "other": 0.0} for name in sides}
        ticks: dict[str, dict[str, list[int]]] = {name: {"loop": [0, 0], "client": [0, 0]} for name in sides}
        for name, (url, _) in sides.items():
            asyncio.run(_round(url, 50, doors.get(name, "http")))  # warm-up
        for index in range(args.rounds):
            order = list(sides) if index % 2 == 0 else list(reversed(sides))
            for name in order:
                url, process = sides[name]
                if process is None:  # the upstream called directly: its p50 only
                    started = time.perf_counter()
                    p50[name].append(statistics.median(asyncio.run(_round(url, args.calls, "direct",
                                                                          args.callers))) * 1e6)
                    rate[name].append(args.calls / (time.perf_counter() - started))
                    continue
                threads, before = thread_cpu_ns(process.pid), cpu_seconds(process.pid)
                sampled = thread_ticks(process.pid)
                started = time.perf_counter()
                timings = asyncio.run(_round(url, args.calls, doors.get(name, "http"), args.callers))
                rate[name].append(args.calls / (time.perf_counter() - started))
                spent = cpu_seconds(process.pid) - before
                for tid, (user, system) in thread_ticks(process.pid).items():
                    thread = threads.get(tid, ("", 0))[0]
                    place = "loop" if thread == LOOP else "client" if thread == CLIENT_THREADS else None
                    if place is not None:
                        was = sampled.get(tid, (0, 0))
                        ticks[name][place][0] += user - was[0]
                        ticks[name][place][1] += system - was[1]
                cpu[name].append(spent / args.calls * 1e6)
                p50[name].append(statistics.median(timings) * 1e6)
                for thread, (ns, _count) in cpu_split(threads, thread_cpu_ns(process.pid), round(spent * 1e9)).items():
                    place = "loop" if thread == LOOP else "client" if thread == CLIENT_THREADS else "other"
                    places[name][place] += ns / 1e3 / args.calls / args.rounds
    # The mean, not the median: every call of every round counts (the CPU clock is exact; a median of rounds would
    # drop the rounds a collection or a checkpoint landed in).
    a_p50, b_p50 = statistics.median(p50["A"]), statistics.median(p50["B"])
    a_cpu, b_cpu = statistics.fmean(cpu["A"]), statistics.fmean(cpu["B"])
    door = {"mcp": "MCP door (a 2025-06-18 session)", "mcp2026": "MCP door (stateless 2026-07-28)"}.get(args.door,
                                                                                                     "direct door")
    print(f"{door}, {args.rounds} rounds x {args.calls} calls"
          + (f" from {args.callers} callers" if args.callers > 1 else "") + " (medians over rounds)")
    print(f"  p50        A {a_p50:8.0f} us   B {b_p50:8.0f} us   B/A {b_p50 / a_p50:.3f}")
    if args.callers > 1:
        a_rate, b_rate = statistics.median(rate["A"]), statistics.median(rate["B"])
        print(f"  calls/s    A {a_rate:8.0f}      B {b_rate:8.0f}      B/A {b_rate / a_rate:.3f}"
              + "".join(f"   {side} {statistics.median(rate[side]):.0f}" for side in ("bare", "direct")
                        if side in rate))
        print(f"  calls/s per round A: {', '.join(f'{v:.0f}' for v in rate['A'])}")
        print(f"  calls/s per round B: {', '.join(f'{v:.0f}' for v in rate['B'])}")
    if "direct" in sides:
        direct = statistics.median(p50["direct"])
        ratios = [(a / d, b / d) for a, b, d in zip(p50["A"], p50["B"], p50["direct"], strict=True)]
        print(f"  direct p50 {direct:.0f} us: A {a_p50 / direct:.2f}x, B {b_p50 / direct:.2f}x (medians); per round "
              f"A/B x direct: {', '.join(f'{a:.2f}/{b:.2f}' for a, b in ratios)}")
    print(f"  server CPU A {a_cpu:8.1f} us   B {b_cpu:8.1f} us   B/A {b_cpu / a_cpu:.3f}  (per call, mean over rounds)")
    for place, what in (("loop", "event loop"), ("client", "pyreqwest"), ("other", "other threads")):
        a, b = places["A"][place], places["B"][place]
        print(f"    {what:13} A {a:8.1f} us   B {b:8.1f} us" + (f"   B/A {b / a:.3f}" if a else "")
              + "".join(f"   {side} in the kernel {_kernel_share(ticks[side][place]):.0%}"
                        for side in ("A", "B") if place in ticks[side]))
    print(f"  server CPU per round A: {', '.join(f'{v:.1f}' for v in cpu['A'])}")
    print(f"  server CPU per round B: {', '.join(f'{v:.1f}' for v in cpu['B'])}")
    if "bare" in sides:
        bare = statistics.fmean(cpu["bare"])
        split = ", ".join(f"{what} {places['bare'][place]:.1f}" + (
            f" ({_kernel_share(ticks['bare'][place]):.0%} in the kernel)" if place in ticks["bare"] else "")
            for place, what in (("loop", "event loop"), ("client", "pyreqwest"), ("other", "other threads")))
        print(f"  bare proxy CPU {bare:.1f} us ({split}); A {a_cpu / bare:.3f}x it, B {b_cpu / bare:.3f}x "
              f"(goal <= 1.6x); its p50 {statistics.median(p50['bare']):.0f} us")
    print(f"  p50 per round A: {', '.join(f'{v:.0f}' for v in p50['A'])}")
    print(f"  p50 per round B: {', '.join(f'{v:.0f}' for v in p50['B'])}")
    return 0


def _kernel_share(ticks: list[int]) -> float:
    """The system ticks' share of a thread's sampled ticks (`thread_ticks`): about that share of its exact CPU time
    was spent in the kernel."""
    user, system = ticks
    return system / (user + system) if user + system else float("nan")


if __name__ == "__main__":
    raise SystemExit(main())
