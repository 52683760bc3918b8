"""How soon the PostgreSQL store's pool serves again after the server comes back from an outage.

    python -m bench.store_recovery [--rounds 3] [--outage 9]

One PostgreSQL on 127.0.0.1 (Debian's, tests/shared_servers.py) and the store's own pool (`open_pool`, a
2 s timeout, as `gateway.shared_state_timeout`'s default). Each round: the server stopped (fast shutdown) for
`--outage` seconds, while requests ask the pool for a connection every 50 ms (`traffic`) or nothing asks
(`idle`); then restarted, and once it accepts a connection (a connection outside the pool) requests follow one
another until one is served. Printed per setting of psycopg_pool's `reconnect_timeout` (its default, 300 s, and
the store's, half its timeout): the seconds from the server answering to the first request served and the requests
refused meanwhile, medians over the rounds (each round's in brackets), and the ratio against the default.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from typing import Any

import psycopg
from psycopg_pool import PoolTimeout

from bench.support import ROOT
from gateway.store.postgres_pool import open_pool

sys.path.insert(0, str(ROOT / "tests"))

from shared_servers import PostgresServer  # noqa: E402

TIMEOUT = 2.0
SETTINGS = (("psycopg_pool's default (300 s)", 300.0), ("the store's (timeout / 2 = 1 s)", None))


async def _nothing(conn: psycopg.AsyncConnection[Any]) -> None:
    return None


async def _ask(pool: Any) -> bool:
    try:
        async with pool.connection() as conn:
            await conn.execute("SELECT 1")
        return True
    except (PoolTimeout, psycopg.OperationalError):
        return False


async def one_round(server: PostgresServer, reconnect: float | None, traffic: bool, outage: float,
                    ) -> tuple[float, int]:
    pool, _ = open_pool(server.url(), min_size=1, max_size=10, timeout=TIMEOUT, configure=_nothing,
                        reconnect_timeout=reconnect)
    await pool.open(wait=True, timeout=TIMEOUT)
    try:
        assert await _ask(pool)
        server.halt()
        ends = time.monotonic() + outage
        while time.monotonic() < ends:
            if traffic:
                await _ask(pool)
            await asyncio.sleep(0.05)
        await asyncio.to_thread(server.restart)  # returns once a connection outside the pool succeeded
        back = time.monotonic()
        refused = 0
        while not await _ask(pool):
            refused += 1
        return time.monotonic() - back, refused
    finally:
        await pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--outage", type=float, default=9.0)
    options = parser.parse_args()
    server = PostgresServer().start()
    try:
        for traffic in (True, False):
            base: float | None = None
            print(f"\n{'traffic' if traffic else 'idle'} during a {options.outage:g} s outage")
            for name, reconnect in SETTINGS:
                runs = [asyncio.run(one_round(server, reconnect, traffic, options.outage))
                        for _ in range(options.rounds)]
                seconds = statistics.median(r[0] for r in runs)
                refused = statistics.median(r[1] for r in runs)
                base = seconds if base is None else base
                print(f"  {name}: first served {seconds:.2f} s after the server answered"
                      f" [{', '.join(f'{r[0]:.2f}' for r in runs)}], refused meanwhile {refused:g}"
                      f" [{', '.join(str(r[1]) for r in runs)}], {seconds / base:.3f}x the default")
            with open("/proc/loadavg") as load:
                print(f"  load average {load.read().split()[0]}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
