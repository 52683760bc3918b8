"""What happens after the two rankers: the fused list, its misses by where each ranker put the right tool, and
variants of the fusion, chosen by leaving one API out (branch fuse33).

    OMP_NUM_THREADS=1 python bench/search_fused_list.py collect   # each request's BM25 list and model cosines
    python bench/search_fused_list.py check                       # the re-done fusion against the product's own
    python bench/search_fused_list.py misses [--apis graph] [--parts round17]   # each fused miss, then by cause
    python bench/search_fused_list.py score [--variants V ...]    # recall@5 (@10) per API, and the choice
    python bench/search_fused_list.py cost [--rounds 3]           # the model's ranking over Graph, CPU per request

Data: `round12`..`round17` of the fourteen APIs that hold one (`DEV`, 2,509 requests), each measured once by the lead
and spent. `round18` (the lead's judge) and `round19` (being written) are never read (an assert says so), nor is HERE
Tracking's set (it holds `round18` alone). The model is measured with **delta16** (trained on parts up to
`round16`, `git show 4c1b287^:gateway/offer/minilm_lora.npz` placed as gateway/offer/minilm_lora.npz while measuring,
never committed; `collect` refuses another delta), so `round17` is clean for the model and the fused figures of
`round12`..`round16` flatter it (it trained on them).

Method. `collect` searches each request as the product does, over its API's own catalog (the compile cache of
bench/search.py): BM25's first `FUSION_DEPTH` (`ToolIndex.search`: tools and scores) and the request's cosine with
every tool of the API (the request embedded alone by the int8 model with the delta, `unit_float32`, the tools'
vectors from the gateway's own cache, one dot product per tool: the product's numbers), and saves them with each
tool's name, operation id and copy address (`gateway.offer.copies.address`). `check` re-does the product's fusion
(`gateway.offer.fusion.fuse` on BM25's list and the model's first 50) and compares it with `embeddings.hybrid` of
the product itself for every request: the data reproduce what a search answers. `score` re-does the fusion with each
variant (`VARIANTS`), folds copies as `toolsearch.search` does (`copies.fold`: one entry per operation, its copies
counted as its hits) and counts recall@5 and @10 hits per API and part; then chooses, leaving one API out: for each
API, the variant with the most hits@5 on the other thirteen APIs' `DEV`, counted on the one left out; `round17` is
reported apart. `misses` prints each fused miss@5 with where BM25, the model (over every tool) and the answer put the
right tool, then counts them by where the rankers put it. `cost` times the model's ranking over Graph's tools as the
product makes it, deeper, and over every tool (the searching thread's CPU). Deterministic: every list is sorted by
score, ties in the rankers' order.
"""

from __future__ import annotations

import argparse
import collections
import os
import pickle
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.search import SPECS, _compile, load_tasks  # noqa: E402

NEVER = {"round24", "round25", "round26", "round27", "round28", "round29", "round30", "round31",
         "round32", "round33", "round34", "round35", "round36", "round37"}
DEV = ("round12", "round13", "round14", "round15", "round16", "round17")
"""The development data: every part measured once by the lead and spent."""
assert not NEVER & set(DEV)
CLEAN = "round17"
"""The part delta16 never trained on: reported apart."""
APIS = tuple(name for name in SPECS if name != "here")
"""The APIs whose sets hold a part of `DEV` (HERE Tracking's holds `round18` alone: never opened)."""
DELTA16 = "1cec6c8a5552fa2fc04283c1ba9127b4adb24fc922455dd1c71f974d4e453bd6"
DATA = Path(tempfile.gettempdir()) / "gateway-bench-fuse33"
CACHE = Path(tempfile.gettempdir()) / "gateway-bench-search-cache"
DEPTH = 50
"""BM25's list and the model's, as the product fuses them (`embeddings.FUSION_DEPTH`)."""


def _tasks(name: str) -> list[dict[str, Any]]:
    tasks = load_tasks(name)
    return [{"q": task["q"], "ops": list(task["ops"]), "part": part} for part in DEV for task in tasks.get(part, [])]


def _catalog(name: str) -> Any:
    return _compile(SPECS[name], index=True, cache=CACHE)[1]


