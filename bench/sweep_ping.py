"""What the sweep's PING of Redis costs a request (the stuck-runs sweep asks it once a minute: `RedisCounters.check`).

    python -m bench.sweep_ping [--rounds 3] [--requests 3000]

One redis-server on 127.0.0.1 (Debian's, tests/shared_servers.py) and one `RedisCounters` (a 2 s timeout, as
`gateway.shared_state_timeout`'s default). Each round: `--requests` of a request's Redis round trip (`take_tokens`,
one bucket) one after another, alone, then with the sweep's check running beside them back to back (not once a minute:
as often as the event loop lets it, the worst it could be); and the check's own round trip and CPU. Printed: medians
over the rounds (each round's in brackets) and the ratio of a request's median beside the checks to alone.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from bench.support import ROOT
from gateway.store import Bucket
from gateway.store.redis_counters import RedisCounters

sys.path.insert(0, str(ROOT / "tests"))

from shared_servers import RedisServer  # noqa: E402

BUCKETS = [Bucket("bench", 1e9, 1e9)]


async def _requests(counters: RedisCounters, count: int) -> float:
    """The median seconds of `count` requests' round trips."""
    took = []
    for _ in range(count):
        start = time.perf_counter()
        await counters.take_tokens(BUCKETS)
        took.append(time.perf_counter() - start)
    return statistics.median(took)


async def _round(counters: RedisCounters, count: int) -> tuple[float, float, float, float]:
    """(a request alone, a request beside the checks, a check's round trip, a check's CPU), seconds, medians."""
    checks = []
    cpu = time.process_time()
    for _ in range(count):
        start = time.perf_counter()
        await counters.check()
        checks.append(time.perf_counter() - start)
    check_cpu = (time.process_time() - cpu) / count
    alone = await _requests(counters, count)
    stop = asyncio.Event()

    async def sweep_back_to_back() -> None:
        while not stop.is_set():
            await counters.check()

    sweeping = asyncio.create_task(sweep_back_to_back())
    beside = await _requests(counters, count)
    stop.set()
    await sweeping
    return alone, beside, statistics.median(checks), check_cpu


async def main(rounds: int, count: int) -> None:
    server = RedisServer().start()
    counters = RedisCounters(server.url, timeout=2.0)
    try:
        await _requests(counters, 200)  # connections open, scripts loaded
        results = [await _round(counters, count) for _ in range(rounds)]
    finally:
        await counters.aclose()
        server.stop()
    names = ("a request alone", "a request beside back-to-back checks", "the check's round trip", "the check's CPU")
    for index, name in enumerate(names):
        values = [result[index] * 1e6 for result in results]
        print(f"{name}: {statistics.median(values):.0f} us ({', '.join(f'{v:.0f}' for v in values)})")
    alone = statistics.median(r[0] for r in results)
    beside = statistics.median(r[1] for r in results)
    print(f"ratio beside / alone: {beside / alone:.2f} (the sweep checks once a minute, not back to back)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=3000)
    options = parser.parse_args()
    asyncio.run(main(options.rounds, options.requests))
