"""The APIs that stay short (branch rank45, issue #30): Graph's, Docker's and HERE's fused misses on the last three
judged parts by what they have in common, and the ideas that census points to, measured on all of `DEV`.

    python bench/search_short.py census [--apis graph docker here] [--parts round27 round28 round29]
    python bench/search_short.py variants [--apis ...]   # the ideas' lists, saved as search_misses.py rank saves them
    python bench/search_agreement.py judge --base main LABEL ...   # the keep rule on DEV (round12..round29)
    OMP_NUM_THREADS=1 python bench/search_short.py cost [--apis graph here]   # covered-fts's CPU per search

`census` prints each fused miss@5 of the parts: the right tool's place in the fusion, BM25's list and the model's;
the fusion's first three (method, path) and the request's words each holds; and, for every match term of the
request, which texts of the right tool hold it (stemmed as bench/search_rankers.py stems): its summary, its own
description, its path, its parameters' names and descriptions, what it answers (`answer_text`: the response's field
names) and its tags. Then counts: misses whose right tool holds no word of the request in any of them.

`variants` searches every `DEV` request once as main does (`search_agreement.Lists`) and saves, beside main's lists,
each idea's (`ranked-LABEL.json` in `search_misses.DATA`), which `search_agreement.py judge` holds to the keep rule:

- `semi-first`: a situation before a semicolon and the request after it ("the reporting container died; bring it
  back up") read request first, as main reads a comma's (`arguments._request_first`): the request's verb is its
  first word. Both rankers read it (the model's embedding is the request's whole text, unchanged).
- `negated`: what a request says not to do or not to touch ("without deleting it", "don't make a new one", "not the
  ones added") left out of BM25's words: from the negation to the clause's end.
- `purpose`: the purpose a request gives after "so" ("publish this build so the other hosts can pull it", "so the
  current plugin keeps running") left out of BM25's words, as `negated` leaves a negation out.
- `clauses`: `semi-first` and `purpose` together; `clauses-all`: and `negated`.
- `covered-gG`: the fusion's trust in BM25 scaled by how much of the request BM25's first place holds: the share
  `c` of the request's match terms (stemmed) found in the first's indexed text (name, path, summary, tags, its
  parameters, what it answers); the model's weight divided by `c ** G` (BM25 alone unchanged). Where BM25's first
  holds one word of eight, the model's confident first is not buried under it. `-headN`: the share BM25's first
  `N` places hold together.
- `covered-fts-gG-headN`: `covered` as the index itself would read it: each match term (with its alternatives, as
  the index's match writes it) asked of FTS5 over the rows of BM25's first `N` places.
- `covered-each-gG`: each of BM25's 50 scored times its own share `c ** G` (both rankers read the list re-sorted):
  a place that holds few of the request's words falls behind one that holds more.
`round31`, `round32`, `round33`, `round34`, `round35`, `round36` and `round37` (the judges after `round30`) are
never read: `search_misses`'s assert.
What was measured: bench/README.md, "The APIs that stay short".
"""

from __future__ import annotations

import argparse
import collections
import itertools
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.search_agreement import Lists  # noqa: E402
from bench.search_misses import APIS, DEV, _first, _folded  # noqa: E402

CENSUS = ("round27", "round28", "round29")
IDEAS = ("semi-first", "negated", "purpose", "clauses", "clauses-all", "covered", "covered-each", "covered-fts")
TEXTS = ("summary", "description", "path", "parameters", "answers", "tags")


def texts(tool: Any) -> dict[str, set[str]]:
    """The stems of each text of the spec's operation, indexed or not."""
    from bench.search_rankers import _stems_of
    from bench.search_text import fields
    from gateway.offer.answer_text import answer_text

    read = fields(tool)
    described = " ".join(str(value.get("description", "")) for value in
                         (tool.input_schema.get("properties") or {}).values() if isinstance(value, dict))
    return {"summary": read["summary"] | read["name"], "description": _stems_of(tool.description),
            "path": read["path"], "parameters": read["argument names"] | _stems_of(described) | read["enum values"],
            "answers": _stems_of(answer_text(tool)), "tags": read["tags"]}


