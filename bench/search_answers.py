"""What an operation answers, read by the search (branch respfields; issue #30): each variant's lists of the
development data.

    python bench/search_answers.py rank --label NAME [--weight W] [--depth D]
    python bench/search_misses.py rank --label main --tree COPY_OF_MAIN   # the baseline: main's own tree
    python bench/search_misses.py table --labels main NAME ...           # recall per API and part, chosen leaving
                                                                           # one API out, the largest loss of an API
    python bench/search_tags.py deltas --labels main NAME ...            # each API's change against the first
    python bench/search_answers.py sizes                                  # the words read per tool at each depth
    python bench/search_answers.py cost [--tree COPY_OF_MAIN] [--apis graph github]   # the index's build

A variant is `gateway.offer.answer_text`'s reading (`WEIGHT`, `DEPTH`; one not given keeps the module's own, the kept
reading). Each runs in a process of its own: `gateway.offer.statements` reads the weight when imported (it is one of
the SQL's), so it is set before anything imports the index. The switches of the readings not kept (`READ_AS`: a
column of the tool's row, or nowhere; `DESCRIBED`: each property's description read too; `READS_ONLY` off: a write's
answer read; `MATCHED_FOR`: every request, or only those that ask for a read) were measured here and are gone from
gateway/ (branch tidy43): their figures are in bench/README.md ("What an operation answers, read by the search"),
their code at commit 7b441a7. The data, the model's cosines and the lists are `bench/search_misses.py`'s (`DEV`:
`round12`..`round27`; `round28`, `round29`, `round30`, `round31`, `round32`,
`round33`, `round34`, `round35`, `round36` and `round37` are never read: its assert).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _reading(args: argparse.Namespace) -> None:
    """`gateway.offer.answer_text`'s switches as given on the command line; those not given keep the module's own."""
    from gateway.offer import answer_text

    assert "gateway.offer.index_build" not in sys.modules, "the reading must be set before the index is imported"
    for option, switch in (("weight", "WEIGHT"), ("depth", "DEPTH")):
        if getattr(args, option) is not None:
            setattr(answer_text, switch, getattr(args, option))


def rank(label: str) -> None:
    """The variant's lists (`DATA / ranked-LABEL.json`): every API's (each has operations that answer JSON)."""
    from bench import search_misses

    search_misses.rank(label)


def sizes() -> None:
    """Per API: its tools, those with a JSON response schema, and the words read per tool (median / largest) at each
    depth (the names with their descriptions: commit 7b441a7's)."""
    from bench.search_misses import APIS, _catalog
    from gateway.offer import answer_text
    from gateway.offer.query import words

    readings = (1, 2, 3)
    print("| API | tools | answering JSON | " + " | ".join(f"depth {depth}" for depth in readings) + " |")
    print("|---|---|---|" + "---|" * len(readings))
    for name in APIS:
        tools = list(_catalog(name))
        cells = []
        for depth in readings:
            answer_text.DEPTH = depth
            read = [len(words(answer_text.answer_text(tool)).split()) for tool in tools]
            cells.append(f"{statistics.median(read):g} / {max(read):,}")
        print(f"| {name} | {len(tools):,} | {sum(1 for tool in tools if tool.output_schema):,} | "
              + " | ".join(cells) + " |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["rank", "sizes", "cost"])
    parser.add_argument("--label")
    # each switch of gateway.offer.answer_text; one not given keeps the module's value
    parser.add_argument("--weight", type=float)
    parser.add_argument("--depth", type=int)
    args, rest = parser.parse_known_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.stage == "cost":  # bench/search_tags.py's builds, timed alike (--apis, --rounds, --tree)
        from bench import search_tags

        if "--tree" not in rest:  # another tree builds as that tree does
            _reading(args)
        return search_tags.main(["cost", *rest])
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.stage == "rank":
        _reading(args)
        rank(args.label)
    else:
        sizes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
