"""What handing a freed slot to a waiter costs with many calls waiting in Redis (`gateway.store.redis_slot_queue`).

    python -m bench.slot_handover [--waiters 1000 5000] [--groups 50] [--settles 50] [--rounds 3] [--tree OTHER]

Redis (Debian's redis-server) on 127.0.0.1; in a process of its own per tree (`--tree`: that tree's `gateway` on
PYTHONPATH, e.g. an export of main, taking turns with this one), one api with one slot, held, and `waiters` calls of
`groups` clients queued behind it (`SharedGuards.enter`, one process standing for the instances). Then `settles`
times: the slot is given back (`settle`: its script hands it to the next waiter) and the waiter it went to gives it
back next. Printed per tree and queue length: the settle's wall time (p50, a round trip included) and Redis's own
time in the scripts (`INFO commandstats`, EVALSHA's µs a call, only settles running), medians over rounds, with the
load average. The queue is filled once per round (nothing is timed then).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]


async def _worker(url: str, waiters: int, groups: int, settles: int) -> dict[str, float]:
    """In the tree's own process: fill the queue, then time the hand-overs."""
    import redis

    from gateway.store.redis_counters import RedisCounters

    counters = RedisCounters(url)
    # Leases of 10 minutes: a waiter nothing woke looks for itself every third of a lease, and thousands of looks
    # at once (every 10 s by default) would measure the looks, not the hand-overs.
    counters.keeper.lease = 600.0
    peek = redis.Redis.from_url(url)
    peek.flushall()
    guards = counters.guards
    tasks: list[asyncio.Task[tuple[str | None, float]]] = []
    try:
        lease, _ = await guards.enter("shop", reset_after=60, limit=1, wait=0, group="holder")
        for n in range(waiters):
            tasks.append(asyncio.create_task(guards.enter("shop", reset_after=60, limit=1, wait=600,
                                                          group=f"client-{n % groups}")))
            if n % 20 == 19:  # the client's connections are not all taken at once
                await asyncio.gather(*(asyncio.sleep(0) for _ in range(20)))
                while peek.zcard("gateway:{guards}:queue:shop") < n + 1:
                    await asyncio.sleep(0.001)
        while peek.zcard("gateway:{guards}:queue:shop") < waiters:
            await asyncio.sleep(0.001)
        peek.config_resetstat()
        took = []
        for _ in range(settles):
            started = time.perf_counter()
            await guards.settle("shop", lease, True, failures=5, reset_after=60, limit=1)
            took.append(time.perf_counter() - started)
            done, _ = await asyncio.wait([t for t in tasks if not t.done()], return_when=asyncio.FIRST_COMPLETED)
            lease = done.pop().result()[0]
        stats = peek.info("commandstats")
        evalsha = stats.get("cmdstat_evalsha", {})
        return {"settle p50 ms": statistics.median(took) * 1000,
                "script us": float(evalsha.get("usec_per_call", float("nan")))}
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        peek.flushall()
        peek.close()
        await counters.aclose()


def _run(tree: Path | None, url: str, waiters: int, groups: int, settles: int) -> dict[str, float]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree.resolve())
    with tempfile.TemporaryDirectory() as folder:  # not this tree's folder: its gateway would come first
        done = subprocess.run([sys.executable, str(HERE), "--worker", url, "--waiters", str(waiters), "--groups",
                               str(groups), "--settles", str(settles)], env=env, cwd=folder, capture_output=True,
                              text=True)
    if done.returncode != 0:
        raise SystemExit(f"the worker ({tree or 'this tree'}) failed:\n{done.stderr[-3000:]}")
    found: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiters", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--settles", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tree", type=Path, help="another tree's gateway to run in turns (e.g. an export of main)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(asyncio.run(_worker(args.worker, args.waiters[0], args.groups, args.settles))))
        return
    sys.path.insert(0, str(ROOT / "tests"))
    from shared_servers import RedisServer

    trees: dict[str, Path | None] = {"this tree": None}
    if args.tree:
        trees[str(args.tree)] = args.tree
    load = os.getloadavg()[0]
    found: dict[tuple[str, int], list[dict[str, float]]] = {}
    server = RedisServer().start()
    try:
        for _ in range(args.rounds):
            for waiters in args.waiters:
                for name, tree in trees.items():
                    found.setdefault((name, waiters), []).append(_run(tree, server.url, waiters, args.groups,
                                                                      args.settles))
    finally:
        server.stop()
    print(f"one slot, {args.groups} clients' calls waiting, {args.settles} hand-overs a round, median of "
          f"{args.rounds} rounds; load average {load:.2f} -> {os.getloadavg()[0]:.2f}")
    for (name, waiters), rounds in found.items():
        p50 = statistics.median(r["settle p50 ms"] for r in rounds)
        script = statistics.median(r["script us"] for r in rounds)
        print(f"{name}, {waiters} waiting: settle p50 {p50:.3f} ms, Redis's time in the scripts {script:.1f} µs")


if __name__ == "__main__":
    main()
