"""What the audit's SQLite statements cost a call, by how they are committed: wall and CPU time on one thread.

    python -m bench.audit_commits [--rounds 7] [--calls 2000]

The store's own table, statements and inline connection (`open_inline`: WAL, `synchronous=NORMAL`, no wait, no
checkpoint) in a temporary folder; each form writes `--calls` calls' rows (the bench's `listIssues` arguments) and,
where it says so, their outcomes, the forms taking turns each round, the WAL truncated between them. Medians of the
rounds, in microseconds a call: wall (`perf_counter`) and this thread's CPU (`thread_time`, user and kernel):
- row and outcome, each its own commit (main 749cd5e2's way);
- the row alone (the floor of the promise: the row committed before the call is sent);
- the outcome in the transaction of the next call's row (branch fast54: measured, not kept);
- 32 rows, then their 32 outcomes in one transaction (32 callers' outcomes grouped by a writer of their own).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable

from gateway.store.sqlite_tables import INSERT_RUNNING, SCHEMA, UPDATE_AUDIT, upgrade_schema
from gateway.store.sqlite_writes import open_inline

ARGUMENTS = '{"owner":"octo","repo":"hello world","state":"open","labels":["bug","ui"],"per_page":30}'
OUTCOME = ("ok", 200, 1.2, 512, None, None)


def _running() -> tuple[object, ...]:
    return (time.time(), None, "bench", "listIssues", "bench", ARGUMENTS, None, None, None)


def _each_commits(cursor: sqlite3.Cursor, calls: int) -> None:
    for _ in range(calls):
        row_id = cursor.execute(INSERT_RUNNING, _running()).lastrowid
        cursor.execute(UPDATE_AUDIT, (*OUTCOME, row_id))


def _row_alone(cursor: sqlite3.Cursor, calls: int) -> None:
    for _ in range(calls):
        cursor.execute(INSERT_RUNNING, _running())


def _with_next_row(cursor: sqlite3.Cursor, calls: int) -> None:
    waiting: list[tuple[object, ...]] = []
    for _ in range(calls):
        cursor.execute("BEGIN IMMEDIATE")
        cursor.executemany(UPDATE_AUDIT, waiting)
        row_id = cursor.execute(INSERT_RUNNING, _running()).lastrowid
        cursor.execute("COMMIT")
        waiting = [(*OUTCOME, row_id)]


def _grouped_32(cursor: sqlite3.Cursor, calls: int) -> None:
    ids: list[int | None] = []
    for _ in range(calls):
        ids.append(cursor.execute(INSERT_RUNNING, _running()).lastrowid)
        if len(ids) == 32:
            cursor.execute("BEGIN IMMEDIATE")
            cursor.executemany(UPDATE_AUDIT, [(*OUTCOME, row_id) for row_id in ids])
            cursor.execute("COMMIT")
            ids = []


FORMS: dict[str, Callable[[sqlite3.Cursor, int], None]] = {
    "row and outcome, each its own commit": _each_commits,
    "the row alone": _row_alone,
    "the outcome with the next call's row": _with_next_row,
    "32 rows, then their outcomes in one commit": _grouped_32,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in FORMS}
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "audit.db")
        main_connection = sqlite3.connect(path, isolation_level=None)
        main_connection.execute("PRAGMA journal_mode=WAL")
        main_connection.executescript(SCHEMA)
        upgrade_schema(main_connection)
        cursor = open_inline(path).cursor()
        for _ in range(args.rounds):
            for name, form in FORMS.items():
                wall, cpu = time.perf_counter(), time.thread_time()
                form(cursor, args.calls)
                figures[name].append(((time.perf_counter() - wall) / args.calls * 1e6,
                                      (time.thread_time() - cpu) / args.calls * 1e6))
                main_connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        cursor.connection.close()
        main_connection.close()
    print(f"µs a call, medians of {args.rounds} rounds of {args.calls} calls (wall / this thread's CPU):")
    for name, values in figures.items():
        print(f"  {name:45s} {statistics.median(w for w, _ in values):6.1f} / "
              f"{statistics.median(c for _, c in values):5.1f}")


if __name__ == "__main__":
    main()