def census(names: list[str], parts: tuple[str, ...]) -> None:
    from bench.search_rankers import _stem
    from gateway.offer.query import read

    counts: collections.Counter[str] = collections.Counter()
    for name in names:
        lists = Lists(name)
        for task, (alone, model, fused, wanted) in zip(lists.requests, lists.rows, strict=True):
            if task["part"] not in parts:
                continue
            at = _first(fused, wanted)
            counts[f"{name}: requests"] += 1
            if _first(alone, wanted) is None or _first(alone, wanted) > 5:  # type: ignore[operator]
                counts[f"{name}: alone misses"] += 1
            if at is not None and at <= 5:
                continue
            right = [lists.tools[t] for t in sorted(wanted)]
            held = [texts(tool) for tool in right]
            terms = [{_stem(w) for a in alternatives for w in a.replace('"', " ").split()}
                     for alternatives in read(task["q"]).terms]
            shown = []
            reached = False
            for alternatives, stems in zip(read(task["q"]).terms, terms, strict=True):
                found = sorted({key for h in held for key, s in h.items() if stems & s}, key=TEXTS.index)
                reached = reached or bool(found)
                shown.append(f"{alternatives[0]}:{','.join(found) or '-'}")
            counts[f"{name}: fused misses"] += 1
            counts[f"{name}: fused misses at 6-10"] += at is not None and at <= 10
            counts[f"{name}: fused misses whose right tool holds no word of the request"] += not reached
            firsts = []
            for t in fused[:3]:
                tool = lists.tools[t]
                own = texts(tool)
                shared = sorted({alternatives[0] for alternatives, stems in zip(read(task["q"]).terms, terms,
                                                                                 strict=True)
                                 if any(stems & s for s in own.values())})
                firsts.append(f"{tool.method} {tool.path} [{' '.join(shared)}]")
            print(f"{name} {task['part']} fused {at} alone {_first(alone, wanted)} model {_first(model, wanted)} "
                  f"{task['q']!r}\n    want {right[0].method} {right[0].path} ({right[0].summary[:70]!r})\n"
                  f"    words: {' '.join(shown)}\n    above: {' | '.join(firsts)}", flush=True)
    for key, count in sorted(counts.items()):
        print(f"{count:5d}  {key}")


_SEMICOLON = re.compile(r"\s*;\s*")
_NEGATED = re.compile(r"\b(?:without|instead\s+of|not|don[\'’]t|do\s+not|never)\b[^,;:.!?]*", re.IGNORECASE)
"""A negation and the rest of its clause: "without deleting it", "don't make a new one", "not the ones added"."""
_PURPOSE = re.compile(r"\bso\s+(?!far\b|much\b|many\b|long\b|often\b)[^,;:.!?]*", re.IGNORECASE)
"""A purpose after "so" and the rest of its clause: "publish this build so the other hosts can pull it" (not "so
far", "so many")."""


def semicolon_first(query: str) -> str:
    """`query` with the first clause after a semicolon that asks (starts with a verb) read first, when the first
    clause does not ask."""
    from gateway.offer import arguments

    clauses = _SEMICOLON.split(query)
    if len(clauses) < 2 or arguments._asks(clauses[0]):  # noqa: SLF001 (this repo's own reading, measured here)
        return query
    asking = next((at for at, clause in enumerate(clauses) if at and arguments._asks(clause)), None)  # noqa: SLF001
    if asking is None:
        return query
    return " ".join([clauses[asking], *(clause for at, clause in enumerate(clauses) if at != asking)])


def unnegated(query: str) -> str:
    """`query` without what it says not to do (`_NEGATED`)."""
    return _NEGATED.sub(" ", query)


def unpurposed(query: str) -> str:
    """`query` without the purpose it gives (`_PURPOSE`)."""
    return _PURPOSE.sub(" ", query)


def match_stems(query: str) -> list[set[str]]:
    """`query`'s match terms, each as the stems of its alternatives."""
    from bench.search_rankers import _stem
    from gateway.offer.query import read

    return [{_stem(w) for a in alternatives for w in a.replace('"', " ").split()} for alternatives in read(query).terms]


