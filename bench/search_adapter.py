"""A learned query adapter for the local model's tool search: does a mapping from users' words to tools' text,
learned from the labelled requests, generalise to an API it never saw?

    OMP_NUM_THREADS=1 python bench/search_adapter.py prepare     # the vectors and rankings, once (Graph: ~2 min)
    OMP_NUM_THREADS=1 python bench/search_adapter.py evaluate [--corpus] [--onnx]

The adapter maps a request's unit embedding q (all-MiniLM-L6-v2, as `gateway.offer.local_model.encode` gives it)
to `normalise(q + B(A q))` (A: d -> r, B: r -> d; B starts at zero, so training starts from the model as it is),
trained with a softmax over all the tools of the request's API (each request's own operations are the positives,
every other tool a negative; temperature `TAU`) and a penalty on `A` and `B` that pulls toward the unchanged model.
What is scored is the product's fusion (`gateway.offer.embeddings.fuse`): BM25's first 50 (`ToolIndex.search`)
and the embedding ranking's first 50, weighted reciprocal rank with the local model's weight (0.75), recall@5.

Requests: every part of tests/openapi/search_tasks/*.yaml up to `round7` (`USED`); `round8` and later are never
read here. Two tests:
- leave one API out: train on five APIs' requests (of every used part), test on the sixth's `round5`+`round6`+
  `round7`, the parts written last; the rank and the penalty are chosen inside the five (each in turn held out,
  trained on the other four), never on the sixth;
- older to newer: train on every API's parts up to `round4`, test on `round5`..`round7`; chosen the same way
  (inner leave-one-API-out over the training parts).
`--corpus` adds self-supervised pairs from the other specs of ../shared/corpus (an operation's description, past its
summary, as a "request" for its own tool text), which hold no request of ours.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.search import PARTS, ROUND5, SPECS, _compile, load_tasks  # noqa: E402  (run as a script)

USED = PARTS[:PARTS.index("round7") + 1]
"""The parts read here; `round8` and later are the lead's final measurement."""
LATER = ("round5", "round6", "round7")
"""The parts a held-out API is tested on (the last written)."""
OLDER = PARTS[:PARTS.index(ROUND5)]
DATA = Path(tempfile.gettempdir()) / "gateway-bench-adapter"
DEPTH = 50
RRF_K = 60
WEIGHT = 0.75
TAU = 0.05
assert "round8" not in USED


def prepare(threads: int) -> None:
    """Each API's tool vectors (as the gateway computes them), and each used request's vector, positives and BM25
    first 50, saved to `DATA`."""
    import numpy

    os.environ["GATEWAY_CACHE_DIR"] = str(DATA / "gateway-cache")
    os.environ["GATEWAY_EMBED_THREADS"] = str(threads)
    from gateway.config.embeddings_endpoint import SearchEmbeddings
    from gateway.offer.embeddings import Computation
    from gateway.offer.embeddings import prepare as start
    from gateway.offer.index import index_of
    from gateway.offer.local_model import encode

    settings = SearchEmbeddings.model_validate({"kind": "local", "timeout": 3600})
    cache = Path(tempfile.gettempdir()) / "gateway-bench-search-cache"
    DATA.mkdir(parents=True, exist_ok=True)
    for name in SPECS:
        catalog = _compile(SPECS[name], index=True, cache=cache)[1]
        api = next(iter(catalog.apis))
        [known] = start(settings, catalog, [api])
        started = time.perf_counter()
        vectors = known.wait() if isinstance(known, Computation) else known
        tools = catalog.for_api(api)
        place = {tool.name: i for i, tool in enumerate(tools)}
        by_op = {tool.operation_id: i for i, tool in enumerate(tools) if tool.operation_id}
        index = index_of(catalog)
        everything = load_tasks(name)
        requests = [(part, task) for part in USED for task in everything.get(part, [])]
        queries = numpy.asarray(encode(settings.model, [task["q"] for _, task in requests]), dtype=numpy.float32)
        bm25 = numpy.full((len(requests), DEPTH), -1, dtype=numpy.int32)
        positives = numpy.full((len(requests), 32), -1, dtype=numpy.int32)
        for row, (_, task) in enumerate(requests):
            ranked = [place[hit.tool.name] for hit in index.search(task["q"], limit=DEPTH, apis=[api])]
            bm25[row, :len(ranked)] = ranked
            wanted = sorted({place.get(op, by_op.get(op, -1)) for op in task["ops"]} - {-1})
            positives[row, :len(wanted)] = wanted
        numpy.savez(DATA / f"{name}.npz", tools=numpy.frombuffer(vectors.flat, dtype=numpy.float32).reshape(
            vectors.count, vectors.dim), queries=queries, bm25=bm25, positives=positives,
            parts=numpy.array([part for part, _ in requests]), texts=numpy.array([t["q"] for _, t in requests]))
        print(f"{name}: {len(tools)} tools, {len(requests)} requests ({time.perf_counter() - started:.0f} s)",
              flush=True)


