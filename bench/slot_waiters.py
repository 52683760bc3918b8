"""Waiting for an api's slot across instances (`max_concurrency` with `gateway.redis`): is a caller of one instance
starved by a busy other instance?

    python -m bench.slot_waiters [--rounds 3] [--seconds 10] [--busy 8] [--slots 2] [--delay 0.05]

Processes, all on 127.0.0.1: Redis (Debian's redis-server), a slow upstream (bench/upstream.py, each answer
`--delay` seconds late) and two `gateway serve` instances, A and B, each with its own store, the api's
`max_concurrency: --slots` counted in Redis. For `--seconds`, `--busy` callers send calls one after another to B
while one caller sends calls one after another to A ("apart"); then the same callers, the lone one on B too
("together", the control: the same waiting with no second instance involved). Each caller is its own httpx client
calling the direct door (`listIssues`). With every caller served alike, each would get 1/(busy + 1) of the calls.

Printed per setup (medians over rounds, the setups taking turns): the calls each side finished, the lone caller's
share of all calls against the even share, its p50 and p95 wait (the call's time less the upstream's delay) beside
a busy caller's, and the calls refused as busy (a wait past the api's timeout), with the load average; and the
wait a first-come queue would give every call, (callers / slots - 1) x the upstream's delay. Before and after a
change, run it in turns with another tree's `gateway` (`PYTHONPATH=<tree>`: the spawned gateways import it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

from bench.support import CALL_ARGS, ROOT, free_port, python_module, spawned, write_project

sys.path.insert(0, str(ROOT / "tests"))

from shared_servers import RedisServer  # noqa: E402

PATH = "/agents/bench/tools/listIssues"


async def _caller(url: str, until: float, delay: float, waits: list[float], refused: list[int]) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=120, trust_env=False) as client:
        while time.monotonic() < until:
            started = time.perf_counter()
            answer = await client.post(PATH, json=CALL_ARGS)
            if answer.status_code == 200:
                waits.append(time.perf_counter() - started - delay)
            else:
                refused.append(answer.status_code)


async def _round(lone: str, busy: str, callers: int, seconds: float, delay: float) -> dict[str, float]:
    until = time.monotonic() + seconds
    lone_waits: list[float] = []
    busy_waits: list[list[float]] = [[] for _ in range(callers)]
    refused: list[int] = []
    await asyncio.gather(_caller(lone, until, delay, lone_waits, refused),
                         *(_caller(busy, until, delay, waits, refused) for waits in busy_waits))
    every_busy = [w for waits in busy_waits for w in waits]
    total = len(lone_waits) + len(every_busy)
    return {
        "lone calls": len(lone_waits), "busy calls": len(every_busy),
        "lone share": len(lone_waits) / total if total else 0.0,
        "lone p50 ms": _quantile(lone_waits, 0.5) * 1000, "lone p95 ms": _quantile(lone_waits, 0.95) * 1000,
        "busy p50 ms": _quantile(every_busy, 0.5) * 1000, "busy p95 ms": _quantile(every_busy, 0.95) * 1000,
        "refused": len(refused),
    }


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--busy", type=int, default=8, help="callers on the busy instance")
    parser.add_argument("--slots", type=int, default=2, help="the api's max_concurrency")
    parser.add_argument("--delay", type=float, default=0.05, help="seconds the upstream takes per answer")
    args = parser.parse_args()
    redis = RedisServer().start()
    try:
        with ExitStack() as stack, tempfile.TemporaryDirectory() as folder:
            port = free_port()
            upstream = f"http://127.0.0.1:{port}"
            stack.enter_context(spawned(python_module("bench.upstream", "--port", str(port), "--delay",
                                                      str(args.delay)), upstream + "/"))
            urls = []
            for name in ("a", "b"):
                project = write_project(Path(folder) / name, upstream, github=False)
                with open(project / "agents.yaml", "a") as yaml:
                    yaml.write(f"gateway: {{redis: '{redis.url}', max_concurrency: {args.slots}}}\n")
                gateway_port = free_port()
                url = f"http://127.0.0.1:{gateway_port}"
                stack.enter_context(spawned(
                    python_module("gateway", "serve", "--port", str(gateway_port), "--no-access-log", "--specs",
                                  str(project / "specs"), "--agents", str(project / "agents.yaml")),
                    url + "/healthz", env={"GATEWAY_CACHE_DIR": str(project / "cache")}, cwd=project))
                urls.append(url)
            asyncio.run(_round(urls[0], urls[1], args.busy, 2.0, args.delay))  # warm both
            found: dict[str, list[dict[str, float]]] = {"apart": [], "together": []}
            for _ in range(args.rounds):
                found["apart"].append(asyncio.run(_round(urls[0], urls[1], args.busy, args.seconds, args.delay)))
                found["together"].append(asyncio.run(_round(urls[1], urls[1], args.busy, args.seconds, args.delay)))
    finally:
        redis.stop()
    print(f"{args.busy} busy callers, 1 lone caller, {args.slots} slots in Redis, upstream {args.delay * 1000:g} ms, "
          f"{args.rounds} rounds of {args.seconds:g} s; load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    queued = ((args.busy + 1) / args.slots - 1) * args.delay * 1000
    print(f"even share: {1 / (args.busy + 1):.3f}; a first-come queue's wait: (callers / slots - 1) x upstream = "
          f"{queued:.0f} ms a call")
    keys = list(found["apart"][0])
    print(f"{'':<12}" + "".join(f"{key:>13}" for key in keys))
    for setup, rounds in found.items():
        print(f"{setup:<12}" + "".join(f"{statistics.median(r[key] for r in rounds):>13.3f}" for key in keys))


if __name__ == "__main__":
    main()