def coverage(head: list[tuple[Any, float]], terms: list[set[str]], held: dict[int, set[str]]) -> float:
    """The share of the request's match `terms` (`match_stems`) that the indexed text of the tools of `head` (a
    list's first places) holds, together."""
    for tool, _ in head:
        if id(tool) not in held:  # the description's first paragraph is what the index reads of it
            held[id(tool)] = set().union(_description_first(tool), *(stems for key, stems in texts(tool).items()
                                                                     if key != "description"))
    together = set().union(*(held[id(tool)] for tool, _ in head))
    return sum(1 for stems in terms if stems & together) / len(terms) if terms else 1.0


def _description_first(tool: Any) -> set[str]:
    from bench.search_rankers import _stems_of
    from bench.search_text import main_paragraph

    return _stems_of(main_paragraph(tool))


def fts_share(lists: Lists, at: int, head: int) -> float:
    """The share of the request's match terms (each with its alternatives, as the index matches them) that match a
    row of BM25's first `head` places in the index itself (FTS5's porter stems, the row's columns): the gateway's
    reading of `coverage`."""
    from gateway.offer.query import expression_of, read

    opened = lists.searcher.opened(lists.api)  # the index's connection, as search_agreement reads it
    if not hasattr(lists, "rowid_of"):
        lists.rowid_of = {id(facts.tool): rowid for rowid, facts in enumerate(opened.facts, 1)}  # type: ignore[attr-defined]
    rowids = [lists.rowid_of[id(tool)] for tool, _ in lists.bm25[at][:head]]  # type: ignore[attr-defined]
    terms = read(lists.requests[at]["q"]).terms
    if not rowids or not terms:
        return 1.0
    statement = f"SELECT 1 FROM tools WHERE tools MATCH ? AND rowid IN ({', '.join('?' * len(rowids))}) LIMIT 1"
    held = sum(1 for group in terms
               if opened.connection.execute(statement, (expression_of([group]), *rowids)).fetchone() is not None)
    return held / len(terms)


def _covered_fts(lists: Lists, heads: list[int], gains: list[float],
                 saved: dict[str, dict[str, list[dict[str, Any]]]], name: str, weight: float) -> None:
    from gateway.offer.fusion import fuse

    for head in heads:
        shares = [fts_share(lists, at, head) for at in range(len(lists.requests))]
        for gain in gains:
            rows = saved[f"covered-fts-g{gain:g}-head{head}"][name] = []
            for at, bm25 in enumerate(lists.bm25):
                best, similar, wanted = lists.model[at]
                trust = max(shares[at], 0.05) ** gain
                fused = _folded(fuse(bm25, similar, weight / trust), wanted, lists.place, lists.known)
                rows.append(lists.row(at, (lists.rows[at][0], best, fused, wanted)))


def cost(names: list[str]) -> None:
    """What `covered-fts` at three places costs a search, the thread's CPU (p50 / p95 ms) over every `DEV` request of
    each api: BM25's search as it is (its phrases kept from a search before, as a busy gateway keeps them), and the
    share asked of FTS5 after it."""
    from bench.search_feedback import spread

    for name in names:
        lists = Lists(name)
        plain: list[float] = []
        share: list[float] = []
        for at, task in enumerate(lists.requests):
            started = time.thread_time()
            lists.searcher.search(task["q"], limit=50, apis=[lists.api])
            plain.append(time.thread_time() - started)
            started = time.thread_time()
            fts_share(lists, at, 3)
            share.append(time.thread_time() - started)
        print(f"{name} ({len(lists.tools)} tools, {len(lists.requests)} requests, load {os.getloadavg()[0]:.1f}): "
              f"BM25's search {spread(plain)} ms; the share of its first three {spread(share)} ms", flush=True)


def _wrapped(was: Callable[[str], str], reading: Callable[[str], str]) -> Callable[[str], str]:
    return lambda text: was(reading(text))


