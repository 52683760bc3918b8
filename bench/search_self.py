"""A request that speaks of the asker reaching the operations that answer for the current user (branch rank49, issue
#30): one idea read from the spec and the language only (never a request set), measured on all of `DEV`.

    GATEWAY_BENCH_ONE_DELTA=delta27 python bench/search_self.py variants [--apis graph github]   # lists, as `rank`
    python bench/search_agreement.py judge --base main self-0.25 self-0.5 self-1 named-0.5 named-1   # the rule
    GATEWAY_BENCH_ONE_DELTA=delta27 python bench/search_self.py second   # `round32` (spent), apart
    OMP_NUM_THREADS=1 python bench/search_self.py cost                # its CPU per search

The idea: where a request speaks of the asker ("me", "my", "mine", "myself", "I": `ASKER`), BM25's first 50 places
of an operation whose path or name says the current user (`own_operations`: a path segment `me` or `myself`, or the
path's or name's words running "current user", "authenticated user", "signed in user", "logged in user") are scored
times `1 + W` and the list sorted again; both rankers read it (`self-W`; `named-W`: the path's or name's words
only, no `me` segment). A request that does not speak of the asker is ranked
as main ranks it, so only those that do are searched again; the others' rows are main's (`ranked-main.json`,
rank48's, of a tree that ranks as this one: checked on the requests searched, `W` 0 against main's rows).
`round32` (spent: judged this session) is read only by `second`, apart; `round33`, `round34`, `round35`,
`round36` and `round37` never (`search_misses`' assert).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.search_misses import APIS, DATA, Ranked, _first, _folded, _weight  # noqa: E402

ASKER = re.compile(r"\b(?:me|my|mine|myself)\b|\bI\b|\bi(?:'m|'ve|'d|'ll)\b", re.IGNORECASE)
"""The asker's words; "I" alone only as a capital (a lowercase "i" is as often a list's item)."""
_OWN_RUN = re.compile(r"(?:current|authenticated|signedin|loggedin)user")
VARIANTS = {"main": (0.0, False), "self-0.25": (0.25, False), "self-0.5": (0.5, False), "self-1": (1.0, False),
            "named-0.5": (0.5, True), "named-1": (1.0, True)}
"""Each variant's weight `W` and whether a path segment `me`/`myself` is left out of what says the current user
(`named-W`, added after `self-W`'s figures: Graph's `/me/...` copies, 2,060 operations, are folded with the
`/users/{id}/...` ones they copy, so lifting them lifts most of Graph wherever a request says "my")."""


def speaks_of_asker(query: str) -> bool:
    return any(match.group(0) != "i" for match in ASKER.finditer(query))


def says_current_user(path: str, name: str, named: bool = False) -> bool:
    """Whether an operation's path or name says it answers for the current user (`named`: its words only, not a
    path segment `me` or `myself`)."""
    segments = [segment.lower() for segment in re.split(r"[/(]", path) if segment]
    if not named and ("me" in segments or "myself" in segments):
        return True
    letters = re.sub(r"[^a-z]", "", f"{path} {name}".lower())
    return bool(_OWN_RUN.search(letters))


def own_operations(tools: Sequence[Any], named: bool = False) -> set[str]:
    return {tool.name for tool in tools if says_current_user(tool.path, tool.operation_id or tool.name, named)}


def prior(ranked: list[tuple[Any, float]], own: set[str], weight: float) -> list[tuple[Any, float]]:
    if not weight:
        return ranked
    lifted = [(tool, score * (1 + weight) if tool.name in own else score) for tool, score in ranked]
    return sorted(lifted, key=lambda pair: -pair[1])


class Asker(Ranked):
    """An API's requests (of `DEV`, or `parts`) that speak of the asker searched again, once, under every variant of
    `VARIANTS`: `lists[LABEL][at]`, the right tool's place alone and fused."""

    def search(self) -> list[tuple[list[int], list[int], list[int], set[int]]]:
        from gateway.offer.fusion import HELD_PLACES, fuse, trusted
        from gateway.offer.index import ToolIndex
        from gateway.offer.signals import WEIGHTS as SIGNALS

        searcher = ToolIndex(self.catalog)
        weight = _weight()
        owns = {named: own_operations(self.tools, named) for named in (False, True)}
        self.own = owns[False]
        self.lists: dict[str, dict[int, tuple[int | None, int | None]]] = {label: {} for label in VARIANTS}
        for at, (task, (_, similar, wanted)) in enumerate(zip(self.requests, self.model, strict=True)):
            if not speaks_of_asker(task["q"]):
                continue
            found = [(hit.tool, hit.score) for hit in searcher.search(task["q"], limit=50, apis=[self.api])]
            for label, (w, named) in VARIANTS.items():
                ranked = prior(found, owns[named], w)
                alone = _folded(ranked, wanted, self.place, self.known)
                held = searcher.held(task["q"], [tool for tool, _ in ranked[:HELD_PLACES]]) if SIGNALS.held else 1.0
                fused = _folded(fuse(ranked, similar, trusted(weight, held, SIGNALS.held)), wanted, self.place,
                                self.known)
                self.lists[label][at] = (_first(alone, wanted), _first(fused, wanted))
        return []