def _settings() -> Any:
    from gateway.config.embeddings_endpoint import SearchEmbeddings, packaged_delta_sha256

    assert packaged_delta_sha256() == DELTA16, "place delta16 as gateway/offer/minilm_lora.npz (the docstring)"
    return SearchEmbeddings.model_validate({"kind": "local", "timeout": 3600})


def collect(names: Iterable[str]) -> None:
    """`DATA / NAME.pickle`: per request its part, words, operations, BM25's list (places, scores) and its cosine with
    every tool (float32); the tools' names, operation ids and copy addresses."""
    import numpy

    from bench.search_fusion import tool_vectors
    from gateway.offer import embeddings
    from gateway.offer.copies import address
    from gateway.offer.index import index_of

    settings = _settings()
    DATA.mkdir(parents=True, exist_ok=True)
    for name in names:
        target = DATA / f"{name}.pickle"
        if target.exists():
            continue
        catalog = _catalog(name)
        api = next(iter(catalog.apis))
        tools = list(catalog.for_api(api))
        place = {tool.name: at for at, tool in enumerate(tools)}
        matrix = tool_vectors(settings, catalog)
        index = index_of(catalog)
        rows = []
        for task in _tasks(name):
            hits = index.search(task["q"], limit=DEPTH, apis=[api])
            query = embeddings._query_vector(settings, task["q"])  # noqa: SLF001 - ours: the product's own vector
            cosines = numpy.vecdot(matrix, query).astype(numpy.float32)  # as `ToolVectors.best` computes them
            rows.append({**task, "bm25": [(place[hit.tool.name], hit.score) for hit in hits], "cos": cosines})
        target.write_bytes(pickle.dumps({
            "rows": rows, "names": [t.name for t in tools], "ops": [t.operation_id for t in tools],
            "addresses": [address(t) for t in tools], "paths": [f"{t.method} {t.path}" for t in tools]}))
        print(f"{name}: {len(tools)} tools, {len(rows)} requests", flush=True)


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = pickle.loads((DATA / f"{name}.pickle").read_bytes())
    data["rows"] = [row for row in data["rows"] if row["part"] in DEV]
    return data


def model_first(cos: Any, first: int) -> list[tuple[int, float]]:
    """The model's first `first` places and cosines, ties in catalog order, cosines <= 0 out (`ToolVectors.best`)."""
    import numpy

    order = numpy.argsort(-cos, kind="stable")[:first]
    return [(int(at), float(cos[at])) for at in order if cos[at] > 0]


# -- the fusions ----------------------------------------------------------------------------------------------------

Fusion = Callable[[list[tuple[int, float]], Any, str], list[int]]
"""BM25's list (places, scores), the cosines with every tool and the request -> the fused places, best first."""


def _ordered(scores: dict[int, float]) -> list[int]:
    """Best first; ties in the order the scores were first given (as the product's stable sort keeps them)."""
    return [at for at, _ in sorted(scores.items(), key=lambda item: -round(item[1], 6))]


def _bm25_shares(bm25: list[tuple[int, float]], scale: str) -> dict[int, float]:
    shares: dict[int, float] = {}
    if not bm25:
        return shares
    top = above = bm25[0][1]
    capped = []
    for at, score in bm25:
        above = min(score, above)
        capped.append((at, above))
    low = capped[-1][1]
    for at, score in capped:
        if scale == "top":
            shares[at] = score / top if top > 0 else 0.0
        else:  # "span": between its last place (0) and its first (1), as the model's
            shares[at] = (score - low) / (top - low) if top > low else 1.0
    return shares


def scores(weight: float = 1.5, floor_at: int = 50, pool: int = 50, bm25_scale: str = "top",
           known_cosines: bool = False, clip: bool = True) -> Fusion:
    """The product's rule (`fusion.fuse`) and its variants: `floor_at`, the model's place whose cosine is its 0;
    `pool`, how many of the model's places join the list; `known_cosines`, BM25's tools outside the model's pool get
    their own cosine's share too (the model ranks every tool); `clip`, a share under the floor counts 0."""
    def fused(bm25: list[tuple[int, float]], cos: Any, query: str = "") -> list[int]:
        scores_ = dict(_bm25_shares(bm25, bm25_scale))
        best = model_first(cos, max(pool, floor_at))
        if not best:
            return _ordered(scores_)
        first = best[0][1]
        floor = best[min(floor_at, len(best)) - 1][1]
        span = first - floor

        def share(cosine: float) -> float:
            value = (cosine - floor) / span if span > 0 else 1.0
            return weight * (max(value, 0.0) if clip else value)

        for at, cosine in best[:pool]:
            scores_[at] = scores_.get(at, 0.0) + share(cosine)
        if known_cosines:
            pooled = {at for at, _ in best[:pool]}
            for at, _ in bm25:
                if at not in pooled:
                    scores_[at] = scores_.get(at, 0.0) + share(float(cos[at]))
        return _ordered(scores_)
    return fused


