"""Where BM25's time goes in one tool search over Graph v1.0: SQLite's statements against the gateway's Python.

    python bench/search_bm25_split.py [--runs 5] [--tree /path/to/other/tree]

The requests `bench/search_fused_cost.py` times (every request of the parts before `round3`, each once), searched by
`ToolIndex.search` as a fused search asks it (50 results), `--runs` times; each request's figure is its fastest run
(a busy machine adds to a run, it never takes away), in the searching thread's CPU. "statements" is the time in
SQLite (the match, FTS5's `bm25()` of each matched row, the sorts; the rows fetched), the rest is the gateway's Python
around it (reading the request, the signals, the collapse of copies). Then the slowest 5% against the rest: how
many of Graph's tools the request's match holds, and the word of its match that the most tools hold.
`--tree` imports another tree's gateway (to measure main beside a branch with one venv).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class _TimedConnection:
    """The index's connection, its statements timed (run and fetched at once, as the search fetches them)."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.spent = 0.0

    def execute(self, *args: Any) -> Rows:
        started = time.thread_time()
        rows = Rows(self.connection.execute(*args).fetchall())
        self.spent += time.thread_time() - started
        return rows


class Rows(list[Any]):
    """A statement's rows, fetched, read as its cursor would be."""

    def fetchall(self) -> list[Any]:
        return list(self)

    def fetchone(self) -> Any:
        return self[0] if self else None


def _summary(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    return (f"| {name} | {statistics.mean(ordered):.2f} | {statistics.median(ordered):.2f} | "
            f"{ordered[int(len(ordered) * 0.95)]:.2f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tree", type=Path, default=ROOT)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.tree.resolve()))
    import gateway
    from bench.search import PARTS, ROUND3, SPECS, _compile, load_tasks
    from gateway.offer import index as index_module

    graph = _compile(SPECS["graph"], index=True, cache=Path(tempfile.gettempdir()) / "gateway-bench-search-cache")[1]
    index = index_module.index_of(graph)
    queries = list(dict.fromkeys(task["q"] for name in SPECS for part in PARTS[:PARTS.index(ROUND3)]
                                 for task in load_tasks(name).get(part, [])))
    for query in queries:  # the api's index opened, its lazily made word lists made
        index.search(query, limit=50)
    opened = index.opened(next(iter(graph.apis)))
    connection = opened.connection
    timed = _TimedConnection(connection)
    opened.connection = timed  # type: ignore[assignment]
    best: dict[str, tuple[float, float, float]] = {}
    for _ in range(args.runs):
        for query in queries:
            timed.spent = 0.0
            started = time.thread_time()
            index.search(query, limit=50)
            total = (time.thread_time() - started) * 1000
            sql = timed.spent * 1000
            held = best.get(query, (float("inf"),) * 3)
            best[query] = (min(held[0], total), min(held[1], sql), min(held[2], total - sql))
    opened.connection = connection
    print(f"gateway from {Path(gateway.__file__).parent}; Graph v1.0 ({len(graph)} tools), {len(queries)} requests, "
          f"each its fastest of {args.runs} runs; thread CPU in ms\n")
    print("| part | mean | p50 | p95 |\n|---|---|---|---|")
    for at, name in enumerate(("the search", "statements (SQLite, FTS5)", "the rest (Python)")):
        print(_summary(name, [figures[at] for figures in best.values()]))
    matched: dict[str, int] = {}
    commonest: dict[str, tuple[str, int]] = {}
    held_by: dict[str, int] = {}
    for query in queries:
        request = index_module.read(query)
        matched[query] = connection.execute("SELECT count(*) FROM tools WHERE tools MATCH ?",
                                            (request.expression,)).fetchone()[0]
        for phrase in re.findall(r'"[^"]+"', request.expression):
            if phrase not in held_by:
                held_by[phrase] = connection.execute("SELECT count(*) FROM tools WHERE tools MATCH ?",
                                                     (phrase,)).fetchone()[0]
        phrases = re.findall(r'"[^"]+"', request.expression) or [""]
        top = max(phrases, key=lambda phrase: held_by.get(phrase, 0))
        commonest[query] = (top, held_by.get(top, 0))
    ordered = sorted(queries, key=lambda query: best[query][0])
    slowest = ordered[int(len(ordered) * 0.95):]
    rest = ordered[:int(len(ordered) * 0.95)]
    print(f"\nthe slowest 5% ({len(slowest)}): tools matched, median "
          f"{statistics.median(matched[q] for q in slowest):.0f} (min {min(matched[q] for q in slowest)}); "
          f"the rest: median {statistics.median(matched[q] for q in rest):.0f}")
    for query in slowest[::-1][:12]:
        word, held = commonest[query]
        print(f"  {best[query][0]:.2f} ms, {matched[query]} tools matched, {word} in {held}: {query}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
