"""What an operation answers, read by the search (branch respfields; issue #30): each variant's lists of the
development data.

    python bench/search_answers.py rank --label NAME [--read-as table|column] [--weight W] [--depth D] [--described]
                                        [--reads-only] [--matched-for all|reads|"asked reads"]
    python bench/search_misses.py rank --label main --tree COPY_OF_MAIN   # the baseline: main's own tree
    python bench/search_misses.py table --labels main NAME ...           # recall per API and part, chosen leaving
                                                                           # one API out, the largest loss of an API
    python bench/search_tags.py deltas --labels main NAME ...            # each API's change against the first
    python bench/search_answers.py sizes                                  # the words read per tool at each depth
    python bench/search_answers.py cost [--tree COPY_OF_MAIN] [--apis graph github]   # the index's build

A variant is `gateway.offer.answer_text`'s reading (`READ_AS`, `WEIGHT`, `DEPTH`, `DESCRIBED`, `READS_ONLY`,
`MATCHED_FOR`; a switch not given keeps the module's own, the kept reading). Each runs in a process of its own:
`gateway.offer.index_build` and `gateway.offer.index` read the reading when imported (the column's weight is one of
the SQL's), so it is set before anything imports them. The data, the model's cosines and the lists
are `bench/search_misses.py`'s (`DEV`: `round12`..`round25`; `round26`, `round27`, `round28` and `round29` are never
read: its assert).
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
    for option, switch in (("read_as", "READ_AS"), ("weight", "WEIGHT"), ("depth", "DEPTH"), ("described", "DESCRIBED"),
                           ("reads_only", "READS_ONLY"), ("matched_for", "MATCHED_FOR")):
        if getattr(args, option) is not None:
            setattr(answer_text, switch, getattr(args, option))


def rank(label: str) -> None:
    """The variant's lists (`DATA / ranked-LABEL.json`): every API's (each has operations that answer JSON)."""
    from bench import search_misses

    search_misses.rank(label)


def sizes() -> None:
    """Per API: its tools, those with a JSON response schema, and the words read per tool (median / largest) at each
    depth, names alone and with their descriptions."""
    from bench.search_misses import APIS, _catalog
    from gateway.offer import answer_text
    from gateway.offer.query import words

    readings = [(1, False), (2, False), (3, False), (1, True), (2, True)]
    print("| API | tools | answering JSON | " + " | ".join(f"depth {depth}{', described' if described else ''}"
                                                        for depth, described in readings) + " |")
    print("|---|---|---|" + "---|" * len(readings))
    for name in APIS:
        tools = list(_catalog(name))
        cells = []
        for depth, described in readings:
            answer_text.DEPTH, answer_text.DESCRIBED = depth, described
            read = [len(words(answer_text.answer_text(tool)).split()) for tool in tools]
            cells.append(f"{statistics.median(read):g} / {max(read):,}")
        print(f"| {name} | {len(tools):,} | {sum(1 for tool in tools if tool.output_schema):,} | "
              + " | ".join(cells) + " |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["rank", "sizes", "cost"])
    parser.add_argument("--label")
    # each switch of gateway.offer.answer_text; one not given keeps the module's value
    parser.add_argument("--read-as", choices=["table", "column", "none"])
    parser.add_argument("--weight", type=float)
    parser.add_argument("--depth", type=int)
    parser.add_argument("--described", action=argparse.BooleanOptionalAction,
                        help="each property's description read with its name")
    parser.add_argument("--reads-only", action=argparse.BooleanOptionalAction,
                        help="only the answers of GET operations read")
    parser.add_argument("--matched-for", choices=["all", "reads", "asked reads"],
                        help="the requests matched against the answers")
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
