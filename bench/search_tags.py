"""What a spec's tags say, read by BM25 (branch tags39; issue #30): each variant's lists of the development data.

    python bench/search_tags.py rank --label NAME --weight W --amount sentence|paragraph|whole [--baseline main]
    python bench/search_misses.py rank --label main --tree COPY_OF_MAIN   # the baseline: main's own tree
    python bench/search_misses.py table --labels main NAME ...           # recall per API and part, chosen leaving
                                                                           # one API out, the largest loss of an API
    python bench/search_tags.py deltas --labels main NAME ...            # each API's change against the first
    python bench/search_tags.py sizes                                     # what the sixteen specs' tags describe
    python bench/search_tags.py cost [--tree COPY_OF_MAIN] [--apis graph github]   # the index's build: CPU, memory

A variant is the `tagged` column of `gateway.offer.index_build` at weight W (0: every tool's row holds the text, so
BM25's length normalisation reads it, but no match of it scores) over `gateway.offer.tag_text.AMOUNT` of each of the
tool's tags' descriptions. Each runs in a process of its own: `gateway.offer.index` makes its SQL from the weights
when imported, so they are set before anything imports it. The data, the model's cosines and the lists are
`bench/search_misses.py`'s (`DEV`: `round12`..`round24`; `round25` and `round26` are never read: its assert).

The product change it measures is not on main (the lead did not keep it: BM25 alone, the search without the extras,
lost 23; bench/README.md, "What a spec's tags say"): `rank`, `sizes` and `cost` run in a tree of branch tags39 at
7f264db (`gateway.offer.tag_text`, `ApiSpec.tag_descriptions`), `--tree` naming main's copy for the baseline.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rank(label: str, weight: float, amount: str, baseline: str | None) -> None:
    """The variant's lists (`DATA / ranked-LABEL.json`). With `baseline`, only the APIs whose specs describe a tag are
    searched; the others' lists are the baseline's (their rows hold no text of the column, so neither its weight nor
    its amount moves them: checked for one variant against main, every row the same)."""
    import json

    from gateway.offer import index_build, tag_text

    assert "gateway.offer.index" not in sys.modules, "the weights must be set before the index module is imported"
    index_build._WEIGHTS["tagged"] = weight
    tag_text.AMOUNT = amount  # type: ignore[assignment]
    from bench import search_misses

    every = search_misses.APIS
    if baseline is not None:
        search_misses.APIS = tuple(name for name in every if search_misses._catalog(name).apis[
            next(iter(search_misses._catalog(name).apis))].tag_descriptions)
    search_misses.rank(label)
    if baseline is not None:
        saved = search_misses.DATA / f"ranked-{label}.json"
        ranked = json.loads(saved.read_text())
        kept = search_misses._load(baseline)
        ranked["apis"] = {name: ranked["apis"].get(name, kept[name]) for name in every}
        ranked["baseline"] = {"label": baseline, "apis": [name for name in every if name not in search_misses.APIS]}
        saved.write_text(json.dumps(ranked))


def sizes() -> None:
    """Per API: its tags, how many carry a description, their characters, and what the index reads of them (per tool
    with a described tag: the median words read at each amount)."""
    from bench.search_misses import APIS, _catalog
    from gateway.offer import tag_text
    from gateway.offer.query import words

    print("| API | tools | described tags | characters | tools with one | words read per tool, sentence / paragraph "
          "/ whole (median) |")
    print("|---|---|---|---|---|---|")
    for name in APIS:
        catalog = _catalog(name)
        spec = next(iter(catalog.apis.values()))
        described = spec.tag_descriptions
        tools = [tool for tool in catalog if set(tool.tags) & set(described)]
        read = []
        for amount in ("sentence", "paragraph", "whole"):
            tag_text.AMOUNT = amount  # type: ignore[assignment]
            read.append(statistics.median([len(words(tag_text.tag_text(tool.tags, described)).split())
                                           for tool in tools]) if tools else 0)
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
    parser.add_argument("stage", choices=["rank", "sizes", "cost", "deltas"])
    parser.add_argument("--label")
    parser.add_argument("--labels", nargs="+", help="deltas: the saved lists, the first the baseline")
    parser.add_argument("--weight", type=float, default=1.0)
    parser.add_argument("--amount", choices=["sentence", "paragraph", "whole"], default="paragraph")
    parser.add_argument("--baseline", help="rank: the saved list whose rows the APIs without tag descriptions keep")
    parser.add_argument("--apis", nargs="+", default=["graph", "github"], help="cost: the APIs built")
    parser.add_argument("--rounds", type=int, default=5, help="cost: the builds timed")
    parser.add_argument("--tree", type=Path, help="cost: the tree whose gateway builds (default this one)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.tree:
        sys.path.insert(0, str(args.tree.resolve()))
    if args.stage == "rank":
        rank(args.label, args.weight, args.amount, args.baseline)
    elif args.stage == "cost":
        cost(args.apis, args.rounds)
    elif args.stage == "deltas":
        deltas(args.labels)
    else:
        sizes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