def product(weight: float = 1.5) -> Fusion:
    """The product's `fusion.fuse` itself, on BM25's list and the model's first 50 (the baseline of every table)."""
    from gateway.offer.fusion import fuse

    class _Tool:
        __slots__ = ("name",)

        def __init__(self, at: int) -> None:
            self.name = str(at)

    made: dict[int, _Tool] = {}

    def tool(at: int) -> Any:
        return made.setdefault(at, _Tool(at))

    def fused(bm25: list[tuple[int, float]], cos: Any, query: str = "") -> list[int]:
        similar = [(tool(at), cosine) for at, cosine in model_first(cos, DEPTH)]
        return [int(t.name) for t, _ in fuse([(tool(at), s) for at, s in bm25], similar, weight)]
    return fused


def alone(which: str) -> Fusion:
    """One ranker's list alone (`bm25`, or `model`'s first 50): what each brings, beside the fusion."""
    def fused(bm25: list[tuple[int, float]], cos: Any, query: str = "") -> list[int]:
        return [at for at, _ in bm25] if which == "bm25" else [at for at, _ in model_first(cos, DEPTH)]
    return fused


def standardized(weight: float = 1.5, how: str = "z", agree: float = 0.0) -> Fusion:
    """Each list's scores scaled by its own spread instead of its range: `z`, (s - mean) / deviation over the list's
    places; `dbsf`, between mean - 3 deviations (0) and mean + 3 (1) (distribution-based score fusion). `agree`: a
    tool in both lists gets that much more (CombMNZ's idea: agreement counts)."""
    import statistics

    def scaled(values: list[float]) -> list[float]:
        if len(values) < 2:
            return [1.0] * len(values)
        mean, deviation = statistics.fmean(values), statistics.pstdev(values)
        if deviation == 0:
            return [1.0] * len(values)
        if how == "z":
            return [(v - mean) / deviation for v in values]
        return [(v - mean + 3 * deviation) / (6 * deviation) for v in values]

    def fused(bm25: list[tuple[int, float]], cos: Any, query: str = "") -> list[int]:
        capped, above = [], bm25[0][1] if bm25 else 0.0
        for at, score in bm25:
            above = min(score, above)
            capped.append((at, above))
        best = model_first(cos, DEPTH)
        total: dict[int, float] = {}
        for (at, _), share in zip(capped, scaled([s for _, s in capped]), strict=True):
            total[at] = share
        for (at, _), share in zip(best, scaled([c for _, c in best]), strict=True):
            total[at] = total.get(at, 0.0) + weight * share + (agree if at in total else 0.0)
        return _ordered(total)
    return fused


def agreeing(weight: float = 1.5, agree: float = 0.25) -> Fusion:
    """The product's rule, and a tool in both lists gets `agree` more."""
    base = scores(weight=weight)

    def fused(bm25: list[tuple[int, float]], cos: Any, query: str = "") -> list[int]:
        order = base(bm25, cos, query)
        return order if not agree else _agree(order, bm25, cos, weight, agree)
    return fused


def _agree(order: list[int], bm25: list[tuple[int, float]], cos: Any, weight: float, agree: float) -> list[int]:
    shares = _bm25_shares(bm25, "top")
    best = model_first(cos, DEPTH)
    first, floor = best[0][1], best[-1][1]
    total = dict(shares)
    for at, cosine in best:
        share = weight * ((cosine - floor) / (first - floor) if first > floor else 1.0)
        total[at] = total.get(at, 0.0) + share + (agree if at in shares else 0.0)
    return _ordered(total)


def _oracle(bm25: list[tuple[int, float]], cos: Any, query: str = "") -> list[int]:
    raise AssertionError("counted apart: it reads the right tools")


