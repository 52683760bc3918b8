"""The APIs that stay under 0.9 (branch rank47, issue #30): Stripe's, NetBox's and HERE's fused misses on the last
three judged parts by what they have in common, and the ideas that census points to, measured on all of `DEV`.

    python bench/search_stay.py census [--apis ...] [--parts round29 round30 round31]   # default: all sixteen
    python bench/search_stay.py variants --ideas ... [--apis ...]   # each idea's lists, saved as `rank` saves them
    python bench/search_agreement.py judge --base main LABEL ...      # the keep rule on DEV (round12..round31)
    OMP_NUM_THREADS=1 python bench/search_stay.py cost [--apis here netbox graph]   # each idea's CPU per search

`census` prints each fused miss@5 of the parts as main ranks it (`search_misses.Ranked`: the product's fusion, with
rank46's trust in BM25): the right tool's place fused, in BM25's list and in the model's; the share of the request
BM25's first three hold (`ToolIndex.held`); the fusion's first three (method, path) and the request's match terms
each holds; and, for every match term, which texts of the right tool hold it (stemmed as bench/search_rankers.py
stems: summary, description, path, parameters, what it answers, tags: `search_short.texts`). Then counts.

`variants` ranks every `DEV` request under each idea (`IDEAS`), each read from the spec and the language for every
api, none from a request set: (1) `checks-described-S`, a service check's service named by its tag's description
too (`DescribedChecks`); (2) `bulk-L`, the bulk forms lifted where a request asks for many items at once (`Bulk`);
(3) `check-held`, a check asked and held by BM25's first three counts as the whole request held (`CheckHeld`);
`checks-described-0.25-held` is (1) and (3), `all-three` the three. None was kept: they stay here only.

`round32` (the lead's judge this session), `round33`, `round34`, `round35`, `round36` and `round37` are never
read: `search_misses`'s assert.
What was measured: bench/README.md, "The APIs that stay under 0.9".
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.search_misses import APIS, DEV, Ranked, _first  # noqa: E402
from bench.search_short import TEXTS, texts  # noqa: E402
from bench.support import clocked  # noqa: E402

CENSUS = ("round29", "round30", "round31")


def census(names: list[str], parts: tuple[str, ...]) -> None:
    from bench.search_rankers import _stem
    from gateway.offer.fusion import HELD_PLACES
    from gateway.offer.index import ToolIndex
    from gateway.offer.query import read

    counts: collections.Counter[str] = collections.Counter()
    for name in names:
        ranked = Ranked(name, parts=parts)
        searcher = ToolIndex(ranked.catalog)
        for task, (alone, model, fused, wanted) in zip(ranked.requests, ranked.rows, strict=True):
            if task["part"] not in parts:
                continue
            counts[f"{name}: requests"] += 1
            at = _first(fused, wanted)
            if at is not None and at <= 5:
                continue
            terms = read(task["q"]).terms
            stems = [{_stem(w) for a in alternatives for w in a.replace('"', " ").split()} for alternatives in terms]
            right = [ranked.tools[t] for t in sorted(wanted)]
            held = [texts(tool) for tool in right]
            shown = []
            reached = False
            for alternatives, stem in zip(terms, stems, strict=True):
                found = sorted({key for h in held for key, s in h.items() if stem & s}, key=TEXTS.index)
                reached = reached or bool(found)
                shown.append(f"{alternatives[0]}:{','.join(found) or '-'}")
            firsts = []
            for t in fused[:3]:
                own = texts(ranked.tools[t])
                shared = [alternatives[0] for alternatives, stem in zip(terms, stems, strict=True)
                          if any(stem & s for s in own.values())]
                firsts.append(f"{ranked.tools[t].method} {ranked.tools[t].path} [{' '.join(shared)}]")
            # the share as the product reads it: of BM25's first three before folding (as `Ranked.search`)
            hits = searcher.search(task["q"], limit=HELD_PLACES, apis=[ranked.api])
            share = searcher.held(task["q"], [hit.tool for hit in hits])
            counts[f"{name}: fused misses"] += 1
            counts[f"{name}: fused misses at 6-10"] += at is not None and at <= 10
            counts[f"{name}: fused misses whose right tool holds no word of the request"] += not reached
            counts[f"{name}: fused misses BM25 alone has in its first 5"] += (_first(alone, wanted) or 99) <= 5
            counts[f"{name}: fused misses the model has in its first 5"] += (_first(model, wanted) or 99) <= 5
            print(f"{name} {task['part']} fused {at} alone {_first(alone, wanted)} model {_first(model, wanted)} "
                  f"held {share:.2f} {task['q']!r}\n"
                  f"    want {' | '.join(f'{t.method} {t.path} ({t.summary[:60]!r})' for t in right)}\n"
                  f"    words: {' '.join(shown)}\n    above: {' | '.join(firsts)}", flush=True)
    for key, count in sorted(counts.items()):
        print(f"{count:5d}  {key}")


# -- the ideas -----------------------------------------------------------------------------------------------------


class DescribedChecks:
    """(1) `service_checks.ServiceChecks` whose services are named by their tags' descriptions too: the first
    sentence of each tag's description ("The Cloud to Cloud service is used to create and manage connections between
    external cloud providers and HERE Tracking"), its stems less the language's stop words and less those of more
    than a quarter of the api's tags' first sentences; each such word held by the request counts `share` of one of
    the service's own (its path's and tag's words, which count 1 as in main)."""

    def __init__(self, tools: Sequence[Any], described: dict[str, str], share: float) -> None:
        from gateway.offer.query import STOP, stems
        from gateway.offer.service_checks import ServiceChecks
        from gateway.offer.views import first_sentences

        self.main = ServiceChecks(tools)
        self.share = share
        firsts = {tag: stems(first_sentences(text, 300)) for tag, text in described.items()}
        counted = collections.Counter(stem for found in firsts.values() for stem in found)
        common = {stem for stem, count in counted.items() if count > max(1, len(firsts) / 4)} | stems(" ".join(STOP))
        self.described = {at: frozenset(set().union(*(firsts.get(tag, set()) for tag in tools[at].tags)) - common
                                        - named) for at, _, named, _ in self.main.checks}

    def asked(self, query: str) -> int | None:
        """`ServiceChecks.asked`, the service's described words counted at `share` each."""
        from gateway.offer.query import stems
        from gateway.offer.service_checks import _WORD, ASKS

        said = _WORD.findall(query.lower())
        kinds = {ASKS[word] for word in said if word in ASKS}
        if not self.main.checks or not kinds:
            return None
        held = stems(query)
        best: list[tuple[float, int, frozenset[str]]] = []
        for at, answers, service, version in self.main.checks:
            named = len(service & held) + self.share * len(self.described[at] & held)
            if answers in kinds and named > 0:
                best.append((named + (0.5 if version and version in said else 0.0), at, service | self.described[at]))
        if not best:
            return None
        best.sort(key=lambda found: -found[0])
        if len(best) > 1 and best[1][0] == best[0][0] and best[1][2] != best[0][2]:
            return None
        return best[0][1]


