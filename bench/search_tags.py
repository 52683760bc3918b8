"""What a spec's tags say, read by BM25 (branches tags39, tagtable; issue #30): each variant's lists of the development
data.

    python bench/search_misses.py rank --label main --tree COPY_OF_MAIN   # the baseline: main's own tree
    python bench/search_tags.py sweep --weights 0.5 1 2 --lifted 1 3 [--amounts whole] [--baseline main]
    python bench/search_misses.py table --labels main NAME ...           # recall per API and part, chosen leaving
                                                                           # one API out, the largest loss of an API
    python bench/search_tags.py choose --labels main NAME ...            # chosen leaving one API out, both rankers
    python bench/search_tags.py deltas --labels main NAME ...            # each API's change against the first
    python bench/search_tags.py sizes                                     # what the sixteen specs' tags describe
    python bench/search_tags.py cost [--tree COPY_OF_MAIN] [--apis graph github]   # the index's build: CPU, memory
    python bench/search_tags.py latency --apis github jira asana --rounds 2   # a search, the table's reading off/on

A variant (branch tagtable) is `gateway.offer.tag_table`'s reading at one setting: each described tag's text
(an amount of its description: the whole, as the product reads it, or its first sentence or paragraph, which `_cut`
cuts before the index reads it) a row of the index's `tags` table, a matched tag's BM25 times `WEIGHT` added to the
`LIFTED` of its tools its request's own match scores best. `sweep` searches every variant of the grid in one process
(the weight and the cap are read at each search; the amount when the index is built, so each amount builds the
indexes again), only over the APIs whose specs describe a tag: the others' lists are the `--baseline`'s (their
indexes hold no `tags` table, so no setting moves them; `sweep --check` searches them too and says whether every
list is the baseline's). Each variant is saved as `ranked-NAME.json` (NAME: `a{amount}-w{weight}-l{lifted}`), as
`bench/search_misses.py rank` saves, so its `table` and `diff` read it. The data, the model's cosines and the lists
are `bench/search_misses.py`'s (`DEV`: `round12`..`round25`; `round26`, `round27`, `round28`, `round29`,
`round30`, `round31`, `round32`, `round33`, `round34`, `round35`, `round36` and `round37` are never read:
its assert).

tags39's reading (the text a column of every tool of the tag) is on branch tags39 (7f264db); its `rank` stage ran
there. `sizes` and `cost` run with this tree's gateway (`--tree`, for `cost`, naming main's copy for the baseline).
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parent.parent
Amount = Literal["sentence", "paragraph", "whole"]
_SENTENCE = 300
_PARAGRAPH = 600
"""The characters of the first paragraph read (Asana's Sections says "column" at its 140th)."""


def _cut(description: str, amount: str) -> str:
    """A tag's description as an amount reads it: its first sentence, its first paragraph, or the whole (the product
    then reads the whole of what it is given, up to its own limit: `gateway.offer.tag_text.read_description`)."""
    from gateway.offer.views import first_sentences

    if amount == "sentence":
        return first_sentences(description, _SENTENCE)
    if amount == "paragraph":
        return description.split("\n\n", 1)[0][:_PARAGRAPH]
    return description


def sweep(weights: list[float], lifted: list[int], rares: list[float], amounts: list[str], baseline: str,
          check: bool) -> None:
    """Every variant's lists (`DATA / ranked-NAME.json`), the APIs without a described tag the baseline's (with
    `check`, searched too, at the grid's first setting, and compared with the baseline's)."""
    import json

    import gateway
    from bench import search_misses
    from gateway.offer import tag_table

    kept = search_misses._load(baseline)
    described = [name for name in search_misses.APIS
                 if next(iter(search_misses._catalog(name).apis.values())).tag_descriptions]
    tag_table.WEIGHT, tag_table.LIFTED, tag_table.RARE = weights[0], lifted[0], rares[0]
    for name in search_misses.APIS if check else ():
        if name not in described:
            same = search_misses.Ranked(name).saved() == kept[name]
            print(f"{name} (no tag described): {'the' if same else 'NOT the'} baseline's lists", flush=True)
    for amount in amounts:
        # each index built at this amount
        searched = {name: search_misses.Ranked(name, lambda text, amount=amount: _cut(text, amount))
                    for name in described}
        for weight, cap, rare in itertools.product(weights, lifted, rares):
            tag_table.WEIGHT, tag_table.LIFTED, tag_table.RARE = weight, cap, rare
            label = f"a{amount[0]}-w{weight:g}-l{cap}" + (f"-r{rare:g}" if rare < 1 else "")
            apis = {}
            for name in search_misses.APIS:
                if name in searched:
                    searched[name].rows = searched[name].search()
                    apis[name] = searched[name].saved()
                else:
                    apis[name] = kept[name]
            (search_misses.DATA / f"ranked-{label}.json").write_text(json.dumps(
                {"gateway": gateway.__file__, "apis": apis,
                 "baseline": {"label": baseline, "apis": [name for name in apis if name not in searched]}}))
            alone, fused = (sum(search_misses._hits(rows, search_misses.DEV, way)[0] for rows in apis.values())
                            for way in (False, True))
            print(f"{label}: hits@5 on DEV alone {alone}, fused {fused}", flush=True)


def sizes() -> None:
    """Per API: its tags, how many carry a description, their characters, the tools of a described tag, and the
    words of a tag's row in the `tags` table at each amount (the median over the described tags its tools hold)."""
    from bench.search_misses import APIS, _catalog
    from gateway.offer.query import words
    from gateway.offer.tag_text import read_description

    amounts: tuple[Amount, ...] = ("sentence", "paragraph", "whole")
    print("| API | tools | described tags | characters | tools with one | words of a tag's row, sentence / paragraph "
          "/ whole (median) |")
    print("|---|---|---|---|---|---|")
    for name in APIS:
        catalog = _catalog(name)
        described = next(iter(catalog.apis.values())).tag_descriptions
        tools = [tool for tool in catalog if set(tool.tags) & set(described)]
        held = {tag for tool in tools for tag in tool.tags if tag in described}
        read = [statistics.median(len(words(read_description(_cut(described[tag], amount))).split()) for tag in held)
                if held else 0 for amount in amounts]
        print(f"| {name} | {len(catalog)} | {len(described)} | {sum(map(len, described.values())):,} | {len(tools)} | "
              + " / ".join(f"{n:g}" for n in read) + " |")


def cost(names: list[str], rounds: int) -> None:
    """Building each API's index `rounds` times with the gateway on the path (this tree's, or `--tree`'s): the median
    CPU seconds, the peak of Python's allocations while building (tracemalloc), and the index's bytes."""
    import time
    import tracemalloc

    from bench.search_misses import _catalog
    from gateway.offer.index_build import build_index

    for name in names:
        catalog = _catalog(name)
        spec = next(iter(catalog.apis.values()))
        tools = catalog.for_api(spec.name)
        tags = (spec.tag_descriptions,) if hasattr(spec, "tag_descriptions") else ()
        seconds = []
        for _ in range(rounds):
            started = time.process_time()
            data = build_index(tools, *tags)
            seconds.append(time.process_time() - started)
        tracemalloc.start()
        build_index(tools, *tags)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"{name}: {len(tools)} tools, build {statistics.median(seconds):.3f} s CPU (median of {rounds}), "
              f"peak {peak / 2**20:.1f} MiB, index {len(data):,} bytes", flush=True)


