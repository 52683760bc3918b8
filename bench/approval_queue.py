"""What each client's share of the approval queue costs: a hold counted against its client's cap, and the listing
taken in turns by client, against the hold and the oldest-first listing they replaced.

    python -m bench.approval_queue [--rounds 5] [--clients 200] [--each 100]

The queue holds `clients` x `each` pending calls (every client at the default cap of 100: the deepest queue the
cap allows that many clients), on SQLite (WAL) and on PostgreSQL (started on a free loopback port in a temporary
folder). Per round, modes take turns: 100 holds of one more client's calls with and without `pending_cap` (each
undone by a denial, so the queue stays as deep), and 20 listings of 100 and of 1,000 rows, oldest first and in
turns; and 100 looks at one full client's room before a run pauses (`room_for`): its rows read up to the cap, as
before mend46, against the store's count. Medians of the rounds, per hold, listing or look, with the ratio and the
load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from bench.both_stores import on_both_stores
from gateway.store import ApprovalRecord, RunRecord, Store


def _held(client: str, n: int) -> tuple[RunRecord, list[ApprovalRecord]]:
    run = RunRecord(id=f"run-{client}-{n}", agent="clerk", kind="call", client=client)
    return run, [ApprovalRecord(id=f"apr-{client}-{n}", run_id=run.id, agent="clerk", tool="createItem",
                                arguments={"n": n}, client=client)]


async def _fill(store: Store, clients: int, each: int) -> None:
    """One run per client holding its `each` calls (a statement per client: quick to fill, the same rows)."""
    for c in range(clients):
        run = RunRecord(id=f"run-c{c}", agent="clerk", kind="call", client=f"c{c}")
        await store.save_run(run, [ApprovalRecord(id=f"apr-c{c}-{n}", run_id=run.id, agent="clerk", tool="createItem",
                                                  arguments={"n": n}, client=run.client) for n in range(each)])


async def _holds(store: Store, capped: bool, tag: str) -> float:
    """Milliseconds per hold of a newcomer's call (denied after it, so the queue keeps its depth)."""
    spent = 0.0
    for n in range(100):
        run, records = _held(f"new-{tag}", n)
        started = time.perf_counter()
        assert await store.save_run(run, records, pending_cap=100 if capped else None)
        spent += time.perf_counter() - started
        await store.decide_approval(records[0].id, approve=False)
    return spent / 100 * 1000


async def _listings(store: Store, limit: int, fair: bool) -> float:
    started = time.perf_counter()
    for _ in range(20):
        await store.list_approvals(limit=limit, fair=fair)
    return (time.perf_counter() - started) / 20 * 1000


async def _looks(store: Store, count: bool) -> float:
    """Milliseconds per look at a full client's room: its pending rows read up to the cap (the old way), or counted."""
    started = time.perf_counter()
    for _ in range(100):
        if count:
            await store.pending_count("c0")
        else:
            len(await store.list_approvals(status="pending", client="c0", limit=100))
    return (time.perf_counter() - started) / 100 * 1000


async def _rounds(store: Store, rounds: int, clients: int, each: int) -> dict[str, float]:
    await _fill(store, clients, each)
    spent: dict[str, list[float]] = {}
    for r in range(rounds):
        for capped in (False, True):
            spent.setdefault(f"hold{' capped' if capped else ''}", []).append(
                await _holds(store, capped, f"{r}-{capped}"))
        for limit in (100, 1000):
            for fair in (False, True):
                spent.setdefault(f"list {limit}{' in turns' if fair else ''}", []).append(
                    await _listings(store, limit, fair))
        for count in (False, True):
            spent.setdefault(f"room {'count' if count else 'rows'}", []).append(await _looks(store, count))
    return {mode: statistics.median(values) for mode, values in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--each", type=int, default=100)
    args = parser.parse_args()
    results = on_both_stores(lambda store: _rounds(store, args.rounds, args.clients, args.each))
    print(f"{args.clients} clients x {args.each} pending calls; ms per hold or listing, median of {args.rounds} "
          f"rounds; load average {os.getloadavg()[0]:.2f}")
    for name, found in results.items():
        print(f"{name}: hold {found['hold']:.3f} -> capped {found['hold capped']:.3f} "
              f"(x{found['hold capped'] / found['hold']:.2f}); "
              f"list 100 {found['list 100']:.2f} -> in turns {found['list 100 in turns']:.2f} "
              f"(x{found['list 100 in turns'] / found['list 100']:.2f}); "
              f"list 1000 {found['list 1000']:.2f} -> in turns {found['list 1000 in turns']:.2f} "
              f"(x{found['list 1000 in turns'] / found['list 1000']:.2f}); "
              f"room: rows {found['room rows']:.3f} -> count {found['room count']:.3f} "
              f"(x{found['room count'] / found['room rows']:.2f})")


if __name__ == "__main__":
    main()