@contextlib.contextmanager
def described_checks(name: str, share: float) -> Iterator[type[Ranked]]:
    """The index's service checks read as `DescribedChecks` while `name`'s index is opened and searched."""
    from bench.search_misses import _catalog
    from gateway.offer import index
    from gateway.offer.service_checks import ServiceChecks

    catalog = _catalog(name)
    described = getattr(catalog.apis[next(iter(catalog.apis))], "tag_descriptions", {}) or {}
    # the name the index builds an api's checks with, while this api is ranked (bench only: nothing of it ships)
    vars(index)["ServiceChecks"] = lambda tools: DescribedChecks(tools, described, share)
    try:
        yield Ranked
    finally:
        vars(index)["ServiceChecks"] = ServiceChecks


MANY = re.compile(r"\b(?:at once|in one go|in (?:one|a single) (?:bulk )?(?:request|call|batch|pass)|together"
                  r"|in bulk|bulk|all of them|in a batch|batch)\b", re.IGNORECASE)
"""(2) A request that asks for many items changed at once ("update all of them at once", "in one go", "in one bulk
request", "together"): the language's words, for every api."""


class Reranked(Ranked):
    """`search_misses.Ranked` with BM25's list changed before both rankers read it (`bm25`) and the share of the
    request its first three hold read otherwise (`held`); main's where a subclass changes neither."""

    def search(self) -> list[tuple[list[int], list[int], list[int], set[int]]]:
        from bench.search_misses import _folded, _weight
        from gateway.offer.fusion import HELD_PLACES, fuse, trusted
        from gateway.offer.index import ToolIndex
        from gateway.offer.signals import WEIGHTS

        self.searcher = ToolIndex(self.catalog)
        weight = _weight()
        rows = []
        for task, (model, similar, wanted) in zip(self.requests, self.model, strict=True):
            ranked = self.bm25(task["q"], [(hit.tool, hit.score) for hit in
                                           self.searcher.search(task["q"], limit=50, apis=[self.api])])
            alone = _folded(ranked, wanted, self.place, self.known)
            held = self.held(task["q"], [tool for tool, _ in ranked[:HELD_PLACES]])
            fused = _folded(fuse(ranked, similar, trusted(weight, held, WEIGHTS.held)), wanted, self.place,
                            self.known)
            rows.append((alone, model, fused, wanted))
        return rows

    def bm25(self, query: str, ranked: list[tuple[Any, float]]) -> list[tuple[Any, float]]:
        return ranked

    def held(self, query: str, first: list[Any]) -> float:
        return self.searcher.held(query, first)