ORACLE: Fusion = _oracle
"""Not a fusion: a request counts when either ranker alone has a right operation among its first five (ten)."""
def slots(model: int, bm25_slots: int) -> Fusion:
    """The model's first `model` and BM25's first `bm25_slots` first (in the fused order among themselves), then the
    product's fused order: each ranker keeps places of its own (interleaving)."""
    base = scores()

    def fused(bm25: list[tuple[int, float]], cos: Any, query: str = "") -> list[int]:
        order = base(bm25, cos, query)
        kept = {at for at, _ in model_first(cos, model)} | {at for at, _ in bm25[:bm25_slots]}
        return [at for at in order if at in kept] + [at for at in order if at not in kept]
    return fused


def by_reading(read: float = 1.5, unread: float = 2.0) -> Fusion:
    """The product's rule, the model's weight `unread` where the request reads no method (`query.intended_methods`:
    BM25's signals then miss the verb, rank32's finding), `read` where it reads one."""
    from gateway.offer.query import intended_methods

    kinds = {True: scores(weight=read), False: scores(weight=unread)}

    def fused(bm25: list[tuple[int, float]], cos: Any, query: str = "") -> list[int]:
        return kinds[bool(intended_methods(query))](bm25, cos, query)
    return fused


VARIANTS: dict[str, Fusion] = {}
RULED = ("product@resource:1", "product@resource:2", "product@resource:3", "product@parent:2", "product@parent:3",
         "w2@resource:2", "floor30@resource:2", "agree0.25@resource:2")
"""`diversified` after the fold, with the product's fusion and with three variants."""


def _variants() -> dict[str, Fusion]:
    if VARIANTS:
        return VARIANTS
    VARIANTS["product"] = product()
    VARIANTS["bm25-alone"] = alone("bm25")
    VARIANTS["model-alone"] = alone("model")
    VARIANTS["oracle"] = ORACLE
    for depth in (30, 40, 75):
        VARIANTS[f"floor{depth}"] = scores(floor_at=depth)
    for w in (1.0, 1.5, 2.0):
        VARIANTS[f"z{w:g}"] = standardized(w, "z")
        VARIANTS[f"dbsf{w:g}"] = standardized(w, "dbsf")
    for a in (0.1, 0.25, 0.5):
        VARIANTS[f"agree{a:g}"] = agreeing(agree=a)
    for read, unread in ((1.5, 2.0), (1.5, 2.5), (1.5, 3.0), (1.25, 2.0), (1.25, 1.5), (1.5, 1.25)):
        VARIANTS[f"read{read:g}-unread{unread:g}"] = by_reading(read, unread)
    for model, bm25_slots in ((3, 2), (4, 1), (2, 2), (2, 3), (1, 1)):
        VARIANTS[f"slots{model}+{bm25_slots}"] = slots(model, bm25_slots)
    VARIANTS["known-unclipped-w2"] = scores(weight=2.0, known_cosines=True, clip=False)
    for w in (1.25, 1.75, 2.0):
        VARIANTS[f"w{w:g}"] = scores(weight=w)
    for depth in (100, 200, 400):
        VARIANTS[f"floor{depth}"] = scores(floor_at=depth)
        VARIANTS[f"pool{depth}"] = scores(floor_at=depth, pool=depth)
    VARIANTS["known"] = scores(known_cosines=True)
    VARIANTS["known-unclipped"] = scores(known_cosines=True, clip=False)
    VARIANTS["known-floor100"] = scores(known_cosines=True, floor_at=100)
    VARIANTS["known-pool100"] = scores(known_cosines=True, floor_at=100, pool=100)
    VARIANTS["bm25span"] = scores(bm25_scale="span")
    VARIANTS["bm25span-known"] = scores(bm25_scale="span", known_cosines=True)
    return VARIANTS


# -- counting -------------------------------------------------------------------------------------------------------

def entries(order: Sequence[int], addresses: Sequence[str], limit: int = 10) -> list[list[int]]:
    """The first `limit` operations of a fused list as `toolsearch.search` answers them (`copies.fold`): each its
    best copy and the copies ranked after it."""
    found: list[list[int]] = []
    by_address: dict[str, list[int]] = {}
    for at in order:
        key = addresses[at]
        entry = by_address.get(key)
        if entry is not None:
            entry.append(at)
        elif len(found) < limit:
            by_address[key] = [at]
            found.append(by_address[key])
    return found