SKIPPED = {spec.name for spec in SPECS.values()} | {"ghes-3.4.json"}
"""Corpus specs that give no pairs: the six measured APIs, and GitHub Enterprise (GitHub's own tools again)."""


def prepare_corpus(threads: int) -> None:
    """Self-supervised pairs from the corpus's other specs: an operation's description past its summary (its first
    sentence, when it says more than the summary) as the request, its tool (embedded as the gateway embeds it) as the
    answer, among that spec's tools. Saved to `DATA / "corpus.npz"`."""
    import numpy

    from gateway.dialects.brevity import first_sentences
    from gateway.offer.embeddings import embedding_text
    from gateway.offer.index_build import summary_of
    from gateway.offer.local_model import encode

    corpus = SPECS["github"].parent.parent
    cache = Path(tempfile.gettempdir()) / "gateway-bench-search-cache"
    tools_all, queries, positives, spans = [], [], [], []
    for spec in sorted(corpus.rglob("*.json")):
        if spec.name in SKIPPED:
            continue
        try:
            catalog = _compile(spec, index=False, cache=cache)[1]
        except Exception as exc:  # noqa: BLE001 - a spec that does not compile gives no pairs
            print(f"{spec.name}: {exc}", file=sys.stderr)
            continue
        tools = list(catalog)
        if len(tools) < 5:
            continue
        start = len(tools_all)
        tools_all.extend(embedding_text(tool) for tool in tools)
        for i, tool in enumerate(tools):
            described = tool.description.strip()
            summary = summary_of(tool)
            if described.startswith(summary):
                described = described[len(summary):].strip()
            said = first_sentences(described, 200)
            if said and said != summary and len(said.split()) >= 4:
                queries.append(said)
                positives.append(start + i)
        spans.append((start, len(tools_all)))
    started = time.perf_counter()
    tool_vectors = numpy.asarray(encode("all-MiniLM-L6-v2", tools_all), dtype=numpy.float32)
    query_vectors = numpy.asarray(encode("all-MiniLM-L6-v2", queries), dtype=numpy.float32)
    numpy.savez(DATA / "corpus.npz", tools=tool_vectors, queries=query_vectors, positives=numpy.array(positives),
                spans=numpy.array(spans))
    print(f"corpus: {len(spans)} specs, {len(tools_all)} tools, {len(queries)} pairs "
          f"({time.perf_counter() - started:.0f} s)", flush=True)


class Requests:
    """One API's tools and used requests, as `prepare` saved them."""

    def __init__(self, name: str) -> None:
        import numpy

        saved = numpy.load(DATA / f"{name}.npz")
        self.name = name
        self.tools, self.queries, self.bm25 = saved["tools"], saved["queries"], saved["bm25"]
        self.positives, self.parts, self.texts = saved["positives"], saved["parts"], saved["texts"]

    def rows(self, parts: tuple[str, ...]) -> Any:
        import numpy

        return numpy.flatnonzero(numpy.isin(self.parts, parts))


def fused_hits(requests: Requests, rows: Any, adapter: Any = None, weight: float = WEIGHT) -> int:
    """How many of `rows` have one of their operations in the first 5 of the product's fusion (`fuse`: BM25's first
    50 at weight 1, the embedding ranking's first 50 at `weight`), the requests' vectors passed through `adapter`."""
    import numpy

    queries = requests.queries[rows]
    if adapter is not None:
        queries = adapter(queries)
    cosines = queries @ requests.tools.T
    hits = 0
    for row, scores in zip(rows, cosines, strict=True):
        best = numpy.argpartition(-scores, DEPTH)[:DEPTH]
        best = best[numpy.argsort(-scores[best], kind="stable")]
        fused: dict[int, float] = {}
        for ranking, share in ((requests.bm25[row], 1.0), (best, weight)):
            for place, tool in enumerate(ranking[ranking >= 0].tolist(), start=1):
                fused[tool] = fused.get(tool, 0.0) + share / (RRF_K + place)
        first = sorted(fused, key=lambda tool: -fused[tool])[:5]
        wanted = set(requests.positives[row][requests.positives[row] >= 0].tolist())
        hits += bool(wanted.intersection(first))
    return hits