def variants(names: list[str]) -> None:
    """`ranked-LABEL.json` for each variant: main's rows, those of the requests that speak of the asker ranked anew."""
    import gateway

    main = json.loads((DATA / "ranked-main.json").read_text())["apis"]
    labels = [label for label in VARIANTS if label != "main"]
    saved: dict[str, dict[str, list[dict[str, Any]]]] = {label: {} for label in labels}
    for name in names:
        asker = Asker(name)
        rows = main[name]
        assert [row["q"] for row in rows] == [task["q"] for task in asker.requests], f"{name}: main's rows differ"
        differ = sum(1 for at, (alone, fused) in asker.lists["main"].items()
                     if (rows[at]["alone"], rows[at]["fused"]) != (alone, fused))
        assert not differ, f"{name}: {differ} requests ranked otherwise than main's rows with no prior"
        for label in labels:
            saved[label][name] = [{**row, **dict(zip(("alone", "fused"), asker.lists[label][at], strict=True))}
                                  if at in asker.lists[label] else row for at, row in enumerate(rows)]
            (DATA / f"ranked-{label}.json").write_text(json.dumps({"gateway": gateway.__file__,
                                                                    "apis": saved[label]}))
        print(f"{name}: {len(asker.lists['main'])} of {len(rows)} speak of the asker, {len(asker.own)} own operations "
              f"({time.strftime('%H:%M:%S')})", flush=True)


SECOND = "round32"
"""The second look, reported apart: spent (the lead's judge this session), never a rule's source."""
SECOND_DATA = Path(tempfile.gettempdir()) / "gateway-bench-rank49"


def second(names: list[str]) -> None:
    """`SECOND`'s requests under each variant: its cosines computed once with the delta in place (`SECOND_DATA`, each
    request embedded alone, as `search_misses.prepare` does), then, per API, the requests that speak of the asker,
    and each variant's hits@5 alone and fused among them against main's (the others' lists are main's)."""
    import numpy

    from bench import search_misses
    from bench.search_text import save_cosines
    from gateway.config.embeddings_endpoint import SearchEmbeddings
    from gateway.offer import embeddings

    settings = SearchEmbeddings.model_validate({"kind": "local", "timeout": 3600})
    parts = (SECOND,)
    save_cosines(SECOND_DATA / SECOND, names, search_misses._catalog,
                 lambda name: [task["q"] for task in search_misses._requests(name, parts)],
                 embed=lambda texts: [embeddings.embed(settings, [text])[0] for text in texts])
    # bench only: `Ranked` reads `DEV`'s cosines by name; the second look's are these
    vars(search_misses)["_cosines"] = lambda name, among: list(numpy.load(SECOND_DATA / SECOND / f"{name}.npy"))
    totals = {label: [0, 0] for label in VARIANTS}
    for name in names:
        asker = Asker(name, parts=parts)
        cells = []
        for label in VARIANTS:
            hits = [sum(1 for pair in asker.lists[label].values() if (pair[k] or 99) <= 5) for k in (0, 1)]
            totals[label] = [totals[label][0] + hits[0], totals[label][1] + hits[1]]
            cells.append(f"{label} {hits[0]}/{hits[1]}")
        print(f"{name}: {len(asker.lists['main'])} speak of the asker; alone/fused hits@5: {', '.join(cells)}",
              flush=True)
    print("all: " + ", ".join(f"{label} {a}/{f} ({a - totals['main'][0]:+d}/{f - totals['main'][1]:+d})"
                              for label, (a, f) in totals.items()))


def cost(names: list[str]) -> None:
    """CPU per search (median of each API's `DEV` requests that speak of the asker, `time.process_time`): main's
    `ToolIndex.search` (50 places), and what the idea adds to it (reading the request for the asker, the prior over
    the 50 and the sort); then the once-per-catalog reading of which operations say the current user."""
    import statistics

    from bench import search_misses
    from gateway.offer.index import ToolIndex

    for name in names:
        catalog = search_misses._catalog(name)
        api = next(iter(catalog.apis))
        tools = catalog.for_api(api)
        started = time.process_time()
        own = own_operations(tools, named=True)
        once = time.process_time() - started
        searcher = ToolIndex(catalog)
        asked = [task["q"] for task in search_misses._requests(name) if speaks_of_asker(task["q"])]
        searcher.search(asked[0], limit=50, apis=[api])  # the index opened before the clock
        searched, added = [], []
        for query in asked:
            started = time.process_time()
            found = [(hit.tool, hit.score) for hit in searcher.search(query, limit=50, apis=[api])]
            searched.append(time.process_time() - started)
            started = time.process_time()
            if speaks_of_asker(query):
                prior(found, own, 1.0)
            added.append(time.process_time() - started)
        search, extra = statistics.median(searched), statistics.median(added)
        print(f"{name}: {len(tools)} tools, {len(own)} own; once {once * 1e3:.1f} ms; {len(asked)} requests: search "
              f"{search * 1e3:.2f} ms, the idea adds {extra * 1e6:.0f} us ({extra / search:.2%})", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    ranked = sub.add_parser("variants")
    ranked.add_argument("--apis", nargs="+", choices=APIS, default=list(APIS))
    looked = sub.add_parser("second")
    looked.add_argument("--apis", nargs="+", choices=APIS, default=list(APIS))
    clocked = sub.add_parser("cost")
    clocked.add_argument("--apis", nargs="+", choices=APIS, default=["graph", "github"])
    args = parser.parse_args(argv)
    if args.command == "cost":
        cost(args.apis)
    elif args.command == "variants":
        variants(args.apis)
    elif args.command == "second":
        second(args.apis)
    return 0


if __name__ == "__main__":
    sys.exit(main())