def _resource(path: str) -> str:
    """A path's resource: the path without its trailing parameters (`/x` and `/x/{id}` one), any method."""
    parts = path.split(" ", 1)[1].rstrip("/").split("/")
    while parts and parts[-1].startswith("{"):
        parts.pop()
    return "/".join(parts)


def _parent(path: str) -> str:
    """A path's parent resource: its resource without the last word (`/x/{id}/y` -> `/x`)."""
    parts = _resource(path).split("/")
    return _resource("X " + "/".join(parts[:-1])) if len(parts) > 2 else "/".join(parts)


FAMILIES: dict[str, Callable[[str], str]] = {"resource": _resource, "parent": _parent}


def diversified(found: list[list[int]], paths: Sequence[str], family: str, cap: int, span: int = 5) -> list[list[int]]:
    """`found` (entries, best first) with at most `cap` of one family among the first `span`; the others keep their
    order after them."""
    key = FAMILIES[family]
    front: list[list[int]] = []
    held: list[list[int]] = []
    seen: collections.Counter[str] = collections.Counter()
    for entry in found:
        name = key(paths[entry[0]])
        if len(front) < span and seen[name] >= cap:
            held.append(entry)
            continue
        seen[name] += 1
        front.append(entry)
    return front[:span] + held + front[span:]


def wanted(row: dict[str, Any], data: dict[str, Any]) -> set[int]:
    ops = set(row["ops"])
    return {at for at, (name, op) in enumerate(zip(data["names"], data["ops"], strict=True))
            if name in ops or op in ops}


def place_of(order: Sequence[int], data: dict[str, Any], right: set[int]) -> int | None:
    """The answer's place (1-based, counted by operations) of the first entry holding a right tool."""
    for at, entry in enumerate(entries(order, data["addresses"], limit=len(order)), 1):
        if right.intersection(entry):
            return at
    return None


def counted(name: str, fusion: Fusion, data: dict[str, Any] | None = None,
            rule: tuple[str, int] | None = None) -> dict[str, tuple[int, int, int]]:
    """Per part: hits@5, hits@10, requests (`rule`: `diversified`'s family and cap, after the fold)."""
    data = data or load(name)
    found: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])
    for row in data["rows"]:
        right = wanted(row, data)
        if fusion is ORACLE:  # either ranker's first five answers operations, as the fold counts them
            lists = (alone("bm25")(row["bm25"], row["cos"], ""), alone("model")(row["bm25"], row["cos"], ""))
            firsts = [entries(order, data["addresses"]) for order in lists]
            cell = found[row["part"]]
            cell[0] += any(right.intersection(entry) for first in firsts for entry in first[:5])
            cell[1] += any(right.intersection(entry) for first in firsts for entry in first)
            cell[2] += 1
            continue
        order = fusion(row["bm25"], row["cos"], row["q"])
        if rule is None:
            first10 = entries(order, data["addresses"])
        else:
            first10 = diversified(entries(order, data["addresses"], limit=len(order)), data["paths"], *rule)[:10]
        cell = found[row["part"]]
        cell[0] += any(right.intersection(entry) for entry in first10[:5])
        cell[1] += any(right.intersection(entry) for entry in first10)
        cell[2] += 1
    return {part: (a, b, n) for part, (a, b, n) in found.items()}


