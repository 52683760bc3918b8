"""The misses nobody's words reach (branch rank44, issue #30): the last three parts' misses by cause, and two rules
tried on them: expansion terms the first places agree on, where they disagree; a service's own check lifted.

    python bench/search_agreement.py census                       # round26..round28's misses@5 by cause
    python bench/search_agreement.py agree --source alone fused --flat 0 0.8 0.9 --terms 3 --weight 0.1 0.2
    python bench/search_agreement.py checks --lift 0.6 1.2
    python bench/search_agreement.py items                        # "task 3" read as naming one item
    python bench/search_agreement.py judge --base main LABEL ...  # the keep rule; chosen leaving one API out
    OMP_NUM_THREADS=1 python bench/search_agreement.py cost --apis graph here   # CPU per search

(a) **Agreement** (rank42's "Not done"): the first 3 tools of a list (BM25's own, `--source alone`, which both
rankers then read; or the fusion's, `fused`, BM25 alone unchanged), their index terms (FTS5's `fts5vocab`, stemmed,
weighted by their share of each tool's row times their idf, as `search_feedback.py`'s RM3), but only the terms in at
least two of the three tools (what the first places agree on, not one tool's words), the request's own and those of
more than 5% of the api's tools out; applied only where the first places disagree: the third's score at least
`--flat` times the first's (0: always). The best `--terms` of them as phrases ORed, a second BM25 pass whose score
times `--weight` is added to the first's before the signals (`phrase_scores.added`, as RM3 was measured).

(b) **A service's own check** (kept: gateway/offer/service_checks.py says what a check is and when a request asks
for one): the check asked put in BM25's list at `--lift` times its first score (`Weights.service_check`), which both
rankers read. Measured first here with the rule in this script; the same rule moved into the gateway gives the same
lists (`search_misses.py rank`).

Each variant's lists are saved as `search_misses.py rank` saves them (`search_misses.DATA / ranked-LABEL.json`), so
`search_misses.py table` and `judge` count them. `DEV` is `search_misses.DEV` (`round12`..`round31` since rank48,
`round12`..`round30` since rank47, `round12`..`round29` since rank45; `round12`..`round28` when rank44 measured);
`round32`, `round33`, `round34`, `round35`, `round36` and `round37` are never read. What was measured: bench/README.md,
"The misses nobody's words reach".
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.search_feedback import Expanded, _Terms, spread  # noqa: E402
from bench.search_misses import APIS, DATA, DEV, Ranked, _first, _folded, _weight  # noqa: E402

CENSUS = ("round26", "round27", "round28")


class Lists(Ranked):
    """`search_misses.Ranked` with BM25's scored list of every request kept, so that a variant re-ranks it."""

    bm25: list[list[tuple[Any, float]]]

    def search(self) -> list[tuple[list[int], list[int], list[int], set[int]]]:
        from gateway.offer.index import ToolIndex

        self.searcher = ToolIndex(self.catalog)
        self.bm25 = [[(hit.tool, hit.score) for hit in self.searcher.search(task["q"], limit=50, apis=[self.api])]
                     for task in self.requests]
        return [self.lists(at, bm25) for at, bm25 in enumerate(self.bm25)]

    def lists(self, at: int, bm25: list[tuple[Any, float]],
              fused_from: list[tuple[Any, float]] | None = None) -> tuple[list[int], list[int], list[int], set[int]]:
        """BM25's list folded, the model's, the fusion of `fused_from` (default `bm25`) with the model's, the right
        tools."""
        from gateway.offer.fusion import fuse

        best, similar, wanted = self.model[at]
        alone = _folded(bm25, wanted, self.place, self.known)
        fused = _folded(fuse(fused_from if fused_from is not None else bm25, similar, _weight()), wanted, self.place,
                        self.known)
        return alone, best, fused, wanted

    def row(self, at: int, lists: tuple[list[int], list[int], list[int], set[int]]) -> dict[str, Any]:
        task = self.requests[at]
        alone, model, fused, wanted = lists
        return {"part": task["part"], "q": task["q"], "alone": _first(alone, wanted), "model": _first(model, wanted),
                "fused": _first(fused, wanted), "alone3": [self.tools[t].name for t in alone[:3]],
                "fused3": [self.tools[t].name for t in fused[:3]]}


