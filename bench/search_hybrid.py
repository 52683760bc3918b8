"""Hybrid tool search (`gateway.offer.embeddings`): what the fusion costs, and its recall with a stand-in embedder.

    python bench/search_hybrid.py [--dim 64] [--rounds 3]

The embedder is the test suite's scripted one (tests/scripted_llm.py, in its own process on 127.0.0.1): hashed
bags of words, no meaning. Its recall figures therefore measure the plumbing (the fusion does not lose what BM25
found, or how much it moves), not the gain a real embedding model would bring; that needs a real model and is not
measured here. The costs are real: the first computation of a spec's embeddings (batched requests), loading them
from the disk cache, and one search with the fusion (cosine over every tool of the agent, in Python) against
BM25 alone, with the query's embedding fetched (`miss`) or remembered (`hit`). `--dim 1536` gives vectors of
OpenAI's text-embedding-3-small size.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.search import SPECS, load_tasks  # noqa: E402  (run as a script: the package root first)

APIS = ("github", "stripe")
_SERVE = """\
import sys, time
sys.path.insert(0, sys.argv[1])
from scripted_llm import ScriptedLLM
with ScriptedLLM() as llm:
    llm.embedding_dim = int(sys.argv[2])
    print(llm.url, flush=True)
    sys.stdin.read()
"""


@contextmanager
def embedder(dim: int) -> Iterator[str]:
    """The scripted embedder in a process of its own; yields its URL."""
    process = subprocess.Popen([sys.executable, "-c", _SERVE, str(ROOT / "tests"), str(dim)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip()
    finally:
        process.kill()
        process.wait()


def project(folder: Path, name: str, embeddings_url: str | None) -> tuple[Path, Path]:
    specs = folder / "specs"
    specs.mkdir(parents=True, exist_ok=True)
    if not (specs / f"{name}.json").exists():
        (specs / f"{name}.json").symlink_to(SPECS[name])
    agents = folder / f"agents-{name}-{'hybrid' if embeddings_url else 'bm25'}.yaml"
    text = ("providers:\n  openai: {kind: openai, base_url: 'http://127.0.0.1:9/v1', api_key: k}\n"
            f"agents:\n  a: {{model: openai/x, tools: [{{api: {name}}}]}}\n")
    if embeddings_url:
        text += (f"gateway:\n  search_embeddings: {{kind: openai, model: scripted, base_url: '{embeddings_url}/v1', "
                 "api_key: k}\n")
    agents.write_text(text)
    return specs, agents


def recall(runtime: Any, name: str, part: str) -> tuple[float, float]:
    from gateway.offer.toolsearch import search

    tasks = load_tasks(name)[part]
    at5 = at10 = 0
    for task in tasks:
        wanted = set(task["ops"])
        found = [(h["name"], h["operation_id"]) for h in search(runtime.catalog, runtime.toolset("a"), task["q"], 10)]
        at5 += any(n in wanted or o in wanted for n, o in found[:5])
        at10 += any(n in wanted or o in wanted for n, o in found[:10])
    return at5 / len(tasks), at10 / len(tasks)


def latency_ms(runtime: Any, queries: list[str], rounds: int) -> list[float]:
    from gateway.offer.toolsearch import search

    timings = []
    for _ in range(rounds):
        for query in queries:
            started = time.perf_counter()
            search(runtime.catalog, runtime.toolset("a"), query, 10)
            timings.append((time.perf_counter() - started) * 1000)
    return timings


def _one_search(runtime: Any, query: str) -> float:
    from gateway.offer.toolsearch import search

    started = time.perf_counter()
    search(runtime.catalog, runtime.toolset("a"), query, 10)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if not all(SPECS[name].exists() for name in APIS):
        print("../shared/corpus is absent", file=sys.stderr)
        return 1
    from gateway.runtime import load_runtime

    print(f"scripted embedder, {args.dim} dimensions (hashed words: plumbing, not quality)\n")
    print("| API | tools | BM25 @5 / @10 | hybrid @5 / @10 | held-out BM25 | held-out hybrid | first embedding | "
          "from disk | search BM25 p50 | hybrid p50 (query miss / hit) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp, embedder(args.dim) as url:
        os.environ["GATEWAY_CACHE_DIR"] = str(Path(tmp) / "cache")
        for name in APIS:
            bm25 = load_runtime(*project(Path(tmp), name, None))
            hybrid = load_runtime(*project(Path(tmp), name, url))
            first = _one_search(hybrid, "first search")  # computes the spec's embeddings (batched)
            from_disk = _one_search(load_runtime(*project(Path(tmp), name, url)), "second runtime")
            queries = [task["q"] for task in load_tasks(name)["tasks"]]
            plain = latency_ms(bm25, queries, args.rounds)
            miss = latency_ms(hybrid, queries, 1)  # each query's embedding fetched
            hit = latency_ms(hybrid, queries, args.rounds)  # remembered
            b, h = recall(bm25, name, "tasks"), recall(hybrid, name, "tasks")
            bh, hh = recall(bm25, name, "holdout"), recall(hybrid, name, "holdout")
            print(f"| {name} | {len(bm25.toolset('a'))} | {b[0]:.2f} / {b[1]:.2f} | {h[0]:.2f} / {h[1]:.2f} | "
                  f"{bh[0]:.2f} / {bh[1]:.2f} | {hh[0]:.2f} / {hh[1]:.2f} | {first:.2f} s | {from_disk:.3f} s | "
                  f"{statistics.median(plain):.1f} ms | {statistics.median(miss):.1f} / "
                  f"{statistics.median(hit):.1f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