def score(names: list[str]) -> None:
    """Recall@5 hits (@10) per API of `DEV` then of `round17` for each variant; then the choice leaving one API out."""
    labels = [*_variants(), *RULED] if not names else list(dict.fromkeys(["product", *names]))
    chosen = dict.fromkeys(labels)
    loaded = {name: load(name) for name in APIS}
    table: dict[str, dict[str, dict[str, tuple[int, int, int]]]] = {}
    for label in labels:  # `VARIANT` or `VARIANT@FAMILY:CAP` (`diversified` after the fold)
        fusion, _, rule = label.partition("@")
        family, _, cap = rule.partition(":")
        table[label] = {name: counted(name, _variants()[fusion], loaded[name], (family, int(cap)) if rule else None)
                        for name in APIS}
        print(f"{label}: done", file=sys.stderr, flush=True)
    sizes = {name: sum(n for _, _, n in table["product"][name].values()) for name in APIS}
    print("| variant | part | " + " | ".join(f"{name} ({sizes[name]} / 40)" for name in APIS) + " | all |")
    print("|---|---|" + "---|" * (len(APIS) + 1))

    def total(label: str, name: str, parts: Iterable[str]) -> tuple[int, int]:
        cells = [table[label][name][part] for part in parts if part in table[label][name]]
        return sum(a for a, _, _ in cells), sum(b for _, b, _ in cells)

    for label in chosen:
        for parts, shown in ((DEV, "DEV"), ((CLEAN,), CLEAN)):
            counts = [total(label, name, parts) for name in APIS]
            print(f"| {label} | {shown} | " + " | ".join(f"{a} ({b})" for a, b in counts)
                  + f" | **{sum(a for a, _ in counts)}** ({sum(b for _, b in counts)}) |")
    for parts, shown in ((DEV, "DEV"), ((CLEAN,), CLEAN)):
        picks, counts = [], []
        for name in APIS:
            pick = max((label for label in chosen if label != "oracle"),  # it reads the answers: never a choice
                       key=lambda label: sum(total(label, other, DEV)[0] for other in APIS if other != name))
            picks.append(pick)
            counts.append(total(pick, name, parts))
        picked = "; ".join(f"{label} x{n}" for label, n in collections.Counter(picks).items())
        print(f"| chosen on the other APIs, counted on the one left out | {shown} | "
              + " | ".join(f"{a} ({b})" for a, b in counts)
              + f" | **{sum(a for a, _ in counts)}** ({sum(b for _, b in counts)}) | {picked} |")


# -- the misses -----------------------------------------------------------------------------------------------------

def check() -> None:
    """The re-done product fusion against the product's own `embeddings.hybrid`, request by request."""
    from gateway.offer import embeddings

    settings = _settings()
    fusion = product()
    for name in APIS:
        data = load(name)
        catalog = _catalog(name)
        api = next(iter(catalog.apis))
        tools = list(catalog.for_api(api))
        place = {tool.name: at for at, tool in enumerate(tools)}
        same = 0
        for row in data["rows"]:
            bm25 = [(tools[at], s) for at, s in row["bm25"]]
            live = [place[t.name] for t, _ in embeddings.hybrid(settings, catalog, [api], None, row["q"], bm25)]
            same += live == fusion(row["bm25"], row["cos"], row["q"])
        print(f"{name}: {same} of {len(data['rows'])} fused lists as the product's", flush=True)


def misses(names: list[str], parts: list[str]) -> None:
    """Each fused miss@5 of `parts`: the right tool's place in BM25's list, the model's whole ranking and the fused
    answer, the fused first; then the misses counted by where the rankers put it."""
    fusion = product()
    kinds: collections.Counter[str] = collections.Counter()
    for name in names:
        data = load(name)
        for row in data["rows"]:
            if row["part"] not in parts:
                continue
            right = wanted(row, data)
            order = fusion(row["bm25"], row["cos"], row["q"])
            at_fused = place_of(order, data, right)
            if at_fused is not None and at_fused <= 5:
                continue
            bm25 = [at for at, _ in row["bm25"]]
            at_bm25 = next((i for i, at in enumerate(bm25, 1) if at in right), None)
            model = model_first(row["cos"], len(row["cos"]))
            at_model = next((i for i, (at, _) in enumerate(model, 1) if at in right), None)
            cause = ("both past 50" if at_bm25 is None and (at_model is None or at_model > 50) else
                     "model's first 5, fusion loses it" if at_model is not None and at_model <= 5 else
                     "BM25's first 5, fusion loses it" if at_bm25 is not None and at_bm25 <= 5 else
                     "model only (6-50), BM25 past 50" if at_bm25 is None else
                     "BM25 only (6-50), model past 50" if at_model is None or at_model > 50 else "both 6-50")
            deep = ("model 51-100" if at_model is not None and 50 < at_model <= 100 else
                    "model 101-400" if at_model is not None and 100 < at_model <= 400 else "")
            for scope in (name, "all"):
                kinds[f"{scope} {row['part']}: {cause}"] += 1
                kinds[f"{scope} all parts: {cause}"] += 1
                if deep and cause in ("both past 50", "BM25 only (6-50), model past 50"):
                    kinds[f"{scope} all parts: {cause}, {deep}"] += 1
            first = entries(order, data["addresses"], limit=3)
            closest = max(float(row["cos"][at]) for at in right)
            print(f"{name} {row['part']} {row['q']!r}\n    want {data['paths'][next(iter(right))]} "
                  f"bm25 {at_bm25} model {at_model} fused {at_fused} ({cause})\n    fused first: "
                  + "; ".join(data["paths"][entry[0]] for entry in first)
                  + f" | model first: {data['paths'][model[0][0]]} ({model[0][1]:.3f}; right {closest:.3f})")
    for kind, count in sorted(kinds.items()):
        print(f"{count:4d}  {kind}")