def _save(saved: dict[str, dict[str, list[dict[str, Any]]]]) -> None:
    import gateway

    for label, apis in saved.items():
        (DATA / f"ranked-{label}.json").write_text(json.dumps({"gateway": gateway.__file__, "apis": apis}))


def _hits5(rows: Iterable[dict[str, Any]], key: str) -> int:
    return sum(1 for row in rows if row[key] is not None and row[key] <= 5)


# -- (b) a service's own check -----------------------------------------------------------------------------------


def run_checks(names: list[str], lifts: list[float]) -> None:
    """Every request searched with the check asked lifted at each of `lifts` times the first score
    (`Weights.service_check`; gateway/offer/service_checks.py, where the rule now lives)."""
    import dataclasses

    from gateway.offer.index import ToolIndex
    from gateway.offer.service_checks import ServiceChecks
    from gateway.offer.signals import WEIGHTS

    saved: dict[str, dict[str, list[dict[str, Any]]]] = collections.defaultdict(dict)
    for name in names:
        lists = Lists(name)
        checks = ServiceChecks(lists.tools)
        asked = sum(1 for task in lists.requests if checks.asked(task["q"]) is not None)
        print(f"{name}: {len(checks.checks)} checks, {asked} requests ask one", flush=True)
        for lift in lifts:
            searcher = ToolIndex(lists.catalog, dataclasses.replace(WEIGHTS, service_check=lift))
            rows = saved[f"checks-l{lift:g}"][name] = []
            for at, task in enumerate(lists.requests):
                hits = searcher.search(task["q"], limit=50, apis=[lists.api])
                rows.append(lists.row(at, lists.lists(at, [(hit.tool, hit.score) for hit in hits])))
        _save(saved)
    _totals(saved)


# -- (a) agreement ------------------------------------------------------------------------------------------------


def flatness(ranked: list[tuple[Any, float]]) -> float:
    """The third score over the first (1: the first three alike; 0: fewer than three, or a first far ahead)."""
    if len(ranked) < 3 or ranked[0][1] <= 0:
        return 0.0
    return ranked[2][1] / ranked[0][1]


def run_agree(names: list[str], sources: list[str], flats: list[float], terms: int, weights: list[float]) -> None:
    from gateway.offer.fusion import fuse

    saved: dict[str, dict[str, list[dict[str, Any]]]] = collections.defaultdict(dict)
    with Expanded(0.0) as expanding:
        for name in names:
            lists = Lists(name)
            opened = lists.searcher.opened(lists.api)
            read = _Terms(opened.connection)
            rowid_of = {id(facts.tool): rowid for rowid, facts in enumerate(opened.facts, 1)}
            gated = collections.Counter()
            for source in sources:
                chosen: list[tuple[float, list[str]]] = []
                for at, bm25 in enumerate(lists.bm25):
                    first = bm25 if source == "alone" else fuse(bm25, lists.model[at][1], _weight())
                    rowids = [rowid_of[id(tool)] for tool, _ in first[:3]]
                    own = read.own(lists.requests[at]["q"])
                    agreed = read.expansion(rowids, own, terms, least=2) if len(rowids) == 3 else []
                    chosen.append((flatness(first), agreed))
                for weight in weights:
                    second: dict[int, list[tuple[Any, float]]] = {}
                    for at, (flat, expansion) in enumerate(chosen):
                        if not expansion or flat < min(flats):
                            continue
                        expanding.terms, expanding.weight = expansion, weight
                        hits = lists.searcher.search(lists.requests[at]["q"], limit=50, apis=[lists.api])
                        expanding.terms = []
                        second[at] = [(hit.tool, hit.score) for hit in hits]
                    for least in flats:
                        label = f"agree-{source}-f{least:g}-t{terms}-w{weight:g}"
                        rows = saved[label][name] = []
                        for at, bm25 in enumerate(lists.bm25):
                            flat, expansion = chosen[at]
                            if at not in second or flat < least:
                                rows.append(lists.row(at, lists.rows[at]))
                                continue
                            gated[label] += 1
                            again = second[at]
                            rows.append(lists.row(at, lists.lists(at, again) if source == "alone" else
                                                  lists.lists(at, bm25, fused_from=again)))
            print(f"{name}: expanded {dict(gated)} ({time.strftime('%H:%M:%S')}, load {os.getloadavg()[0]:.1f})",
                  flush=True)
            _save(saved)
    _totals(saved)


