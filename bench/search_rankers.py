"""The rankers themselves: where a missed request's words are in the right tool, and BM25 variants measured alone and
fused with the fine-tuned model, on requests no delta saw.

    OMP_NUM_THREADS=1 python bench/search_rankers.py prepare     # each request's cosines with every tool
    python bench/search_rankers.py misses [--apis graph]         # BM25 alone's misses@5, by where their words are
    python bench/search_rankers.py score [--variants V ...]      # recall@5 / @10 per API, alone and fused
    python bench/search_rankers.py cost [--variants V ...]       # building Graph's index: CPU and size

Data: `round12`, `round13` and `round14` of the six APIs (`DEV`, 1,095 requests): the shipped delta
(gateway/offer/minilm_lora.npz) was trained on every part up to `round11`, so it never saw these; each was measured
once by the lead and is spent. `round15`, `round16` and `round17` are never read (an assert says so); nor are the APIs
that hold only those (`specs_with(DEV)` leaves them out). (The figures in bench/README.md are of that delta,
28fa8ec9...'s; the shipped one was trained again since with `round12` to `round16`, so a re-run now reads `DEV` through
a delta that learned it.)

`prepare` saves, per request, the cosine of the request with every tool of its API as the product computes them
(`gateway.search_embeddings: {kind: local}`: the int8 ONNX model with the shipped delta, the tools' vectors from the
gateway's own cache). `score` builds each API's BM25 index as a variant says (`VARIANTS`: which text of the tool the
index reads, and its column's weight), searches every request as the product does (`ToolIndex.search`, 50 places)
and counts recall@5 and @10 hits of BM25 alone and of the product's fusion (`gateway.offer.fusion.fuse` with the
model's first 50 at the default weight). A variant with a constant is fitted (most hits@5 of the fused ranking over its
grid) on two of the three parts and counted on the third (each part in turn, summed), and on five APIs and counted on
the sixth ("other API"); `--tuning` adds BM25 alone's hits on the parts before `round5` (`bench/search.py --tuning`).

`misses` lists, for each miss@5 of BM25 alone, which fields of the right tool hold each of the request's match terms
(a term's alternatives, stemmed): name, path, summary, the description's first paragraph (all indexed today), the
rest of the description, the argument names (indexed), the arguments' descriptions and their enum values (not
indexed), and counts the misses by the furthest field that holds a word no indexed field holds.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.search import PARTS, _compile, load_tasks, specs_with  # noqa: E402  (run as a script)
from bench.search_fusion import _tool_matrix  # noqa: E402  (the same six APIs' tools' vectors, as the gateway caches them)

DEV = ("round12", "round13", "round14")
"""The parts read here; `round15` (the lead's next measurement), `round16` and `round17` are never read."""
assert (not {"round24", "round25", "round26", "round27", "round28", "round29", "round30",
             "round31", "round32", "round33", "round34", "round35", "round36",
             "round37"} & set(DEV)
        and PARTS.index("round14") < PARTS.index("round15"))
SPECS = specs_with(DEV)
"""The six APIs whose sets hold the parts read here (those new in `round15` hold none)."""
assert not {"asana", "zoom", "box"} & set(SPECS)
DATA = Path(tempfile.gettempdir()) / "gateway-bench-rankers"
CACHE = Path(tempfile.gettempdir()) / "gateway-bench-search-cache"
MODEL_DEPTH = 200
"""The model's first places kept per request (its first 50 are fused; the deeper ones set a lower cosine floor)."""


def _catalog(name: str) -> Any:
    return _compile(SPECS[name], index=True, cache=CACHE)[1]


def _settings() -> Any:
    from gateway.config.embeddings_endpoint import SearchEmbeddings

    return SearchEmbeddings.model_validate({"kind": "local", "timeout": 3600})


def prepare() -> None:
    """Each API's `DEV` requests' cosines with every tool: `DATA / NAME.npy` (one row a request, in `DEV`'s order)."""
    import numpy

    from gateway.offer import embeddings
    from gateway.offer.tool_vectors import unit

    DATA.mkdir(parents=True, exist_ok=True)
    settings = _settings()
    for name in SPECS:
        target = DATA / f"{name}.npy"
        if target.exists():
            continue
        catalog, matrix = _tool_matrix(settings, name)
        cosines = [matrix @ numpy.asarray(unit(embeddings.embed(settings, [task["q"]])[0]), dtype=numpy.float32)
                   for task in _requests(name)]
        numpy.save(target, numpy.array(cosines, dtype=numpy.float32))
        print(f"{name}: {len(catalog)} tools, {len(cosines)} requests", flush=True)


def _requests(name: str, parts: Iterable[str] = DEV) -> list[dict[str, Any]]:
    tasks = load_tasks(name)
    return [{**task, "part": part} for part in parts for task in tasks.get(part, [])]


# -- where the words are ---------------------------------------------------------------------------------------------

def _stem(word: str) -> str:
    from gateway.offer.query import singular

    return singular(word)[:6]


def _stems_of(text: str) -> set[str]:
    from gateway.offer.query import words

    return {_stem(word) for word in words(text).split()}


def fields(tool: Any) -> dict[str, set[str]]:
    """The stems of each text of a tool, indexed today or not."""
    from gateway.offer.index_build import _first_paragraph, summary_of
    from gateway.offer.parameter_text import parameter_texts
    from gateway.offer.views import first_sentences

    first = _first_paragraph(tool.description)
    values = parameter_texts([tool])[0][1]
    described = " ".join(first_sentences(value.get("description", ""), 160)  # every argument's, path and body too
                         for value in (tool.input_schema.get("properties") or {}).values() if isinstance(value, dict))
    return {"name": _stems_of(tool.operation_id or tool.name), "path": _stems_of(tool.path),
            "summary": _stems_of(summary_of(tool)), "first paragraph": _stems_of(first),
            "tags": _stems_of(" ".join(tool.tags)),
            "argument names": _stems_of(" ".join(argument.name for argument in tool.arguments)),
            "description's rest": _stems_of(tool.description) - _stems_of(first),
            "argument descriptions": _stems_of(described), "enum values": _stems_of(values)}


INDEXED = ("name", "path", "summary", "first paragraph", "tags", "argument names")


def misses(apis: list[str]) -> None:
    from gateway.offer.index import index_of
    from gateway.offer.query import read

    kinds: collections.Counter[str] = collections.Counter()
    for name in apis:
        catalog = _catalog(name)
        api = next(iter(catalog.apis))
        index = index_of(catalog)
        by = {key: tool for tool in catalog.for_api(api) for key in (tool.name, tool.operation_id) if key}
        count = 0
        for task in _requests(name):
            hits = index.search(task["q"], limit=50, apis=[api])
            names = [(hit.tool.name, hit.tool.operation_id) for hit in hits]
            wanted = set(task["ops"])
            if any(n in wanted or o in wanted for n, o in names[:5]):
                continue
            count += 1
            place = next((at for at, (n, o) in enumerate(names, 1) if n in wanted or o in wanted), None)
            right = [by[op] for op in task["ops"] if op in by]
            held = [fields(tool) for tool in right]
            terms = read(task["q"]).terms
            where = []
            extra = set()
            for alternatives in terms:
                stems = {_stem(w) for a in alternatives for w in a.replace('"', " ").split()}
                found = sorted({f for h in held for f, s in h.items() if stems & s})
                where.append(f"{alternatives[0]}:{','.join(f[:4] for f in found) or '-'}")
                if found and not set(found) & set(INDEXED):
                    extra.update(found)
            kind = ("words only in " + " / ".join(sorted(extra))) if extra else (
                "right tool in BM25's 6-50" if place else "right tool past BM25's 50")
            kinds[f"{name}: {kind}"] += 1
            kinds[kind] += 1
            print(f"{name} {task['part']} {task['q']!r} want {right[0].name if right else '?'} at {place}; "
                  f"got {names[0][0] if names else '-'}; {' '.join(where)}")
        print(f"== {name}: {count} misses", flush=True)
    for kind, count in sorted(kinds.items()):
        print(f"{count:4d}  {kind}")


# -- scoring --------------------------------------------------------------------------------------------------------

Variant = tuple[float | None, float | None]
"""The two columns' weights: the arguments' descriptions, their enum values (None: the column left empty)."""
VARIANTS: dict[str, Variant] = {
    "before (arguments' text not indexed)": (None, None),
    **{f"descriptions off, enum values {e:g}": (None, e) for e in (0.5, 1.0, 2.0)},
    **{f"descriptions {d:g}, enum values {e:g}": (d, e) for d in (0.5, 1.0) for e in (0.5, 1.0)},
}
"""Each variant's weights of the two columns, the product's text in them (the query and header parameters'
descriptions, every argument's enum values, OData's `$` options out). A column left empty is exactly the index
before (a column's text lengthens the whole row, which BM25 normalises by). The first grid's other variants (the path
parameters' and the body's descriptions read, descriptions shared by more than 1 % or 5 % of the tools left out, the
first 30 or 80 words only) needed switches in gateway/offer/parameter_text.py that the product never used: their
figures are in bench/README.md ("The rankers themselves"), their code at commit cce2f06."""


def _variant(weights: Variant) -> Any:
    """`gateway.offer.index` with the index built and searched as `weights` say: the columns' weights set and the
    module reloaded (its SQL is made from them at import)."""
    import importlib

    from gateway.offer import index, index_build
    from gateway.offer.parameter_text import parameter_texts

    described, enums = weights

    def texts(tools: Any) -> list[tuple[str, str]]:
        return [(said if described is not None else "", values if enums is not None else "")
                for said, values in parameter_texts(tools)]

    index_build.COLUMN_WEIGHTS.update(described=described or 0.0, enums=enums or 0.0)

    index_build.parameter_texts = texts  # type: ignore[attr-defined]
    return importlib.reload(index)


@dataclasses.dataclass(frozen=True)
class _Named:
    name: str


def built(index: Any, catalog: Any) -> tuple[str, Any, Any, float, int]:
    """A catalog of one api with its index built by `index` (a variant's module): the api, its tools, a searcher,
    the build's CPU seconds and the index's bytes."""
    import time

    api = next(iter(catalog.apis))
    tools = catalog.for_api(api)
    started = time.process_time()
    catalog.apis[api].search_index = index.build_index(tools)
    seconds = time.process_time() - started
    return api, tools, index.ToolIndex(catalog), seconds, len(catalog.apis[api].search_index)


class Ranked:
    """One API's requests under one variant: BM25's first 50 (tool places), the right tools' places."""

    def __init__(self, name: str, variant: Variant, cosines: Any) -> None:
        import numpy

        api, tools, searcher, self.build_seconds, self.size = built(_variant(variant), _catalog(name))
        place = {tool.name: at for at, tool in enumerate(tools)}
        by_op = {tool.operation_id: at for at, tool in enumerate(tools) if tool.operation_id}
        self.tools = [_Named(tool.name) for tool in tools]  # what the fusion reads of a tool: small to save
        self.places = {tool.name: at for at, tool in enumerate(tools)}
        self.rows = []
        for at, task in enumerate(_requests(name)):
            hits = searcher.search(task["q"], limit=50, apis=[api])
            wanted = {place.get(op, by_op.get(op, -1)) for op in task["ops"]} - {-1}
            best = numpy.argsort(-cosines[at], kind="stable")[:MODEL_DEPTH]  # the model's first, by cosine
            self.rows.append((task["part"], [(place[hit.tool.name], hit.score) for hit in hits], wanted,
                              (best, cosines[at][best])))


def _hits(ranked: Ranked, parts: Iterable[str], fused: bool, weight: float,
          floor_at: int = 50) -> tuple[int, int]:
    """recall@5 and @10 hits of BM25 alone, or fused with the model's first 50 (its cosine's floor the model's
    `floor_at`-th: the product's is its 50th)."""

    from gateway.offer.fusion import fuse

    tools = ranked.tools
    at5 = at10 = 0
    index = ranked.places
    for part, bm25, wanted, (best, cosines) in ranked.rows:
        if part not in parts:
            continue
        order = [tool for tool, _ in bm25]
        if fused:
            similar = [(tools[t], float(c)) for t, c in zip(best[:50].tolist(), cosines[:50].tolist(), strict=True)]
            ranking = fuse([(tools[t], s) for t, s in bm25], similar, weight)
            if floor_at != 50:  # the model's first 50, its cosines scaled down to its `floor_at`-th: one more tool
                at = min(floor_at, len(best)) - 1
                extra = (tools[int(best[at])], float(cosines[at]))  # with its share 0, then out
                ranking = [pair for pair in fuse([(tools[t], s) for t, s in bm25], [*similar, extra], weight)
                           if pair[0] is not extra[0] or extra[0].name in {tools[t].name for t, _ in bm25}]
            order = [index[tool.name] for tool, _ in ranking]
        at5 += bool(wanted.intersection(order[:5]))
        at10 += bool(wanted.intersection(order[:10]))
    return at5, at10


def _ranked(names: list[str], variants: list[str]) -> dict[str, dict[str, Ranked]]:
    """Every variant's rankings, from `DATA / ranked.pickle` when they were made by this very code."""
    import hashlib
    import pickle

    import numpy

    from gateway.openapi._cache import fingerprinted_sources

    code = hashlib.sha256(b"".join(path.read_bytes() for path in fingerprinted_sources()))
    saved = DATA / f"ranked-{code.hexdigest()[:16]}.pickle"
    table: dict[str, dict[str, Ranked]] = pickle.loads(saved.read_bytes()) if saved.exists() else {}
    cosines = {name: numpy.load(DATA / f"{name}.npy") for name in names}
    for variant in variants:
        for name in names:
            if name not in table.setdefault(variant, {}):
                table[variant][name] = Ranked(name, VARIANTS[variant], cosines[name])
    saved.write_bytes(pickle.dumps(table))
    return table


def score(names: list[str], variants: list[str]) -> None:
    """Each variant counted on all of `DEV`, then fitted (by the fused hits@5) and counted held out."""
    from gateway.config.embeddings_endpoint import SearchEmbeddings

    weight = SearchEmbeddings.model_validate({"kind": "local"}).weight
    table = _ranked(names, variants)
    print(f"recall@5 hits (@10) on {' + '.join(DEV)}: BM25 alone per API ({', '.join(names)}), all; then fused; "
          "Graph's index: build CPU, size")
    for variant in variants:
        ranked = table[variant]
        cells = []
        for fused in (False, True):
            counts = [_hits(ranked[name], DEV, fused, weight) for name in names]
            cells.append(" | ".join(f"{a} ({b})" for a, b in counts)
                         + f" | **{sum(a for a, _ in counts)}** ({sum(b for _, b in counts)})")
        graph = ranked.get("graph")
        cost = f"{graph.build_seconds:.1f} s, {graph.size / 2**20:.2f} MiB" if graph else "-"
        print(f"| {variant} | {cells[0]} | {cells[1]} | {cost} |", flush=True)
    for line in fitted(names, variants, DEV, lambda v, n, parts, fused: _hits(table[v][n], parts, fused, weight)):
        print(line, flush=True)
    for variant in variants[:1] + variants[-1:]:
        for floor_at in (100, 200):
            counts = [_hits(table[variant][name], DEV, True, weight, floor_at) for name in names]
            print(f"| {variant}, fused, the cosine's floor the model's {floor_at}th | "
                  + " | ".join(f"{a} ({b})" for a, b in counts)
                  + f" | **{sum(a for a, _ in counts)}** ({sum(b for _, b in counts)}) |", flush=True)


Counter = Callable[[str, str, list[str], bool], tuple[int, int]]
"""recall@5 and @10 hits of a variant on one API's parts, BM25 alone or fused."""


def fitted(names: list[str], variants: list[str], parts: tuple[str, ...], hits: Counter) -> list[str]:
    """The variant with the most hits@5 on all parts but one, counted on that one, each in turn ("other part"), and
    on all APIs but one, counted on that one ("other API"), BM25 alone and fused: a table row each, per API and
    summed, with the variants chosen."""
    rows = []
    folds = [("other part", [([p for p in parts if p != part], [part], names) for part in parts]),
             ("other API", [(list(parts), list(parts), [name]) for name in names])]
    for test, splits in folds:
        for fused in (False, True):
            counts = {name: [0, 0] for name in names}
            chosen = []
            for train_parts, test_parts, tested in splits:
                trained = [name for name in names if name not in tested] if test == "other API" else names
                best = max(variants, key=lambda v: sum(hits(v, n, train_parts, fused)[0] for n in trained))
                chosen.append(best)
                for name in tested:
                    at5, at10 = hits(best, name, test_parts, fused)
                    counts[name][0] += at5
                    counts[name][1] += at10
            rows.append(f"| fitted, {test}, {'fused' if fused else 'BM25 alone'} | "
                        + " | ".join(f"{a} ({b})" for a, b in counts.values())
                        + f" | **{sum(a for a, _ in counts.values())}** ({sum(b for _, b in counts.values())}) | "
                        + "; ".join(f"{v} x{c}" for v, c in collections.Counter(chosen).items()) + " |")
    return rows


def cost(variants: list[str], rounds: int) -> None:
    """Graph's index under each variant, in turns: the median CPU of `rounds` builds, its size, and the searching
    thread's CPU of one BM25 search (50 places, as the fused search asks) of every request of every API's parts
    before `round12` (not `DEV`'s: those are counted, not timed), p50 and p95 over the rounds."""
    import statistics
    import time

    catalog = _catalog("graph")
    api = next(iter(catalog.apis))
    tools = catalog.for_api(api)
    queries = [task["q"] for name in SPECS for task in _requests(name, PARTS[:PARTS.index("round12")])]
    seconds: dict[str, list[float]] = {variant: [] for variant in variants}
    searches: dict[str, list[float]] = {variant: [] for variant in variants}
    sizes = {}
    for _ in range(rounds):
        for variant in variants:
            index = _variant(VARIANTS[variant])
            started = time.process_time()
            catalog.apis[api].search_index = index.build_index(tools)
            seconds[variant].append(time.process_time() - started)
            sizes[variant] = len(catalog.apis[api].search_index)
            searcher = index.ToolIndex(catalog)
            searcher.search("warm up", limit=50)
            for query in queries:
                started = time.thread_time()
                searcher.search(query, limit=50)
                searches[variant].append((time.thread_time() - started) * 1000)
    print(f"Graph ({len(tools)} tools): its index built {rounds} times a variant, in turns, and {len(queries)} "
          "searches a round")
    for variant in variants:
        timed = sorted(searches[variant])
        print(f"| {variant} | {statistics.median(seconds[variant]):.2f} s CPU (min {min(seconds[variant]):.2f}) | "
              f"{sizes[variant] / 2**20:.2f} MiB | search p50 {statistics.median(timed):.2f} ms, "
              f"p95 {timed[int(len(timed) * 0.95)]:.2f} ms |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["prepare", "misses", "score", "cost"])
    parser.add_argument("--rounds", type=int, default=5, help="cost: builds of Graph's index per variant")
    parser.add_argument("--apis", nargs="+", choices=list(SPECS), default=list(SPECS))
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.stage == "prepare":
        prepare()
    elif args.stage == "misses":
        misses(args.apis)
    elif args.stage == "cost":
        cost(args.variants, args.rounds)
    else:
        score(args.apis, args.variants)
    return 0


if __name__ == "__main__":
    sys.exit(main())