def cost(rounds: int) -> None:
    """What the model's ranking costs over Graph's tools, per request, in the searching thread's CPU (µs, p50 / p95
    over `DEV`'s Graph requests, `rounds` passes, the request vectors made first): the product's first 50 (int8 bounds,
    then the candidates' float32 cosines: `ToolVectors.best`), its first 100 / 200 / 400 the same way, a full dot
    product over every tool (`numpy.vecdot`, as the unbounded pass) with and without choosing its first 50, and the
    cosines of BM25's 50 alone (what `known` needs)."""
    import statistics
    import time

    import numpy

    from bench.search_fusion import tool_vectors
    from gateway.offer import embeddings

    settings = _settings()
    catalog = _catalog("graph")
    api = next(iter(catalog.apis))
    rows = tool_vectors(settings, catalog)  # computed or read: then `prepare` hands the same vectors back
    known = embeddings.prepare(settings, catalog, [api])[0]
    assert not isinstance(known, embeddings.Computation)
    data = load("graph")
    queries = [embeddings._query_vector(settings, row["q"]) for row in data["rows"]]  # noqa: SLF001 - ours
    picks = [numpy.asarray([at for at, _ in row["bm25"]], dtype=numpy.intp) for row in data["rows"]]
    ways: dict[str, Callable[[Any, Any], Any]] = {
        "best 50 (the product)": lambda q, _: known.best(q, 50),
        "best 100": lambda q, _: known.best(q, 100),
        "best 200": lambda q, _: known.best(q, 200),
        "best 400": lambda q, _: known.best(q, 400),
        "every tool's cosine": lambda q, _: numpy.vecdot(rows, q),
        "every tool's cosine, first 50 chosen": lambda q, _: numpy.argpartition(-numpy.vecdot(rows, q), 50)[:50],
        "BM25's 50 tools' cosines": lambda q, pick: numpy.vecdot(rows[pick], q),
    }
    for q, pick in zip(queries, picks, strict=True):  # warm: the bounds' session, the allocator
        for way in ways.values():
            way(q, pick)
    print(f"Graph: {known.count} tools x {known.dim}; {len(queries)} requests x {rounds} rounds")
    for label, way in ways.items():
        spent = []
        for _ in range(rounds):
            for q, pick in zip(queries, picks, strict=True):
                started = time.thread_time_ns()
                way(q, pick)
                spent.append((time.thread_time_ns() - started) / 1000)
        spent.sort()
        print(f"| {label} | {statistics.median(spent):.0f} | {spent[int(len(spent) * 0.95)]:.0f} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["collect", "check", "misses", "score", "cost"])
    parser.add_argument("--rounds", type=int, default=3, help="cost: passes over the requests")
    parser.add_argument("--apis", nargs="+", choices=APIS, default=list(APIS))
    parser.add_argument("--parts", nargs="+", choices=DEV, default=list(DEV))
    parser.add_argument("--variants", nargs="*", default=[],
                        help="score: VARIANT or VARIANT@FAMILY:CAP (at most CAP operations of one family among the "
                             "first five); default every variant")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.stage == "collect":
        collect(args.apis)
    elif args.stage == "check":
        check()
    elif args.stage == "misses":
        misses(args.apis, args.parts)
    elif args.stage == "cost":
        cost(args.rounds)
    else:
        score(args.variants)
    return 0


if __name__ == "__main__":
    sys.exit(main())
