"""Where a new request's tool search over Graph v1.0 spends its time, stage by stage, inside the door's own call.

    python bench/search_door_split.py [--rounds 2] [--tree /path/to/other/tree]

The door and the requests of `bench/search_fused_cost.py` (`gateway.offer.toolsearch.search` for an agent given
every Graph tool, `{kind: local}`, 10 results; every request of the parts before `round3`, each new to the caches:
707 requests, more than the door keeps). The gateway's own functions are wrapped, in this process only, by a clock
that adds up the searching thread's CPU (`time.thread_time`) and the wall clock spent in each while the door runs, so
each stage is timed where it runs, after the stage before it (what the CPU's caches hold is the door's): BM25 (its
SQLite statements apart from the Python around them), the request's embedding (the model's run, the tokenizer, the
rest), the cosines (the int8 bounds apart), the fusion, and the door's own work (the whole less its stages). A
wrapper costs about a microsecond a call, within every stage's figure. Each figure is the median (p50) and p95 over
the requests of every round. Then the memory Graph's search holds: the process's resident memory before and after
its index is opened and its vectors (and their int8 copy) are read, and the arrays' own sizes.
`--tree` imports another tree's gateway (main beside a branch with one venv). `--new-phrases` (a tree whose index
keeps each phrase's BM25, `gateway.offer.phrase_scores`): the index forgets them before each request, so every
phrase of every request is scored by FTS5 as if never asked before (the worst case; without it, a request's phrases
were often asked by the requests before it, as an agent's are).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.search_bm25_split import Rows  # noqa: E402  (run as a script)

Spent = dict[str, list[float]]
"""Per stage, per request: thread CPU then wall, in ms (two lists: `{stage: [...]}` of each clock)."""


class _Clocks:
    """The time each stage took in the current request (thread CPU and wall, seconds)."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self.wall: dict[str, float] = {}

    def wrap(self, stage: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def clocked(*args: Any, **kwargs: Any) -> Any:
            cpu, wall = time.thread_time(), time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.cpu[stage] = self.cpu.get(stage, 0.0) + time.thread_time() - cpu
                self.wall[stage] = self.wall.get(stage, 0.0) + time.perf_counter() - wall
        return clocked


class _Proxy:
    """An object whose named methods are clocked, the rest its own (a session, a tokenizer, a connection)."""

    def __init__(self, target: Any, clocks: _Clocks, methods: dict[str, str]) -> None:
        self._target = target
        for method, stage in methods.items():
            setattr(self, method, clocks.wrap(stage, _fetched(getattr(target, method)) if method == "execute"
                                              else getattr(target, method)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


def _fetched(execute: Callable[..., Any]) -> Callable[..., Any]:
    """A connection's `execute` whose rows are fetched within it (the statement runs as the rows are read)."""
    def run(*args: Any) -> Any:
        return Rows(execute(*args).fetchall())
    return run



def _resident() -> float:
    """The process's resident memory, MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tree", type=Path, default=ROOT)
    parser.add_argument("--new-phrases", action="store_true", help="forget the kept phrases before each request")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.tree.resolve()))
    import gateway
    from bench.search import PARTS, ROUND3, SPECS, _compile, load_tasks
    from gateway.catalog import AgentTool
    from gateway.config.embeddings_endpoint import SearchEmbeddings
    from gateway.offer import cosine_bounds, embeddings, local_model, tool_vectors, toolsearch
    from gateway.offer.index import index_of
    from gateway.toolsets import Toolset

    parts = PARTS[:PARTS.index(ROUND3)]
    # held out: never searched here
    assert not {"round18", "round19", "round20", "round21", "round22", "round23", "round24",
                "round25", "round26", "round27", "round28", "round29", "round30", "round31",
                "round32", "round33", "round34", "round35", "round36", "round37"} & set(parts)
    settings = SearchEmbeddings.model_validate({"kind": "local", "timeout": 3600})
    graph = _compile(SPECS["graph"], index=True, cache=Path(tempfile.gettempdir()) / "gateway-bench-search-cache")[1]
    api = next(iter(graph.apis))
    queries = list(dict.fromkeys(task["q"] for name in SPECS for part in parts
                                 for task in load_tasks(name).get(part, [])))
    assert len(queries) > max(embeddings.QUERY_CACHE, toolsearch.RECENT_SEARCHES)  # each round's requests are new
    local_model.encode_array(settings.model, ["warm up"], tuned=settings.tuned)  # the model loaded, not counted
    memory = [("the model loaded", _resident())]
    index = index_of(graph)
    index.search("warm up", limit=10)
    memory.append(("Graph's index opened", _resident()))
    vectors: Any = None
    for pending in embeddings.prepare(settings, graph, [api]):
        vectors = pending.wait() if isinstance(pending, embeddings.Computation) else pending
    memory.append(("its vectors read and bounded", _resident()))

    clocks = _Clocks()
    opened = index.opened(api)
    opened.connection = _Proxy(opened.connection, clocks, {"execute": "BM25: statements"})  # type: ignore[assignment]
    for kept in (getattr(opened, "phrases", None), getattr(opened, "resource_phrases", None)):
        if kept is not None:  # the phrases' statements (a phrase new to the index) are statements too
            kept._connection = opened.connection
    encoder = local_model._encoder(settings.model, settings.tuned)
    model = getattr(encoder, "__self__", None)
    if model is not None and hasattr(model, "_session"):
        model._session = _Proxy(model._session, clocks, {"run": "embedding: the model's run"})
        model._tokenizer = _Proxy(model._tokenizer, clocks, {"encode_batch": "embedding: tokenizer"})
    toolsearch._bm25 = clocks.wrap("BM25", toolsearch._bm25)
    # The door imports `hybrid` from its module at each search (not at its own import): wrapped where it lives; a
    # tree whose door reads the closeness (branch match37) calls `hybrid_with_similar`, the same work.
    fused = "hybrid_with_similar" if hasattr(embeddings, "hybrid_with_similar") else "hybrid"
    setattr(embeddings, fused, clocks.wrap("embeddings' part (hybrid)", getattr(embeddings, fused)))
    embeddings._query_vector = clocks.wrap("embedding", embeddings._query_vector)
    embeddings.fuse = clocks.wrap("fusion", embeddings.fuse)
    if hasattr(type(index), "held"):  # a tree whose fusion reads how much of the request BM25's first places hold
        type(index).held = clocks.wrap("fusion: the share held", type(index).held)  # type: ignore[method-assign]
    tool_vectors.ToolVectors.best = clocks.wrap("cosines", tool_vectors.ToolVectors.best)  # type: ignore[method-assign]
    if hasattr(cosine_bounds, "CosineBounds"):
        cosine_bounds.CosineBounds.candidates = clocks.wrap(  # type: ignore[method-assign]
            "cosines: int8 bounds", cosine_bounds.CosineBounds.candidates)
    door = clocks.wrap("door", toolsearch.search)
    toolset = Toolset(agent="bench", catalog=graph, tools={
        tool.name: AgentTool(name=tool.name, description=tool.description, input_schema=tool.input_schema, tool=tool)
        for tool in graph}, embeddings=settings)
    door(graph, toolset, "warm up", 10)

    cpu: Spent = {}
    wall: Spent = {}
    for _ in range(args.rounds):
        for query in queries:
            if args.new_phrases:
                for kept in (opened.phrases, getattr(opened, "resource_phrases", None)):
                    kept._kept.clear()
                    kept._rows = 0
            clocks.cpu.clear()
            clocks.wall.clear()
            door(graph, toolset, query, 10)
            for spent, clock in ((cpu, clocks.cpu), (wall, clocks.wall)):
                figures = {stage: seconds * 1000 for stage, seconds in clock.items()}
                figures["BM25: the rest (Python)"] = figures["BM25"] - figures.get("BM25: statements", 0.0)
                model_run = figures.get("embedding: the model's run", 0.0) + figures.get("embedding: tokenizer", 0.0)
                figures["embedding: the rest"] = figures["embedding"] - model_run
                figures["cosines: the rest"] = figures["cosines"] - figures.get("cosines: int8 bounds", 0.0)
                figures["door: its own work"] = figures["door"] - figures["BM25"] - figures["embedding"] - (
                    figures["cosines"] + figures["fusion"] + figures.get("fusion: the share held", 0.0))
                figures["embeddings' part: the rest"] = figures["embeddings' part (hybrid)"] - figures["embedding"] - (
                    figures["cosines"] + figures["fusion"] + figures.get("fusion: the share held", 0.0))
                for stage, value in figures.items():
                    spent.setdefault(stage, []).append(value)

    print(f"gateway from {Path(gateway.__file__).parent}; Graph v1.0 ({len(graph)} tools), {len(queries)} new "
          f"requests x {args.rounds} rounds at the door\n")
    print("| stage | thread CPU p50 / p95 | wall p50 / p95 (ms) |\n|---|---|---|")
    order = ["door", "BM25", "BM25: statements", "BM25: the rest (Python)", "embeddings' part (hybrid)", "embedding",
             "embedding: the model's run", "embedding: tokenizer", "embedding: the rest", "cosines",
             "cosines: int8 bounds", "cosines: the rest", "fusion", "fusion: the share held",
             "embeddings' part: the rest", "door: its own work"]
    for stage in order:
        if stage not in cpu:
            continue
        cells = []
        for spent in (cpu, wall):
            values = sorted(spent[stage])
            cells.append(f"{statistics.median(values):.3f} / {values[int(len(values) * 0.95)]:.3f}")
        print(f"| {stage} | {' | '.join(cells)} |")
    rows = vectors._rows(__import__("numpy")) if vectors is not None else None
    bounds = vectors.bounds() if vectors is not None else None
    memory.append((f"after the {args.rounds} rounds", _resident()))
    print("\n| memory | resident (MiB) |\n|---|---|")
    for name, resident in memory:
        print(f"| {name} | {resident:.1f} |")
    spec = graph.apis.get(api)
    sizes = [("the index as stored (bytes of its SQLite file)", len(spec.search_index or b"") if spec else 0)]
    if rows is not None:
        sizes.append(("the tool vectors' array", rows.nbytes))
    if bounds is not None:
        sizes.append(("the int8 bounds' own arrays (not onnxruntime's)",
                      sum(getattr(value, "nbytes", 0) for value in vars(bounds).values()) if hasattr(bounds, "__dict__")
                      else sum(getattr(getattr(bounds, slot, None), "nbytes", 0) for slot in bounds.__slots__)))
    phrases = [kept for kept in (getattr(opened, "phrases", None), getattr(opened, "resource_phrases", None))
               if kept is not None]
    if phrases:
        sizes.append((f"the phrases' kept rows and scores ({sum(len(kept._kept) for kept in phrases)} phrases)",
                      sum(rows.nbytes + terms.nbytes for kept in phrases for rows, terms in kept._kept.values())))
    for name, size in sizes:
        print(f"| {name} | {size / 2 ** 20:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