def variants(names: list[str], gains: list[float], ideas: list[str], heads: list[int]) -> None:
    """Every `DEV` request of `names` searched as main does, then with each idea (the module's list): each idea's
    lists saved under its label, main's as `main-again` (the same rows as `search_misses.py rank --label main`)."""
    from bench.search_agreement import _save, _totals
    from bench.search_misses import _weight
    from gateway.offer import arguments, query
    from gateway.offer.fusion import fuse

    saved: dict[str, dict[str, list[dict[str, Any]]]] = collections.defaultdict(dict)
    weight = _weight()
    for name in names:
        lists = Lists(name)
        saved["main-again"][name] = [lists.row(at, rows) for at, rows in enumerate(lists.rows)]
        semicolon = (semicolon_first, arguments, "_request_first")
        negation, purpose = (unnegated, query, "asked"), (unpurposed, query, "asked")
        for label, readings in (("semi-first", (semicolon,)), ("negated", (negation,)), ("purpose", (purpose,)),
                                ("clauses", (semicolon, purpose)), ("clauses-all", (semicolon, purpose, negation))):
            if label not in ideas:
                continue
            originals = [(module, attribute, getattr(module, attribute)) for _, module, attribute in readings]
            for reading, module, attribute in readings:
                setattr(module, attribute, _wrapped(getattr(module, attribute), reading))
            try:
                rows = saved[label][name] = []
                moved = 0
                for at, task in enumerate(lists.requests):
                    if all(reading(task["q"]) == task["q"] for reading, _, _ in readings):
                        rows.append(lists.row(at, lists.rows[at]))
                        continue
                    moved += 1
                    hits = lists.searcher.search(task["q"], limit=50, apis=[lists.api])
                    rows.append(lists.row(at, lists.lists(at, [(hit.tool, hit.score) for hit in hits])))
            finally:
                for module, attribute, original in reversed(originals):
                    setattr(module, attribute, original)
            print(f"{name}: {label} reads {moved} requests otherwise", flush=True)
        held: dict[int, set[str]] = {}
        terms = [match_stems(task["q"]) for task in lists.requests]
        shares = {head: [coverage(bm25[:head], terms[at], held) if bm25 else 1.0
                         for at, bm25 in enumerate(lists.bm25)] for head in heads}
        for head, gain in itertools.product(heads, gains) if "covered" in ideas else ():
            rows = saved[f"covered-g{gain:g}" + (f"-head{head}" if head > 1 else "")][name] = []
            for at, bm25 in enumerate(lists.bm25):
                best, similar, wanted = lists.model[at]
                alone, _, _, _ = lists.rows[at]
                trust = max(shares[head][at], 0.05) ** gain
                fused = _folded(fuse(bm25, similar, weight / trust), wanted, lists.place, lists.known)
                rows.append(lists.row(at, (alone, best, fused, wanted)))
        if "covered-fts" in ideas:
            _covered_fts(lists, heads, gains, saved, name, weight)
        for gain in gains if "covered-each" in ideas else ():
            rows = saved[f"covered-each-g{gain:g}"][name] = []
            for at, bm25 in enumerate(lists.bm25):
                held_by = [(tool, score * max(coverage([(tool, score)], terms[at], held), 0.05) ** gain)
                           for tool, score in bm25]
                rows.append(lists.row(at, lists.lists(at, sorted(held_by, key=lambda pair: -pair[1]))))
        print(f"{name}: done ({time.strftime('%H:%M:%S')}, load {os.getloadavg()[0]:.1f})", flush=True)
        _save(saved)
    _totals(saved)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["census", "variants", "cost"])
    parser.add_argument("--gains", nargs="+", type=float, default=[0.5, 1.0, 2.0])
    parser.add_argument("--ideas", nargs="+", choices=IDEAS, default=list(IDEAS))
    parser.add_argument("--heads", nargs="+", type=int, default=[1], help="covered: BM25's first places read")
    parser.add_argument("--apis", nargs="+", choices=APIS, help="default: census graph docker here; variants all")
    parser.add_argument("--parts", nargs="+", choices=DEV, default=list(CENSUS))
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.stage == "census":
        census(args.apis or ["graph", "docker", "here"], tuple(args.parts))
    elif args.stage == "cost":
        cost(args.apis or ["graph", "here"])
    else:
        variants(args.apis or list(APIS), args.gains, args.ideas, args.heads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