class CorpusSpec:
    """One corpus spec's pairs in the shape `train` reads (`tools`, `queries`, `positives`)."""

    def __init__(self, tools: Any, queries: Any, positives: Any) -> None:
        self.tools, self.queries, self.positives = tools, queries, positives


def corpus_sets() -> list[tuple[CorpusSpec, Any]]:
    import numpy

    saved = numpy.load(DATA / "corpus.npz")
    sets = []
    for start, end in saved["spans"].tolist():
        mine = numpy.flatnonzero((saved["positives"] >= start) & (saved["positives"] < end))
        if len(mine):
            spec = CorpusSpec(saved["tools"][start:end], saved["queries"][mine],
                              (saved["positives"][mine] - start).reshape(-1, 1))
            sets.append((spec, numpy.arange(len(mine))))
    return sets


CHECKPOINTS = (3, 6, 12, 20)
"""Epochs after which an adapter in training is scored (the number of epochs is chosen like the penalty)."""
PENALTIES = (1e-3, 1e-2, 1e-1)
"""The ridge penalty on the adapter's matrix, `penalty * |W|^2` beside the mean loss of a batch."""
WEIGHTS = (0.75, 1.0, 1.5)
"""The adapted embeddings' weight in the fusion (the product's is 0.75): chosen with the penalty and epochs."""


def adapter_of(matrix: Any) -> Any:
    """The query adapter of a d x d matrix (NumPy): `q -> normalise(q + q W)`."""
    import numpy

    def adapt(queries: Any) -> Any:
        moved = queries + queries @ matrix
        return (moved / numpy.linalg.norm(moved, axis=1, keepdims=True)).astype(numpy.float32)

    return adapt


