"""What one fused tool search over Graph v1.0 costs, in the searching thread and in the whole process.

    python bench/search_fused_cost.py [--rounds 2]

The search `python bench/search.py --embeddings local` times (BM25's first 50 fused with the packaged model's
ranking, its query adapter on), over the same requests (every request of the parts before `round3`, each once),
split in three: BM25 alone; the fused search of a request seen for the first time (its embedding computed); the
same search again (its embedding from the cache: the cosines, their order and the fusion). Then the whole search as
an agent's door asks it (`gateway.offer.toolsearch.search`, for an agent given every Graph tool, 10 results), a
request's first search and its second. Each figure is a median
and p95 of the wall clock, of the searching thread's CPU (`time.thread_time`) and of the process's CPU
(`time.process_time`): a library that computes in threads of its own (a BLAS) shows only in the last.
It imports the gateway of the tree it is in: to measure another tree with the same venv, copy it into that tree's
`bench/` and run it there.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.search import PARTS, ROUND3, SPECS, _compile, load_tasks  # noqa: E402  (run as a script)

Clocks = dict[str, list[float]]


def _timed(clocks: Clocks, run: Callable[..., Any], *args: Any) -> Any:
    wall, process, thread = time.perf_counter(), time.process_time(), time.thread_time()
    result = run(*args)
    clocks["thread CPU"].append((time.thread_time() - thread) * 1000)
    clocks["process CPU"].append((time.process_time() - process) * 1000)
    clocks["wall"].append((time.perf_counter() - wall) * 1000)
    return result


def _door(graph: Any) -> Callable[[str], Any]:
    """`toolsearch.search` for an agent whose tools are every Graph tool, with `{kind: local}`."""
    from gateway.catalog import AgentTool
    from gateway.config.embeddings_endpoint import SearchEmbeddings
    from gateway.offer.toolsearch import search
    from gateway.toolsets import Toolset

    toolset = Toolset(agent="bench", catalog=graph, tools={
        tool.name: AgentTool(name=tool.name, description=tool.description, input_schema=tool.input_schema, tool=tool)
        for tool in graph}, embeddings=SearchEmbeddings.model_validate({"kind": "local", "timeout": 3600}))
    return functools.partial(search, graph, toolset)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="passes over the requests (the first embeds them)")
    args = parser.parse_args(argv)
    import gateway
    from gateway.config.embeddings_endpoint import SearchEmbeddings
    from gateway.offer import embeddings
    from gateway.offer.index import index_of

    settings = SearchEmbeddings.model_validate({"kind": "local", "timeout": 3600})
    graph = _compile(SPECS["graph"], index=True, cache=Path(tempfile.gettempdir()) / "gateway-bench-search-cache")[1]
    api = next(iter(graph.apis))
    for pending in embeddings.prepare(settings, graph, [api]):
        if isinstance(pending, embeddings.Computation):
            pending.wait()
    index = index_of(graph)
    queries = list(dict.fromkeys(task["q"] for name in SPECS for part in PARTS[:PARTS.index(ROUND3)]
                                 for task in load_tasks(name).get(part, [])))
    stages: dict[str, Clocks] = {stage: {"wall": [], "thread CPU": [], "process CPU": []}
                                 for stage in ("BM25 alone", "fused, request embedded", "fused, request cached")}
    index.search("warm up", limit=10)
    door = _door(graph)
    stages.update({"door, request embedded": {"wall": [], "thread CPU": [], "process CPU": []},
                   "door, request cached": {"wall": [], "thread CPU": [], "process CPU": []}})
    assert len(queries) > embeddings.QUERY_CACHE  # a request is out of the cache when its next round comes
    for _ in range(args.rounds):
        for query in queries:
            hits = _timed(stages["BM25 alone"], functools.partial(index.search, limit=embeddings.FUSION_DEPTH), query)
            bm25 = [(hit.tool, hit.score) for hit in hits]
            for stage in ("fused, request embedded", "fused, request cached"):
                _timed(stages[stage], embeddings.hybrid, settings, graph, [api], None, query, bm25)
        for query in queries:
            for stage in ("door, request embedded", "door, request cached"):
                _timed(stages[stage], door, query)
    print(f"gateway from {Path(gateway.__file__).parent}; Graph v1.0 ({len(graph)} tools), {len(queries)} requests "
          f"x {args.rounds} rounds")
    print("| stage | wall p50 / p95 | thread CPU p50 / p95 | process CPU p50 / p95 (ms) |\n|---|---|---|---|")
    for stage, clocks in stages.items():
        cells = []
        for clock in ("wall", "thread CPU", "process CPU"):
            values = sorted(clocks[clock])
            cells.append(f"{statistics.median(values):.2f} / {values[int(len(values) * 0.95)]:.2f}")
        print(f"| {stage} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