class Bulk(Reranked):
    """(2) A bulk form (a PUT, PATCH or DELETE at a path the api also lists with a GET, no parameter after its last
    segment: NetBox's `PUT /dcim/modules/`, Kubernetes' `deletecollection`) scored `lift` times its BM25 where the
    request asks for many items at once (`MANY`) and for no read; BM25's list re-sorted, both rankers read it."""

    lift = 1.0

    def bm25(self, query: str, ranked: list[tuple[Any, float]]) -> list[tuple[Any, float]]:
        from gateway.offer.query import read

        if not MANY.search(query) or "GET" in read(query).methods:
            return ranked
        if not hasattr(self, "bulk"):
            listed = {tool.path for tool in self.tools if tool.method == "GET"}
            self.bulk = {tool.name for tool in self.tools if tool.method in ("PUT", "PATCH", "DELETE")
                         and tool.path in listed and not tool.path.rstrip("/").endswith("}")}
        lifted = [(tool, score * (self.lift if tool.name in self.bulk else 1.0)) for tool, score in ranked]
        return sorted(lifted, key=lambda pair: -pair[1])


class CheckHeld(Reranked):
    """(3) Where the request asks for a service's check (`ServiceChecks.asked`) and BM25's first three hold it, the
    share held is 1: the check stands first by the rule, not by the request's words, which it holds few of ("the
    sensors v3 release, so our rule-builder UI knows ...": the check, two words of eleven, lost to the model)."""

    def held(self, query: str, first: list[Any]) -> float:
        from gateway.offer import index

        if not hasattr(self, "checks"):  # the checks the index reads (main's, or (1)'s while it is measured)
            self.checks = vars(index)["ServiceChecks"](self.tools)
        check = self.checks.asked(query)
        if check is not None and self.tools[check] in first:
            return 1.0
        return super().held(query, first)


def _ranked(kind: type[Ranked], **fields: Any) -> Callable[[str], contextlib.AbstractContextManager[type[Ranked]]]:
    return lambda name: contextlib.nullcontext(type(kind.__name__, (kind,), fields))


def _checks(share: float) -> Callable[[str], contextlib.AbstractContextManager[type[Ranked]]]:
    return lambda name: described_checks(name, share)


def _described_held(share: float, lift: float | None = None) -> Callable[
        [str], contextlib.AbstractContextManager[type[Ranked]]]:
    """(1) and (3) together; and (2) with them at `lift`."""

    class All(Bulk, CheckHeld):
        pass

    @contextlib.contextmanager
    def together(name: str) -> Iterator[type[Ranked]]:
        with described_checks(name, share):
            yield CheckHeld if lift is None else type("All", (All,), {"lift": lift})

    return together


IDEAS = {"checks-described-0.25": _checks(0.25), "checks-described-0.5": _checks(0.5),
         "bulk-1.3": _ranked(Bulk, lift=1.3), "bulk-1.6": _ranked(Bulk, lift=1.6), "bulk-2": _ranked(Bulk, lift=2.0),
         "check-held": _ranked(CheckHeld), "checks-described-0.25-held": _described_held(0.25),
         "all-three": _described_held(0.25, 1.3)}


