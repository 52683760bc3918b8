"""What keeping each client's stored conversations within its cap costs a save (`gateway.store.kept_conversations`).

    python -m bench.kept_conversations [--rounds 5] [--kept 10000] [--saves 200]

One client holds `kept` stored conversations (the default cap), each a small Response (about 1 kB of messages), on
SQLite (WAL) and on PostgreSQL (started on a free loopback port in a temporary folder). Per round, modes take
turns: `saves` saves of one more conversation without a cap (counted, nothing removed) and with the cap (counted,
then the client's oldest removed: one a save at the cap). Medians of the rounds, per save, with the ratio and the
load average. What was tried first (a walk of the client's newest `kept` index entries on every save) and its
figures: bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from bench.both_stores import on_both_stores
from gateway.store import ResponseRecord, Store

MESSAGES = [{"role": "user", "content": "x" * 500}, {"role": "assistant", "content": "y" * 500}]


def _record(n: int) -> ResponseRecord:
    return ResponseRecord(id=f"resp_{n:09d}", agent="clerk", client="c", created=1000.0 + n,
                          body={"output_text": "y" * 100}, messages=MESSAGES)


async def _saves(store: Store, start: int, count: int, keep: int | None) -> float:
    """Milliseconds per save."""
    started = time.perf_counter()
    for n in range(start, start + count):
        await store.save_response(_record(n), keep=keep)
    return (time.perf_counter() - started) / count * 1000


async def _measure(store: Store, rounds: int, kept: int, saves: int) -> dict[str, float]:
    for n in range(kept):
        await store.save_response(_record(n))
    spent: dict[str, list[float]] = {"save": [], "save capped": []}
    next_id = kept
    for _ in range(rounds):
        spent["save"].append(await _saves(store, next_id, saves, None))
        next_id += saves
        spent["save capped"].append(await _saves(store, next_id, saves, kept))
        next_id += saves
    return {mode: statistics.median(values) for mode, values in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kept", type=int, default=10_000)
    parser.add_argument("--saves", type=int, default=200)
    args = parser.parse_args()
    results = on_both_stores(lambda store: _measure(store, args.rounds, args.kept, args.saves))
    print(f"one client at {args.kept} stored conversations; ms per save, median of {args.rounds} rounds of "
          f"{args.saves}; load average {os.getloadavg()[0]:.2f}")
    for name, found in results.items():
        print(f"{name}: save {found['save']:.3f} -> capped {found['save capped']:.3f} "
              f"(x{found['save capped'] / found['save']:.2f})")


if __name__ == "__main__":
    main()