def _totals(saved: dict[str, dict[str, list[dict[str, Any]]]]) -> None:
    for label, apis in saved.items():
        rows = [row for api in apis.values() for row in api]
        print(f"{label}: alone {_hits5(rows, 'alone')}, fused {_hits5(rows, 'fused')}", flush=True)


# -- (c) an item named by a bare number ------------------------------------------------------------------------

NUMBERED = re.compile(r"\b([A-Za-z]{3,})\s+([0-9]+)\b(?!\s*(?:[:.,/%-]?[0-9]|am\b|pm\b|days?\b|hours?\b|minutes?\b|"
                      r"seconds?\b|weeks?\b|months?\b|years?\b|results?\b|items?\b|times\b|per\b|mb\b|gb\b|%))")
"""A word and a bare number after it: "task 3", "row 905", "service template 8" (the number after the thing names one
of them); not a count ("48 ports": the number before), nor a time, a size or a page's length after it."""
NOT_THINGS = frozenset("last first next top past every within over under than about around in at by for to since "
                       "until after before of and or the with from between per page limit size port version its our "
                       "their his her all those these some any only just each".split())
"""Words before a number that make it a count, a time, a limit or a value, not an item's id."""


def numbered(query: str) -> bool:
    """Whether a thing is named by a bare number after it (the module's (c))."""
    return any(match.group(1).lower() not in NOT_THINGS for match in NUMBERED.finditer(query))


def run_items(names: list[str]) -> None:
    """Every request searched with "task 3" read as naming one item (`Request.identified`, whose `one_item` lifts the
    paths with a parameter), besides the ids that say they are one (`arguments.identifies`)."""
    from gateway.offer import query

    original = query.identifies
    saved: dict[str, dict[str, list[dict[str, Any]]]] = collections.defaultdict(dict)
    query.identifies = lambda text: original(text) or numbered(text)
    try:
        for name in names:
            lists = Lists(name)
            saved["items"][name] = [lists.row(at, rows) for at, rows in enumerate(lists.rows)]
            told = sum(1 for task in lists.requests if numbered(task["q"]) and not original(task["q"]))
            print(f"{name}: {told} requests read as naming an item by a bare number", flush=True)
            _save(saved)
    finally:
        query.identifies = original
    _totals(saved)


# -- the census -----------------------------------------------------------------------------------------------