def variants(ideas: list[str], names: list[str]) -> None:
    """Every `DEV` request of every api ranked under each idea, saved as `search_misses.py rank` saves its lists
    (`ranked-IDEA.json`), so that `search_agreement.py judge --base main IDEA ...` holds it to the keep rule. An api
    not in `names` keeps main's rows (`ranked-main.json`): for (1) and (3), the apis without a service check, where
    neither can change a list (`ServiceChecks.asked` answers None there)."""
    import json

    import gateway
    from bench.search_misses import DATA, _load

    main = _load("main")
    saved: dict[str, dict[str, list[dict[str, Any]]]] = {idea: {} for idea in ideas}
    for name in APIS:
        for idea in ideas:
            if name not in names:
                saved[idea][name] = main[name]
                continue
            with IDEAS[idea](name) as ranking:
                saved[idea][name] = ranking(name).saved()
            (DATA / f"ranked-{idea}.json").write_text(json.dumps({"gateway": gateway.__file__, "apis": saved[idea]}))
        print(f"{name}: {len(saved[ideas[0]][name])} requests", flush=True)


def _lifted(query: str, bulk: set[str], first: list[Any]) -> object:
    from gateway.offer.query import read

    if MANY.search(query) and "GET" not in read(query).methods:
        return sorted(((tool, 1.3 if tool.name in bulk else 1.0) for tool in first), key=lambda pair: -pair[1])
    return None


def _check_held(query: str, checks: Any, tools: list[Any], first: list[Any]) -> bool:
    check = checks.asked(query)
    return check is not None and tools[check] in first[:3]


def cost(names: list[str]) -> None:
    """What each idea adds to a search, the searching thread's CPU (p50 / p95 µs) over every `DEV` request of each
    api, each step as the product would run it: (1) the described check asked (`DescribedChecks.asked`) beside main's
    (`ServiceChecks.asked`), each built once per api; (2) the request read for many items at once (`MANY`, the
    request's methods as the search has read them) and BM25's 50 lifted where it asks; (3) the check asked again by
    the fusion, and held by the first three."""
    import statistics

    from bench.search_misses import _catalog, _requests
    from gateway.offer.query import read
    from gateway.offer.service_checks import ServiceChecks

    for name in names:
        catalog = _catalog(name)
        api = next(iter(catalog.apis))
        tools = catalog.for_api(api)
        described = getattr(catalog.apis[api], "tag_descriptions", {}) or {}
        main, checks = ServiceChecks(tools), DescribedChecks(tools, described, 0.25)
        listed = {tool.path for tool in tools if tool.method == "GET"}
        bulk = {tool.name for tool in tools if tool.method in ("PUT", "PATCH", "DELETE") and tool.path in listed
                and not tool.path.rstrip("/").endswith("}")}
        first = tools[:50]
        times: dict[str, list[float]] = collections.defaultdict(list)
        for task in _requests(name):
            query = task["q"]
            read(query)  # the search has read it
            times["main's check asked"].append(clocked(main.asked, query))
            times["(1) the described check asked"].append(clocked(checks.asked, query))
            times["(2) many at once, the bulk forms lifted"].append(clocked(_lifted, query, bulk, first))
            times["(3) the check asked again by the fusion"].append(clocked(_check_held, query, main, tools, first))
        for step, found in times.items():
            found.sort()
            print(f"{name} ({len(tools)} tools, {len(found)} requests) {step}: p50 {statistics.median(found):.1f} "
                  f"p95 {found[int(len(found) * 0.95)]:.1f} µs", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage", choices=["census", "variants", "cost"])
    parser.add_argument("--ideas", nargs="+", choices=list(IDEAS), default=list(IDEAS))
    parser.add_argument("--apis", nargs="+", choices=APIS, help="default: all sixteen (cost: here netbox graph stripe)")
    parser.add_argument("--parts", nargs="+", choices=DEV, default=list(CENSUS))
    args = parser.parse_args(argv)
    if args.stage == "census":
        census(args.apis or list(APIS), tuple(args.parts))
    elif args.stage == "cost":
        cost(args.apis or ["here", "netbox", "graph", "stripe"])
    else:
        variants(args.ideas, args.apis or list(APIS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