def latency(names: list[str], rounds: int) -> None:
    """The search's own cost of the tags' table: each API's `DEV` requests searched `rounds` times (`ToolIndex.search`,
    50 places, the index open, each phrase's scores kept after the first round as a running gateway keeps them), the
    reading off (`WEIGHT = 0`) and on in turns, request by request; the searching thread's CPU, p50 and p95 in ms."""
    from bench.search_misses import _catalog, _requests
    from gateway.offer import tag_table
    from gateway.offer.index import ToolIndex, build_index

    weight = tag_table.WEIGHT
    for name in names:
        catalog = _catalog(name)
        spec = next(iter(catalog.apis.values()))
        spec.search_index = build_index(catalog.for_api(spec.name), spec.tag_descriptions)
        searcher = ToolIndex(catalog)
        queries = [task["q"] for task in _requests(name)]
        spent: dict[bool, list[float]] = {False: [], True: []}
        for query in queries:  # the first round: every phrase scored once, both ways
            for on in (False, True):
                tag_table.WEIGHT = weight if on else 0.0
                searcher.search(query, limit=50, apis=[spec.name])
        for _ in range(rounds):
            for query in queries:
                for on in (False, True):
                    tag_table.WEIGHT = weight if on else 0.0
                    started = time.thread_time()
                    searcher.search(query, limit=50, apis=[spec.name])
                    spent[on].append((time.thread_time() - started) * 1000)
        tag_table.WEIGHT = weight

        def cell(times: list[float]) -> str:
            return f"{statistics.median(times):.2f} / {statistics.quantiles(times, n=20)[-1]:.2f}"

        print(f"{name}: {len(queries)} requests x {rounds}, ms p50 / p95: off {cell(spent[False])}, "
              f"on {cell(spent[True])} (load average {os.getloadavg()[0]:.1f})", flush=True)