def census(names: list[str]) -> None:
    """Each miss@5 of `CENSUS` (BM25 alone, fused) by its first cause, in this order: the right tool is a service's
    own check (`service_checks.answered_by`); the first of the list is at the right tool's path or resource with
    another method (a verb read wrong); it has the right tool's method and summary or last segment at another path
    (a copy found instead); no word of the request is in the right tool's name, path, summary or tags (in users'
    words: a change, a read); else the words are read and others rank above. And how many are at places 6-10."""
    from bench.search_text import fields
    from gateway.offer.index_build import summary_of
    from gateway.offer.query import read
    from gateway.offer.service_checks import answered_by

    def last(path: str) -> str:
        return next((s for s in reversed(path.strip("/").split("/")) if s and "{" not in s), "")

    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    for name in names:
        lists = Lists(name)
        checks = {id(tool) for tool in lists.tools if answered_by(tool) is not None}
        for task, (alone, _, fused, wanted) in zip(lists.requests, lists.rows, strict=True):
            if task["part"] not in CENSUS:
                continue
            right = [lists.tools[at] for at in sorted(wanted)]
            for ranker, order in (("alone", alone), ("fused", fused)):
                at = _first(order, wanted)
                if at is not None and at <= 5:
                    continue
                winner = lists.tools[order[0]] if order else None
                held = set().union(*({s for key in ("name", "path", "summary", "tags") for s in fields(tool)[key]}
                                     for tool in right))
                said = [{w for a in alternatives for w in a.replace('"', " ").split()}
                        for alternatives in read(task["q"]).terms]
                from bench.search_rankers import _stem

                words = any({_stem(w) for w in alternative} & held for alternative in said)
                if any(id(tool) in checks for tool in right):
                    cause = "a service's own check"
                elif winner is not None and any(winner.method != tool.method and
                                                (winner.path == tool.path or last(winner.path) == last(tool.path))
                                                for tool in right):
                    cause = "a verb read wrong"
                elif winner is not None and any(winner.method == tool.method and winner.path != tool.path and
                                                (summary_of(winner) == summary_of(tool) or
                                                 last(winner.path) == last(tool.path)) for tool in right):
                    cause = "a copy found instead"
                elif not words:
                    cause = "in users' words: " + ("a read" if right[0].method == "GET" else "a change")
                else:
                    cause = "words read, others above"
                counts[ranker, cause] += 1
                counts[ranker, "all"] += 1
                if at is not None and at <= 10:
                    counts[ranker, "at 6-10"] += 1
                if ranker == "fused":
                    print(f"{name} {task['part']} [{cause}] {at} {task['q']!r} -> {right[0].method} {right[0].path}; "
                          f"first {winner.method if winner else '-'} {winner.path if winner else '-'}", flush=True)
    for (ranker, cause), count in sorted(counts.items()):
        print(f"{ranker}: {cause}: {count}")


# -- the rule -------------------------------------------------------------------------------------------------------


def judge(base: str, labels: list[str]) -> None:
    """Each variant against `base`: hits@5 on `DEV` alone and fused, its last part fused, the largest loss of an API on
    a part with each ranker, and the keep rule (fused +5 or more, alone not less, no API -3 on a part); then the
    choice leaving one API out (for each API, of `base` and the variants that pass the rule on the other fifteen,
    the one with the most hits@5 there, alone and fused added), counted on the API left out."""
    loaded = {label: json.loads((DATA / f"ranked-{label}.json").read_text())["apis"] for label in [base, *labels]}
    apis = list(loaded[base])
    parts = {api: sorted({row["part"] for row in loaded[base][api]}) for api in apis}

    def hits(label: str, api: str, key: str, part: str | None = None) -> int:
        return _hits5((row for row in loaded[label][api] if part is None or row["part"] == part), key)

    def passes(label: str, among: list[str]) -> bool:
        gain = {key: sum(hits(label, a, key) - hits(base, a, key) for a in among) for key in ("alone", "fused")}
        worst = min(hits(label, a, key, p) - hits(base, a, key, p) for a in among for p in parts[a]
                    for key in ("alone", "fused"))
        return gain["fused"] >= 5 and gain["alone"] >= 0 and worst > -3

    for label in [base, *labels]:
        cells = []
        for key in ("alone", "fused"):
            total = sum(hits(label, a, key) for a in apis)
            worst = min((hits(label, a, key, p) - hits(base, a, key, p), a, p) for a in apis for p in parts[a])
            cells.append(f"{total} ({total - sum(hits(base, a, key) for a in apis):+d}) | "
                         f"{worst[0]:+d} ({worst[1]} {worst[2]})")
        last = sum(hits(label, a, "fused", DEV[-1]) for a in apis)
        print(f"| {label} | {cells[0]} | {cells[1]} | {last} | {'passes' if passes(label, apis) else 'fails'} |")
    chosen = []
    total = {"alone": 0, "fused": 0}
    for api in apis:
        others = [a for a in apis if a != api]
        kept = [base, *(label for label in labels if passes(label, others))]
        pick = max(kept, key=lambda label: sum(hits(label, a, "alone") + hits(label, a, "fused") for a in others))
        chosen.append(pick)
        for key in total:
            total[key] += hits(pick, api, key)
    print(f"chosen leaving one API out: alone {total['alone']}, fused {total['fused']}; "
          f"{dict(collections.Counter(chosen))}")