def train(sets: list[tuple[Requests, Any]], penalty: float, seed: int, score: Any = None,
          checkpoints: tuple[int, ...] = CHECKPOINTS, batch: int = 32, rate: float = 1e-3) -> dict[int, Any]:
    """The adapter's matrix after each of `checkpoints` epochs, trained on the `rows` of each `(requests, rows)`:
    softmax over the API's tools, positives its operations; Adam, one thread."""
    import numpy
    import torch

    torch.manual_seed(seed)
    generator = numpy.random.default_rng(seed)
    dim = sets[0][0].tools.shape[1]
    matrix = torch.zeros(dim, dim, requires_grad=True)
    optimiser = torch.optim.Adam([matrix], lr=rate)
    tensors = []
    for requests, rows in sets:
        mask = numpy.zeros((len(rows), len(requests.tools)), dtype=bool)
        for i, row in enumerate(rows):
            mask[i, requests.positives[row][requests.positives[row] >= 0]] = True
        tensors.append((torch.from_numpy(requests.tools), torch.from_numpy(requests.queries[rows]),
                        torch.from_numpy(mask)))
    kept: dict[int, Any] = {}
    for epoch in range(1, max(checkpoints) + 1):
        batches = [(i, chunk) for i, (_, queries, _) in enumerate(tensors)
                   for chunk in numpy.array_split(generator.permutation(len(queries)),
                                                  max(1, len(queries) // batch))]
        for order in generator.permutation(len(batches)):
            i, chunk = batches[order]
            tools, queries, mask = tensors[i]
            chunk_t = torch.from_numpy(chunk)
            moved = queries[chunk_t] + queries[chunk_t] @ matrix
            scores = torch.nn.functional.normalize(moved, dim=1) @ tools.T / TAU
            loss = (torch.logsumexp(scores, dim=1) - torch.logsumexp(scores.masked_fill(~mask[chunk_t], -1e9),
                                                                     dim=1)).mean()
            loss = loss + penalty * (matrix ** 2).sum()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        if epoch in checkpoints:
            kept[epoch] = matrix.detach().numpy().copy()
    return kept


Choice = tuple[float, int, float]
"""A penalty, a number of epochs and a weight in the fusion."""


def choose(sets: dict[str, tuple[Requests, Any]], seed: int, extra: list[tuple[Any, Any]] = ()
           ) -> tuple[Choice, dict[Choice, int]]:
    """The penalty, epochs and weight with the most fused hits when each API of `sets` in turn is held out of
    training (the others, and `extra`, trained on): chosen inside the training data only."""
    found: dict[Choice, int] = {}
    for penalty in PENALTIES:
        for held in sets:
            others = [pair for name, pair in sets.items() if name != held] + list(extra)
            for epochs, matrix in train(others, penalty, seed).items():
                requests, rows = sets[held]
                for weight in WEIGHTS:
                    key = (penalty, epochs, weight)
                    found[key] = found.get(key, 0) + fused_hits(requests, rows, adapter_of(matrix), weight)
    # ties: fewer epochs, more penalty, the product's weight
    best = max(found, key=lambda key: (found[key], -key[1], key[0], -key[2]))
    return best, found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["prepare", "prepare-corpus", "evaluate"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tests", nargs="+", choices=["loao", "later"], default=["loao", "later"])
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--corpus", action="store_true", help="train on the corpus's pairs too (prepare-corpus first)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    if args.stage == "prepare":
        prepare(args.threads)
        return 0
    if args.stage == "prepare-corpus":
        import torch

        torch.set_num_threads(args.threads)
        prepare_corpus(args.threads)
        return 0
    import torch

    torch.set_num_threads(args.threads)
    apis = {name: Requests(name) for name in SPECS}
    extra = corpus_sets() if args.corpus else []
    print(f"fused recall@5 hits (BM25's first {DEPTH} + the embeddings' first {DEPTH} at weight {WEIGHT}), "
          f"seed {args.seed}; load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    if "loao" in args.tests:
        print("\nleave one API out: trained on the other five APIs' requests (every used part), tested on the "
              f"held-out API's {'+'.join(LATER)}\n| API | requests | without the adapter | with | penalty, epochs "
              "weight (chosen inside the five) |\n|---|---|---|---|---|", flush=True)
        totals = [0, 0, 0]
        for held, requests in apis.items():
            started = time.perf_counter()
            sets = {name: (other, other.rows(USED)) for name, other in apis.items() if name != held}
            (penalty, epochs, weight), _ = choose(sets, args.seed, extra)
            matrix = train([*sets.values(), *extra], penalty, args.seed, checkpoints=(epochs,))[epochs]
            rows = requests.rows(LATER)
            before, after = fused_hits(requests, rows), fused_hits(requests, rows, adapter_of(matrix), weight)
            for i, count in enumerate((len(rows), before, after)):
                totals[i] += count
            print(f"| {held} | {len(rows)} | {before} ({before / len(rows):.3f}) | {after} ({after / len(rows):.3f}) "
                  f"| {penalty:g}, {epochs}, {weight:g} ({time.perf_counter() - started:.0f} s) |", flush=True)
        print(f"| all | {totals[0]} | {totals[1]} ({totals[1] / totals[0]:.3f}) | {totals[2]} "
              f"({totals[2] / totals[0]:.3f}) | |", flush=True)
    if "later" in args.tests:
        sets = {name: (requests, requests.rows(OLDER)) for name, requests in apis.items()}
        (penalty, epochs, weight), found = choose(sets, args.seed, extra)
        matrix = train([*sets.values(), *extra], penalty, args.seed, checkpoints=(epochs,))[epochs]
        print(f"\nolder to newer: trained on every API's parts up to round4, tested on {'+'.join(LATER)}; penalty "
              f"{penalty:g}, {epochs} epochs, weight {weight:g} (chosen by leaving each API out of the older parts; "
              f"hits there by penalty/epochs/weight: "
              f"{' '.join(f'{p:g}/{e}/{w:g}:{n}' for (p, e, w), n in found.items())})"
              "\n| API | requests | without the adapter | "
              "with |\n|---|---|---|---|", flush=True)
        totals = [0, 0, 0]
        for name, requests in apis.items():
            rows = requests.rows(LATER)
            before, after = fused_hits(requests, rows), fused_hits(requests, rows, adapter_of(matrix), weight)
            for i, count in enumerate((len(rows), before, after)):
                totals[i] += count
            print(f"| {name} | {len(rows)} | {before} ({before / len(rows):.3f}) | {after} "
                  f"({after / len(rows):.3f}) |", flush=True)
        print(f"| all | {totals[0]} | {totals[1]} ({totals[1] / totals[0]:.3f}) | {totals[2]} "
              f"({totals[2] / totals[0]:.3f}) |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
