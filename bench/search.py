"""Tool search: recall on the task sets, search latency over Graph v1.0, compile time and cache size with the index.

    python bench/search.py [--rounds 5]

Task sets (tests/openapi/search_tasks/*.yaml): requests as users phrase them, each with the operations that
answer it; recall@k is the share of tasks with one of those operations among the first k results. Three parts
per API: `tasks` and `holdout` (both used to tune the ranking since issue #17), `fresh` (written before the
ranking changes of #17 and never used to tune them). Misses of `fresh` are printed only with `--fresh-misses`, so
tuning does not peek at them. Latency: the median and p95 of one search (the task queries, cycled) over Graph
v1.0's 11 k tools, the index already open, in wall-clock time and in the searching thread's CPU time. Compile
time: cold compiles of each spec, with and without building the index (interleaved, median). Cache size: the
pickled entry and the index's share of it.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
TASKS = ROOT / "tests" / "openapi" / "search_tasks"
SPECS = {"github": CORPUS / "github" / "api.github.com.json", "stripe": CORPUS / "apis-guru" / "stripe.com.json",
         "graph": CORPUS / "apis-guru" / "microsoft.com" / "graph.json"}


def load_tasks(name: str) -> dict[str, Any]:
    return yaml.safe_load((TASKS / f"{name}.yaml").read_text())  # type: ignore[no-any-return]


def recall(catalog: Any, name: str, ks: tuple[int, ...] = (5, 10), api: str | None = None,
           part: str = "tasks") -> tuple[dict[int, float], list[str]]:
    """Recall@k of one task set over `catalog` (its spec compiled as `api`, default the task set's name for it),
    and the queries missed at the smallest k. `part`: `tasks`, `holdout` or `fresh`."""
    from gateway.offer.index import index_of

    tasks = load_tasks(name)
    api = api or tasks["api"]
    index = index_of(catalog)
    found = {k: 0 for k in ks}
    missed: list[str] = []
    for task in tasks[part]:
        wanted = set(task["ops"])
        names = [(h.tool.name, h.tool.operation_id) for h in index.search(task["q"], limit=max(ks), apis=[api])]
        for k in ks:
            if any(n in wanted or o in wanted for n, o in names[:k]):
                found[k] += 1
            elif k == min(ks):
                missed.append(f"{task['q']!r} -> {[n for n, _ in names[:3]]}")
    return {k: found[k] / len(tasks[part]) for k in ks}, missed


def _compile(spec: Path, *, index: bool) -> tuple[float, Any]:
    from gateway.offer.index import build_index
    from gateway.openapi import _compile, compile_specs

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "specs"
        folder.mkdir()
        (folder / spec.name).symlink_to(spec)
        original = _compile.build_index
        _compile.build_index = build_index if index else (lambda tools: b"")  # type: ignore[assignment]
        try:
            started = time.perf_counter()
            catalog = compile_specs(folder, use_cache=False)
            return time.perf_counter() - started, catalog
        finally:
            _compile.build_index = original  # type: ignore[assignment]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fresh-misses", action="store_true", help="also print the misses of the fresh set")
    args = parser.parse_args(argv)
    if not CORPUS.is_dir():
        print("../shared/corpus is absent", file=sys.stderr)
        return 1
    from gateway.offer.index import index_of

    print("| API | tools | recall@5 | recall@10 | holdout @5 / @10 | fresh @5 / @10 | "
          "cold compile (with index / without) | index | cache entry |")
    print("|---|---|---|---|---|---|---|---|---|")
    catalogs: dict[str, Any] = {}
    for name, spec in SPECS.items():
        with_index: list[float] = []
        without: list[float] = []
        for _ in range(args.rounds):  # interleaved: the machine's noise hits both alike
            seconds, catalog = _compile(spec, index=True)
            with_index.append(seconds)
            without.append(_compile(spec, index=False)[0])
        catalogs[name] = catalog
        spec_info = next(iter(catalog.apis.values()))
        entry = len(pickle.dumps((list(catalog), spec_info, catalog.diagnostics), protocol=pickle.HIGHEST_PROTOCOL))
        at, missed = recall(catalog, name, api=spec_info.name)
        held, held_missed = recall(catalog, name, api=spec_info.name, part="holdout")
        fresh, fresh_missed = recall(catalog, name, api=spec_info.name, part="fresh")
        print(f"| {name} | {len(catalog)} | {at[5]:.2f} | {at[10]:.2f} | {held[5]:.2f} / {held[10]:.2f} | "
              f"{fresh[5]:.2f} / {fresh[10]:.2f} | "
              f"{statistics.median(with_index):.2f} s / "
              f"{statistics.median(without):.2f} s | {len(spec_info.search_index) / 2**20:.1f} MiB | "
              f"{entry / 2**20:.1f} MiB |")
        shown = missed + [f"(holdout) {line}" for line in held_missed]
        shown += [f"(fresh) {line}" for line in fresh_missed] if args.fresh_misses else []
        for line in shown:
            print(f"    missed@5 {name}: {line}", file=sys.stderr)
    graph = catalogs["graph"]
    index = index_of(graph)
    queries = [task["q"] for name in SPECS for task in load_tasks(name)["tasks"]]
    index.search("warm up", limit=10)
    timings: list[float] = []
    cpu: list[float] = []
    for _ in range(5):
        for query in queries:
            started, used = time.perf_counter(), time.thread_time()
            index.search(query, limit=10)
            cpu.append((time.thread_time() - used) * 1000)
            timings.append((time.perf_counter() - started) * 1000)
    timings.sort()
    cpu.sort()
    print(f"\nsearch over Graph v1.0 ({len(graph)} tools, {len(timings)} searches): "
          f"p50 {statistics.median(timings):.2f} ms, p95 {timings[int(len(timings) * 0.95)]:.2f} ms "
          f"(CPU of the searching thread: p50 {statistics.median(cpu):.2f} ms, "
          f"p95 {cpu[int(len(cpu) * 0.95)]:.2f} ms; on a busy machine the wall clock waits for a core)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
