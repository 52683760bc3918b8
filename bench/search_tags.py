"""What a spec's tags say, read by BM25 (branch tags39; issue #30): each variant's lists of the development data.

    python bench/search_tags.py rank --label NAME --weight W --amount sentence|paragraph|whole
    python bench/search_misses.py rank --label main --tree COPY_OF_MAIN   # the baseline: main's own tree
    python bench/search_misses.py table --labels main NAME ...           # recall per API and part, chosen leaving
                                                                           # one API out, the largest loss of an API
    python bench/search_tags.py sizes                                     # what the sixteen specs' tags describe

A variant is the `tagged` column of `gateway.offer.index_build` at weight W (0: every tool's row holds the text, so
BM25's length normalisation reads it, but no match of it scores) over `gateway.offer.tag_text.AMOUNT` of each of the
tool's tags' descriptions. Each runs in a process of its own: `gateway.offer.index` makes its SQL from the weights
when imported, so they are set before anything imports it. The data, the model's cosines and the lists are
`bench/search_misses.py`'s (`DEV`: `round12`..`round24`; `round25` and `round26` are never read: its assert).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rank(label: str, weight: float, amount: str) -> None:
    from gateway.offer import index_build, tag_text

    assert "gateway.offer.index" not in sys.modules, "the weights must be set before the index module is imported"
    index_build._WEIGHTS["tagged"] = weight
    tag_text.AMOUNT = amount  # type: ignore[assignment]
    from bench import search_misses

    search_misses.rank(label)


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["rank", "sizes"])
    parser.add_argument("--label")
    parser.add_argument("--weight", type=float, default=1.0)
    parser.add_argument("--amount", choices=["sentence", "paragraph", "whole"], default="paragraph")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.stage == "rank":
        rank(args.label, args.weight, args.amount)
    else:
        sizes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
