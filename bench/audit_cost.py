"""What recording a call before it is sent costs: an audit row alone against a row and its outcome, per call.

    python -m bench.audit_cost [--rounds 5] [--calls 200]

One writer, `Store.add_audit` then (for "+ outcome") `Store.update_audit` on the same row, SQLite (WAL) and
PostgreSQL with fsync on (started on a free loopback port in a temporary folder). For PostgreSQL a third column
commits the outcome the way the store did before choosing not to: waiting for the WAL flush like the row.
Modes take turns in each round; medians are printed, in microseconds per call.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.support import ROOT

sys.path.insert(0, str(ROOT / "tests"))

from shared_servers import PostgresServer  # noqa: E402

from gateway.store import AuditRow, SQLiteStore, Store  # noqa: E402
from gateway.store.postgres import PostgresStore  # noqa: E402


async def _per_call(store: Store, calls: int, mode: str) -> float:
    started = time.perf_counter()
    for n in range(calls):
        row = AuditRow(time=time.time(), kind="tool", agent="a", tool="t", arguments={"n": n}, status="running")
        await store.add_audit(row)
        row.status, row.latency_ms = "ok", 1.0
        if mode == "outcome":
            await store.update_audit(row)
        elif mode == "flushed outcome" and isinstance(store, PostgresStore):
            async with store._connection() as conn:  # noqa: SLF001 - the bench compares against the store's own
                await conn.execute("UPDATE audit SET status = %s, latency_ms = %s WHERE id = %s",
                                   (row.status, row.latency_ms, row.id))
    return (time.perf_counter() - started) / calls * 1e6


async def _measure(store: Store, modes: list[str], rounds: int, calls: int) -> dict[str, float]:
    await _per_call(store, 50, "outcome")
    spent: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(rounds):
        for mode in modes:
            spent[mode].append(await _per_call(store, calls, mode))
    await store.aclose()
    return {mode: statistics.median(values) for mode, values in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    postgres = PostgresServer().start(durable=True)
    try:
        with tempfile.TemporaryDirectory() as folder:
            sqlite = asyncio.run(_measure(SQLiteStore(Path(folder) / "state.db"), ["row", "outcome"], args.rounds,
                                          args.calls * 10))
            pg = asyncio.run(_measure(PostgresStore(postgres.create_database()), ["row", "outcome", "flushed outcome"],
                                      args.rounds, args.calls))
    finally:
        postgres.stop()
    print(f"SQLite:     row {sqlite['row']:.0f} µs, row + outcome {sqlite['outcome']:.0f} µs per call")
    print(f"PostgreSQL: row {pg['row']:.0f} µs, row + outcome {pg['outcome']:.0f} µs "
          f"(+ an outcome waiting for its flush: {pg['flushed outcome']:.0f} µs) per call")


if __name__ == "__main__":
    main()