# -- the cost ------------------------------------------------------------------------------------------------------


def cost(names: list[str], terms: int, weight: float) -> None:
    """What each costs a search, the searching thread's CPU (p50 / p95 ms) over every `DEV` request of each api: the
    search as it is; the agreement's choice of terms from its first 3 and the flatness, then the search again with
    them (the request's own phrases kept from a search before, as a busy gateway keeps them); the check asked for
    (`ServiceChecks.asked`: the request's words read against the api's checks, made once per api)."""
    from gateway.offer.service_checks import ServiceChecks

    for name in names:
        lists = Lists(name)
        opened = lists.searcher.opened(lists.api)
        read = _Terms(opened.connection)
        rowid_of = {id(facts.tool): rowid for rowid, facts in enumerate(opened.facts, 1)}
        checks = ServiceChecks(lists.tools)
        plain: list[float] = []
        expanded: list[float] = []
        asked: list[float] = []
        with Expanded(weight) as expanding:
            for task in lists.requests:
                lists.searcher.search(task["q"], limit=50, apis=[lists.api])  # its phrases kept
                started = time.thread_time()
                hits = lists.searcher.search(task["q"], limit=50, apis=[lists.api])
                plain.append(time.thread_time() - started)
                ranked = [(hit.tool, hit.score) for hit in hits]
                flatness(ranked)
                expanding.terms = read.expansion([rowid_of[id(tool)] for tool, _ in ranked[:3]], read.own(task["q"]),
                                                 terms, least=2)
                if expanding.terms:
                    lists.searcher.search(task["q"], limit=50, apis=[lists.api])
                expanding.terms = []
                expanded.append(time.thread_time() - started)
                started = time.thread_time()
                checks.asked(task["q"])
                asked.append(time.thread_time() - started)
        print(f"{name} ({len(lists.tools)} tools, {len(lists.requests)} requests, load {os.getloadavg()[0]:.1f}): "
              f"BM25's search {spread(plain)} ms; with the agreement's second pass {spread(expanded)} ms; "
              f"the check asked {spread(asked)} ms", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["census", "agree", "checks", "items", "judge", "cost"])
    parser.add_argument("labels", nargs="*", help="judge: the variants' saved lists")
    parser.add_argument("--base", default="main", help="judge: the list the variants are held against")
    parser.add_argument("--source", nargs="+", choices=["alone", "fused"], default=["alone"])
    parser.add_argument("--flat", nargs="+", type=float, default=[0.0])
    parser.add_argument("--terms", type=int, default=3)
    parser.add_argument("--weight", nargs="+", type=float, default=[0.1])
    parser.add_argument("--lift", nargs="+", type=float, default=[1.2])
    parser.add_argument("--apis", nargs="+", choices=APIS, default=list(APIS))
    args = parser.parse_intermixed_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    assert not {"round32", "round33", "round34", "round35", "round36", "round37"} & set(DEV)
    if args.stage == "census":
        census(args.apis)
    elif args.stage == "agree":
        run_agree(args.apis, args.source, args.flat, args.terms, args.weight)
    elif args.stage == "checks":
        run_checks(args.apis, args.lift)
    elif args.stage == "items":
        run_items(args.apis)
    elif args.stage == "judge":
        judge(args.base, args.labels)
    else:
        cost(args.apis, args.terms, args.weight[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