def choose(labels: list[str]) -> None:
    """The choice leaving one API out, on both rankers at once: for each API, the list with the most hits@5 on the
    other APIs' `DEV`, BM25 alone and fused added (ties by hits@10, then the first list given), counted on the API
    left out; a reading that gains fused and loses alone must not win for the fused gain alone (the rule is read
    for both rankers). `search_misses.py table` makes the choice for each ranker apart."""
    import collections

    from bench.search_misses import DEV, _hits, _load

    loaded = {label: _load(label) for label in labels}
    names = list(loaded[labels[0]])

    def both(label: str, apis: list[str]) -> tuple[int, int]:
        counts = [_hits(loaded[label][name], DEV, fused) for name in apis for fused in (False, True)]
        return sum(a for a, _ in counts), sum(b for _, b in counts)

    chosen, alone, fused = [], 0, 0
    for name in names:
        others = [other for other in names if other != name]
        pick = max(labels, key=lambda label: both(label, others))
        chosen.append(pick)
        alone += _hits(loaded[pick][name], DEV, False)[0]
        fused += _hits(loaded[pick][name], DEV, True)[0]
    print(f"chosen on the other APIs, both rankers: alone {alone}, fused {fused}; "
          + "; ".join(f"{label} x{n}" for label, n in collections.Counter(chosen).items()))


def deltas(labels: list[str]) -> None:
    """Against the first saved list, each other's change of hits@5 on `DEV` per API, BM25 alone and fused, with the
    parts that moved (`bench/search_misses.py table` gives the figures themselves)."""
    from bench.search_misses import DEV, _hits, _load

    base = _load(labels[0])
    for label in labels[1:]:
        lists = _load(label)
        for fused in (False, True):
            cells, total = [], 0
            for name, rows in lists.items():
                change = _hits(rows, DEV, fused)[0] - _hits(base[name], DEV, fused)[0]
                moved = [f"{part[5:]} {after - before:+d}" for part in DEV
                         for before, after in [(_hits(base[name], (part,), fused)[0], _hits(rows, (part,), fused)[0])]
                         if after != before]
                total += change
                if moved:
                    cells.append(f"{name} {change:+d} ({', '.join(moved)})")
            print(f"{label}, {'fused' if fused else 'alone'}: {total:+d}; " + "; ".join(cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["sweep", "sizes", "cost", "latency", "choose", "deltas"])
    parser.add_argument("--labels", nargs="+", help="choose, deltas: the saved lists (deltas: the first the "
                                                    "baseline)")
    parser.add_argument("--weights", nargs="+", type=float, default=[1.0], help="sweep: `tag_table.WEIGHT`s")
    parser.add_argument("--lifted", nargs="+", type=int, default=[3], help="sweep: `tag_table.LIFTED`s")
    parser.add_argument("--rares", nargs="+", type=float, default=[1.0], help="sweep: `tag_table.RARE`s")
    parser.add_argument("--amounts", nargs="+", choices=["sentence", "paragraph", "whole"], default=["whole"],
                        help="sweep: how much of each tag's description is read (`_cut`)")
    parser.add_argument("--baseline", default="main", help="sweep: the saved lists the APIs without a described tag "
                                                           "keep")
    parser.add_argument("--check", action="store_true", help="sweep: search those APIs too, compare with the baseline")
    parser.add_argument("--apis", nargs="+", default=["graph", "github"], help="cost, latency: the APIs")
    parser.add_argument("--rounds", type=int, default=5, help="cost: the builds timed; latency: the searches")
    parser.add_argument("--tree", type=Path, help="cost: the tree whose gateway builds (default this one)")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.path.insert(0, str(ROOT))
    if args.tree:
        sys.path.insert(0, str(args.tree.resolve()))
    if args.stage == "sweep":
        sweep(args.weights, args.lifted, args.rares, args.amounts, args.baseline, args.check)
    elif args.stage == "cost":
        cost(args.apis, args.rounds)
    elif args.stage == "latency":
        latency(args.apis, args.rounds)
    elif args.stage == "choose":
        choose(args.labels)
    elif args.stage == "deltas":
        deltas(args.labels)
    else:
        sizes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
