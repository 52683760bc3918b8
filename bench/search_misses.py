"""The development data's misses by cause, and the rules written from them (branch rank32, rank33, rank35, rank36,
rank37, rank38, then tags39, respfields and tagtable).

    OMP_NUM_THREADS=1 python bench/search_misses.py prepare      # each request's cosines with every tool (the delta
                                                                  # in place: run once with each of `DELTAS`)
    python bench/search_misses.py rank --label NAME [--tree PATH]   # each request's lists, saved under NAME
    python bench/search_misses.py misses [--apis graph here] [--parts round23]   # misses@5 alone and fused, by cause
    python bench/search_misses.py table --labels A B ...   # recall per API and part; chosen leaving one API out
    python bench/search_misses.py diff --labels A B [--fused]   # the requests one finds in its first 5, the other not

Data: every part from `round12` to `round31` of the sixteen APIs that hold one (`DEV`): the six first APIs'
`round12`..`round31`, Asana's, Zoom's and Box's `round15`..`round31`, Twilio's, Adyen's and NetBox's
`round16`..`round31`, Docker's and Apacta's `round17`..`round31`, HERE Tracking's `round18`..`round31`, Slicebox's
`round19`..`round31`; 11,429 requests, each measured once by the lead and spent. Rules are written from the misses
of every part and chosen by leaving one API out (the variant with the most hits@5 on the other fifteen APIs' `DEV`,
counted on the one left out); `round21`..`round31` are reported apart. `round32` (the lead's judge) and `round33`
(the next one) are never read, nor `round34`, `round35`, `round36` and `round37` (after that; an assert
says so).

The model: fused figures on `round31`, `round30`, `round29` and `round28` are measured with delta27 (trained up to
`round27`: main 5bdbc6d's gateway/offer/minilm_lora.npz, as it ships), on `round27`, `round26` and `round25` with
delta25 (trained up to `round24`: `git show 036be31^:gateway/offer/minilm_lora.npz`), on `round24` with delta24 (trained
up to `round23`: `git show a476bd3:...`), on `round23` with delta22 (trained up to `round22` and on the written
requests: `git show 5ab8274:...`), on `round22` with delta21 (`git show cd79737:...`), on `round21` with delta20 (`git
show 99d4b38:...`), on `round20` with delta19 (`git show 4ca674f:...`), on `round19` with train34's delta (trained up to
`round18`: `git show cb310d0:...`), on every other part with delta17 (trained up to `round17`: `git show 69b41c2^:...`),
each put in place of the shipped one while `prepare` runs, never committed: `round18`..`round31` are clean for the
model, `round12`..`round17` flatter it.

`prepare` saves, per request, its cosine with every tool of its API as the product computes them
(`gateway.search_embeddings: {kind: local}`: the int8 ONNX model with the delta in place, the tools' vectors from the
gateway's own cache, keyed by the delta's content), under the delta's sha256. `rank` compiles each spec with the
gateway of `--tree` (default this one; its index built by that tree's code), searches every request as the product
does (`ToolIndex.search`, 50 places) and fuses it with the model's first 50 by cosine (`gateway.offer.fusion.fuse`,
the default weight), folds each list as the search answers (`gateway.offer.copies.fold`: one place per operation, its
copies named with it and counted as its hits), then saves where each list puts the right tool (`DATA /
ranked-NAME.json`). `table` counts recall@5 and @10 hits per API and part, BM25 alone and fused, for each saved list,
and then chooses: the list with the most hits@5 on fifteen APIs counted on the sixteenth ("other API"). `misses`
prints each miss@5 of this tree (BM25 alone or fused): where each ranker put the right tool, which fields of it hold
each of the request's match terms (stemmed: `bench.search_text.fields`), the terms no field holds, and the fusion's
first with what it shares with the right tool; then counts them by cause.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WRITE = ("round12", "round13", "round14", "round15", "round16", "round17", "round18", "round19", "round20")
"""The older parts of the development data (fused with delta17, trained on all but `round18`, train34's delta for
`round19` and delta19 for `round20`)."""
CONFIRM = ("round21", "round22", "round23", "round24", "round25", "round26", "round27", "round28", "round29",
           "round30", "round31")
"""The freshest parts (spent: each measured once by the lead; clean for their deltas): reported apart."""
DEV = (*WRITE, *CONFIRM)
assert not {"round32", "round33", "round34", "round35", "round36", "round37"} & set(DEV)
APIS = ("github", "stripe", "graph", "slack", "jira", "kubernetes", "asana", "zoom", "box", "twilio", "adyen", "netbox",
        "docker", "apacta", "here", "slicebox")
"""The APIs that hold a part of `DEV`."""
DELTAS = {"delta17": "c55cf467395e75e3d43d99e10d1a00e26f030a4526428cc2908dda22bb284392",
          "train34": "3d596647ff09c6516d54edf70e7239f33650f31c6965bc216865dd2a72d56071",
          "delta19": "8e0a8f9e18121c8f6328bcb08d0f71e9531e3de2a1966f54c0dff63048b76c43",
          "delta20": "10ba355c7d54ea21f29824de5a9076afccaa8d39f98a1080e623523395328649",
          "delta21": "402eeefdf30988c304cf4904b48285c9580d46fb34b3f040db140ba2a6480df8",
          "delta22": "7c076af253ad230117bab04e44dfbf326c21b7f2653344a18569c6c645ce4fc2",
          "delta24": "453fbfcd23f60c0c5353e6c5ddaa419baa64003dc5ff7292a12e01c32f7ffcc2",
          "delta25": "e1750c30d57f405aaccf43a180c6e6dcaa7b37bf477290b316b118dc2a487a57",
          "delta27": "1be6096bc64a6f9354cff77107e660b09142ee8421408ca2f1e23674c8984195",
          "delta32": "bb95d761cb26fbf7370932d8e1d4e8da98ee650b58a77ea15760b5fc892d038a"}
"""The sha256 of the deltas the fused figures are measured with: delta27 for `round31`, `round30`, `round29` and
`round28`, delta25 for `round27`, `round26` and `round25`, delta24 for `round24`, delta22 for `round23`, delta21 for
`round22`, delta20 for `round21`, delta19 for `round20`, train34's for `round19`, delta17 for the rest; delta32 (trained
up to `round32`, branch ship49: every `DEV` part is its training data) for none, unless `GATEWAY_BENCH_ONE_DELTA` names
it."""
_LATER = {"round31": "delta27", "round30": "delta27", "round29": "delta27", "round28": "delta27", "round27": "delta25",
          "round26": "delta25", "round25": "delta25",
          "round24": "delta24", "round23": "delta22", "round22": "delta21", "round21": "delta20", "round20": "delta19",
          "round19": "train34"}
ONE_DELTA = os.environ.get("GATEWAY_BENCH_ONE_DELTA", "")
"""A delta of `DELTAS` every part is fused with, when set (its cosines under `DATA / "LABEL-all"`): rank48's
measure, on a machine whose `/tmp` held no earlier cosines and whose load left no time to compute eight deltas'
(the older parts then flatter the model, but a variant and main read the same cosines)."""
assert not ONE_DELTA or ONE_DELTA in DELTAS, f"GATEWAY_BENCH_ONE_DELTA: one of {sorted(DELTAS)}"
MODEL_OF = {part: ONE_DELTA or _LATER.get(part, "delta17") for part in DEV}
DATA = Path(tempfile.gettempdir()) / "gateway-bench-rank48"
"""rank48's: delta27's cosines of `round28`..`round31` (`delta27`) and of every part (`delta27-all`), computed anew on
this machine (its `/tmp` held none of rank47's); the other deltas' are computed by `prepare` with each in place."""
CACHE = Path(tempfile.gettempdir()) / "gateway-bench-search-cache"


def _cosines_dir(label: str) -> Path:
    return DATA / (f"{label}-all" if ONE_DELTA else label)


def _requests(name: str, parts: Iterable[str] = DEV) -> list[dict[str, Any]]:
    from bench.search import load_tasks

    tasks = load_tasks(name)
    return [{**task, "part": part} for part in parts for task in tasks.get(part, [])]


def _catalog(name: str) -> Any:
    from bench.search import CORPUS, SPECS, _compile

    # the corpus beside this tree (another tree's copy may have none beside it)
    return _compile(ROOT.parent / "shared" / "corpus" / SPECS[name].relative_to(CORPUS), index=True, cache=CACHE)[1]


def prepare() -> None:
    """Each API's `DEV` requests' cosines with every tool: `DATA / NAME.npy` (one row a request, in `DEV`'s order).
    Each request is embedded alone, as a search embeds it (the int8 model quantizes a batch's activations together:
    bench/README.md, branch graph32)."""
    import hashlib

    from bench.search_text import save_cosines
    from gateway.config.embeddings_endpoint import SearchEmbeddings
    from gateway.offer import embeddings

    placed = hashlib.sha256((ROOT / "gateway" / "offer" / "minilm_lora.npz").read_bytes()).hexdigest()
    label = next((label for label, sha in DELTAS.items() if sha == placed), None)
    assert label, f"the delta in place ({placed[:8]}) is none of {sorted(DELTAS)}: put one in place first"
    settings = SearchEmbeddings.model_validate({"kind": "local", "timeout": 3600})
    parts = [part for part in DEV if MODEL_OF[part] == label]
    save_cosines(_cosines_dir(label), [name for name in APIS if _requests(name, parts)], _catalog,
                 lambda name: [task["q"] for task in _requests(name, parts)],
                 embed=lambda texts: [embeddings.embed(settings, [text])[0] for text in texts])


def _cosines(name: str, among: Iterable[str] = DEV) -> list[Any]:
    """One row per request of `_requests(name, among)`: its cosines with every tool, from the delta its part is
    measured with (only those deltas' cosines read: a census of the last parts needs no other)."""
    import numpy

    among = tuple(among)
    rows: dict[str, Any] = {}
    for label in DELTAS:
        parts = [part for part in DEV if MODEL_OF[part] == label]
        if not _requests(name, parts) or not set(parts) & set(among):
            continue
        saved = numpy.load(_cosines_dir(label) / f"{name}.npy")
        assert len(saved) == len(_requests(name, parts)), f"{name}: run prepare again ({label})"
        rows[label] = iter(row for row, task in zip(saved, _requests(name, parts), strict=True)
                           if task["part"] in among)
    return [next(rows[MODEL_OF[task["part"]]]) for task in _requests(name, among)]


def _weight() -> float:
    from gateway.config.embeddings_endpoint import SearchEmbeddings

    return SearchEmbeddings.model_validate({"kind": "local"}).weight


class Ranked:
    """One API's `DEV` requests searched by this process's gateway: per request BM25's first 50 (tool places), the
    model's first 50 (places, cosines), the fusion of the two, and the right tools' places. `described`: what the
    index is given of each tag's description (default all of it, as the product); `parts`: the parts searched
    (default all of `DEV`)."""

    def __init__(self, name: str, described: Callable[[str], str] | None = None,
                 parts: Iterable[str] = DEV) -> None:
        import numpy

        from gateway.offer.copies import addresses
        from gateway.offer.index import build_index

        self.catalog = catalog = _catalog(name)
        self.api = next(iter(catalog.apis))
        self.tools = catalog.for_api(self.api)
        spec = catalog.apis[self.api]
        # this tree's index, whatever the cache held (with its tags' descriptions where the tree reads them)
        tags = (spec.tag_descriptions,) if hasattr(spec, "tag_descriptions") else ()
        if tags and described is not None:
            tags = ({tag: described(text) for tag, text in spec.tag_descriptions.items()},)
        spec.search_index = build_index(self.tools, *tags)
        self.place = {tool.name: at for at, tool in enumerate(self.tools)}
        by_op = {tool.operation_id: at for at, tool in enumerate(self.tools) if tool.operation_id}
        cosines = _cosines(name, parts)
        self.requests = _requests(name, parts)
        self.known = addresses(catalog)
        self.model: list[tuple[list[int], list[tuple[Any, float]], set[int]]] = []
        for at, task in enumerate(self.requests):
            best = numpy.argsort(-cosines[at], kind="stable")[:50]
            similar = [(self.tools[t], float(c)) for t, c in zip(best.tolist(), cosines[at][best].tolist(),
                                                                   strict=True)]
            wanted = {self.place.get(op, by_op.get(op, -1)) for op in task["ops"]} - {-1}
            assert wanted, f"{name}: {task['q']!r} names no tool of the catalog"
            self.model.append((best.tolist(), similar, wanted))
        self.rows = self.search()

    def search(self) -> list[tuple[list[int], list[int], list[int], set[int]]]:
        """Every request searched again (the index opened anew; the ranking's settings as they are now): BM25's
        list, the model's, the fused one (each folded as the search answers) and the right tools."""
        from gateway.offer.fusion import HELD_PLACES, fuse, trusted
        from gateway.offer.index import ToolIndex
        from gateway.offer.signals import WEIGHTS

        searcher = ToolIndex(self.catalog)
        weight = _weight()
        rows = []
        for task, (model, similar, wanted) in zip(self.requests, self.model, strict=True):
            hits = searcher.search(task["q"], limit=50, apis=[self.api])
            ranked = [(hit.tool, hit.score) for hit in hits]
            alone = _folded(ranked, wanted, self.place, self.known)
            # as the product fuses (`embeddings.hybrid`): the model trusted by how much BM25's first places hold
            held = searcher.held(task["q"], [tool for tool, _ in ranked[:HELD_PLACES]]) if WEIGHTS.held else 1.0
            fused = _folded(fuse(ranked, similar, trusted(weight, held, WEIGHTS.held)), wanted, self.place,
                            self.known)
            rows.append((alone, model, fused, wanted))
        return rows

    def saved(self) -> list[dict[str, Any]]:
        """What `rank` saves of each request: its part, words and the right tool's place in each list (null: not
        there), and the first three names of BM25's and the fusion's."""
        return [{"part": task["part"], "q": task["q"], "alone": _first(alone, wanted), "model": _first(model, wanted),
                 "fused": _first(fused, wanted), "alone3": [self.tools[t].name for t in alone[:3]],
                 "fused3": [self.tools[t].name for t in fused[:3]]}
                for task, (alone, model, fused, wanted) in zip(self.requests, self.rows, strict=True)]


def _folded(ranked: Any, wanted: set[int], place: dict[str, int], known: dict[str, str]) -> list[int]:
    """The tools' places of a list as the search answers it (`copies.fold`: one entry per operation); an entry with a
    right tool among its copies is named by that tool, so it counts as a hit where the entry stands."""
    from gateway.offer.copies import fold

    order = []
    for tool, _, copies in fold(list(ranked), 50, known):
        held = [place[t.name] for t in (tool, *copies)]
        order.append(next((at for at in held if at in wanted), held[0]))
    return order


def _first(order: list[int], wanted: set[int]) -> int | None:
    return next((at for at, tool in enumerate(order, 1) if tool in wanted), None)


def rank(label: str) -> None:
    """`DATA / ranked-LABEL.json`: per API, per request its part, words and the right tool's place in BM25's first
    50, the model's and the fusion's (null: not there), and the first three names of each list; written again after
    each API, so that a run stopped early (a loaded machine) leaves the APIs it ranked."""
    import gateway

    saved: dict[str, list[dict[str, Any]]] = {}
    for name in APIS:
        rows = saved[name] = Ranked(name).saved()
        (DATA / f"ranked-{label}.json").write_text(json.dumps({"gateway": gateway.__file__, "apis": saved}))
        print(f"{name}: {len(rows)} requests", flush=True)


def _load(label: str) -> dict[str, list[dict[str, Any]]]:
    return json.loads((DATA / f"ranked-{label}.json").read_text())["apis"]  # type: ignore[no-any-return]


def _hits(rows: list[dict[str, Any]], parts: Iterable[str], fused: bool) -> tuple[int, int]:
    key = "fused" if fused else "alone"
    chosen = [row[key] for row in rows if row["part"] in set(parts)]
    return sum(1 for at in chosen if at is not None and at <= 5), sum(1 for at in chosen if at is not None and at <= 10)


SHOWN = ((WRITE, "round12-20"), *(((part,), part) for part in CONFIRM))
"""The groups a table shows: the older parts together, then each of the freshest apart."""


def table(labels: list[str]) -> None:
    """Recall@5 hits (@10) per API for each saved list: `WRITE`, then `round21`..`round31` apart, BM25
    alone then fused; then the choice made leaving one API out, and, against the first list, the largest loss of any
    API on any round (a change is kept only if it gains on `DEV` and no API loses more than 2 on a round). The choice:
    the most hits@5 on the other APIs, ties by hits@10, then the first list given."""
    loaded = {label: _load(label) for label in labels}
    sizes = {name: [sum(1 for row in rows if row["part"] in parts) for parts, _ in SHOWN]
             for name, rows in loaded[labels[0]].items()}
    print("| list | ranker | part | " + " | ".join(f"{name} ({' / '.join(map(str, n))})" for name, n in sizes.items())
          + " | all |")
    print("|---|---|---|" + "---|" * (len(sizes) + 1))
    for label in labels:
        for fused in (False, True):
            for parts, shown in SHOWN:
                counts = [_hits(rows, parts, fused) for rows in loaded[label].values()]
                print(f"| {label} | {'fused' if fused else 'alone'} | {shown} | "
                      + " | ".join(f"{a} ({b})" if b or a else "-" for a, b in counts)
                      + f" | **{sum(a for a, _ in counts)}** ({sum(b for _, b in counts)}) |")
    if len(labels) < 2:
        return
    for fused in (False, True):
        ranker = "fused" if fused else "alone"
        chosen = []
        counts = []
        for name in sizes:
            pick = max(labels, key=lambda label: tuple(map(sum, zip(*(_hits(rows, DEV, fused) for other, rows
                                                                     in loaded[label].items() if other != name),
                                                                   strict=True))))  # @5, ties by @10
            chosen.append(pick)
            counts.append(_hits(loaded[pick][name], DEV, fused))
        print(f"| chosen on the other APIs (all of DEV) | {ranker} | all | "
              + " | ".join(f"{a} ({b})" for a, b in counts)
              + f" | **{sum(a for a, _ in counts)}** ({sum(b for _, b in counts)}) | "
              + "; ".join(f"{label} x{n}" for label, n in collections.Counter(chosen).items()) + " |")
    base = loaded[labels[0]]
    for label in labels[1:]:
        for fused in (False, True):
            worst = min(((_hits(rows, (part,), fused)[0] - _hits(base[name], (part,), fused)[0], name, part)
                         for name, rows in loaded[label].items() for part in DEV
                         if any(row["part"] == part for row in rows)), default=(0, "-", "-"))
            print(f"{label} against {labels[0]}, {'fused' if fused else 'alone'}: the largest loss of an API on a "
                  f"round {worst[0]:+d} ({worst[1]} {worst[2]})")


def diff(before: str, after: str, fused: bool) -> None:
    """The requests one list finds among its first five and the other does not."""
    key = "fused" if fused else "alone"
    old, new = _load(before), _load(after)
    for name in APIS:
        for a, b in zip(old[name], new[name], strict=True):
            was, now = a[key] is not None and a[key] <= 5, b[key] is not None and b[key] <= 5
            if was != now:
                print(f"{'+' if now else '-'} {name} {a['part']} {a['q']!r} {a[key]} -> {b[key]}; now first "
                      f"{b[key + '3'][:1]}")


def misses(names: list[str], parts: list[str]) -> None:
    """Each miss@5 (BM25 alone or fused) of `parts`, with where its words are in the right tool; counted by cause."""
    from bench.search_text import _relation, located

    kinds: collections.Counter[str] = collections.Counter()
    for name in names:
        ranked = Ranked(name)
        count = 0
        for task, (alone, model, fused, wanted) in zip(ranked.requests, ranked.rows, strict=True):
            if task["part"] not in parts:
                continue
            alone_missed = not wanted.intersection(alone[:5])
            fused_missed = not wanted.intersection(fused[:5])
            if not alone_missed and not fused_missed:
                continue
            count += 1
            right = [ranked.tools[at] for at in sorted(wanted)]
            where, lacking, unread = located(task["q"], right)
            at_bm25, at_model, at_fused = _first(alone, wanted), _first(model, wanted), _first(fused, wanted)
            winner = ranked.tools[fused[0]]
            relation = _relation(winner, right)
            place = ("both lack it in their first 50" if at_bm25 is None and at_model is None else
                     "the model's first 5, BM25 lacks it" if at_bm25 is None and at_model is not None and at_model <= 5
                     else "the model's first 5, BM25's 6-50" if at_model is not None and at_model <= 5 else
                     "BM25's 6-50, the model's 6-50" if at_bm25 is not None and at_model is not None else
                     "BM25's 6-50 alone" if at_bm25 is not None else "the model's 6-50 alone")
            kind = ("words only in " + " / ".join(sorted(unread)) if unread else
                    "no word of the request in the right tool" if lacking and len(lacking) == len(where) else
                    "words read; ranked below others")
            for scope in (name, "all"):
                if alone_missed:
                    kinds[f"{scope}: BM25 alone's miss: {kind}"] += 1
                if fused_missed:
                    kinds[f"{scope}: fused miss: {place}"] += 1
                    kinds[f"{scope}: fused miss, its first: {relation}"] += 1
            which = "both" if alone_missed and fused_missed else "alone" if alone_missed else "fused"
            alone_first = ranked.tools[alone[0]].name if alone else "-"
            print(f"{name} {task['part']} [{which}] {task['q']!r}\n    want {right[0].method} {right[0].path} "
                  f"[{right[0].name}] bm25 {at_bm25} model {at_model} fused {at_fused}\n    first {winner.method} "
                  f"{winner.path} [{winner.name}] ({relation}); alone first {alone_first}"
                  f"\n    {' '.join(where)}; lacking: {' '.join(lacking) or '-'}")
        print(f"== {name}: {count} requests missed by one ranker or both", flush=True)
    for kind, count in sorted(kinds.items()):
        print(f"{count:4d}  {kind}")


class _Searched:
    """Every API's `DEV` requests, their right tools and the model's first 50, ready to be searched again as the
    ranking's constants change (`sweep`)."""

    def __init__(self) -> None:
        import numpy

        self.apis = []
        for name in APIS:
            catalog = _catalog(name)
            api = next(iter(catalog.apis))
            tools = catalog.for_api(api)
            place = {tool.name: at for at, tool in enumerate(tools)}
            by_op = {tool.operation_id: at for at, tool in enumerate(tools) if tool.operation_id}
            cosines = _cosines(name)
            requests = _requests(name)
            rows = []
            for at, task in enumerate(requests):
                best = numpy.argsort(-cosines[at], kind="stable")[:50]
                similar = [(tools[t], float(c)) for t, c in zip(best.tolist(), cosines[at][best].tolist(),
                                                               strict=True)]
                wanted = {place.get(op, by_op.get(op, -1)) for op in task["ops"]} - {-1}
                rows.append((task, similar, wanted))
            self.apis.append((name, catalog, api, tools, place, rows))

    def hits(self, rebuild: bool, weights: Any = None) -> dict[str, dict[tuple[str, bool], tuple[int, int]]]:
        """Per API, per (part, fused): hits@5 and @10 under the constants as they are now, the signals' `weights`
        (`gateway.offer.signals.Weights`; default the product's)."""
        from gateway.offer.fusion import fuse
        from gateway.offer.index import ToolIndex, build_index
        from gateway.offer.signals import WEIGHTS

        weight = _weight()
        found: dict[str, dict[tuple[str, bool], tuple[int, int]]] = {}
        for name, catalog, api, tools, place, rows in self.apis:
            if rebuild or not getattr(catalog.apis[api], "_rank32_built", False):
                catalog.apis[api].search_index = build_index(tools)
            searcher = ToolIndex(catalog, weights or WEIGHTS)
            counts: dict[tuple[str, bool], list[int]] = collections.defaultdict(lambda: [0, 0])
            for task, similar, wanted in rows:
                hits = searcher.search(task["q"], limit=50, apis=[api])
                bm25 = [(hit.tool, hit.score) for hit in hits]
                for fused, order in ((False, [place[tool.name] for tool, _ in bm25]),
                                     (True, [place[tool.name] for tool, _ in fuse(bm25, similar, weight)])):
                    at = _first(order, wanted)
                    part = task["part"] if task["part"] in CONFIRM else "write"
                    counts[part, fused][0] += at is not None and at <= 5
                    counts[part, fused][1] += at is not None and at <= 10
            found[name] = {key: (a, b) for key, (a, b) in counts.items()}
        return found


def sweep(grid: dict[str, list[float]]) -> None:
    """Each constant of `grid` (`signals.FIELD`, a field of `gateway.offer.signals.Weights`, or `index_build.NAME`)
    at each of its values, the others as they are: hits@5 (@10) per API on `WRITE` and on `round21`..`round31`, BM25
    alone and fused, against the constants as they are."""
    import dataclasses

    from gateway.offer import index_build
    from gateway.offer.signals import WEIGHTS

    searched = _Searched()
    base = searched.hits(rebuild=True)

    def line(label: str, found: dict[str, dict[tuple[str, bool], tuple[int, int]]]) -> None:
        for fused in (False, True):
            for part in ("write", *CONFIRM):
                cells = [found[name].get((part, fused), (0, 0)) for name in APIS]
                before = [base[name].get((part, fused), (0, 0)) for name in APIS]
                print(f"| {label} | {'fused' if fused else 'alone'} | {part} | "
                      + " | ".join(f"{a - b[0]:+d}" if (a, _) != b else "0" for (a, _), b in zip(cells, before,
                                                                                                strict=True))
                      + f" | **{sum(a for a, _ in cells)}** ({sum(b for _, b in cells)}) |", flush=True)

    print("| constant | ranker | part | " + " | ".join(APIS) + " | all |")
    line("as they are", base)
    for name, values in grid.items():
        module, attribute = name.split(".", 1)
        if module == "signals":  # the index searches with weights of its own, the product's untouched
            for value in values:
                weights = dataclasses.replace(WEIGHTS, **{attribute: value})
                line(f"{name} = {value:g}", searched.hits(rebuild=False, weights=weights))
            continue
        assert module == "index_build", f"{name}: signals.FIELD or index_build.NAME"
        kept = getattr(index_build, attribute)
        for value in values:
            setattr(index_build, attribute, value)
            try:
                line(f"{name} = {value:g}", searched.hits(rebuild=True))
            finally:
                setattr(index_build, attribute, kept)
        searched.hits(rebuild=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["prepare", "rank", "misses", "table", "diff", "sweep"])
    parser.add_argument("--grid", help='sweep: {"signals.intent": [1.5, 2.2], "index_build._DEPTH_PENALTY": [0]}')
    parser.add_argument("--label", help="rank: the name the lists are saved under")
    parser.add_argument("--tree", type=Path, help="rank: the tree whose gateway searches (default this one)")
    parser.add_argument("--labels", nargs="+", help="table, diff: the saved lists")
    parser.add_argument("--fused", action="store_true", help="diff: the fusion's lists")
    parser.add_argument("--apis", nargs="+", choices=APIS, default=list(APIS))
    parser.add_argument("--parts", nargs="+", choices=DEV, default=list(DEV))
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # --tree: that tree's gateway (and bench.search) first on the path, this script's stages
    sys.path.insert(0, str((args.tree or ROOT).resolve()))
    if args.stage == "prepare":
        prepare()
    elif args.stage == "rank":
        rank(args.label)
    elif args.stage == "misses":
        misses(args.apis, args.parts)
    elif args.stage == "table":
        table(args.labels)
    elif args.stage == "sweep":
        sweep(json.loads(args.grid))
    else:
        diff(args.labels[0], args.labels[1], args.fused)
    return 0


if __name__ == "__main__":
    sys.exit(main())
