"""Tool search's weak mark decided on direct counts (branch rank51): the rule of bench/README.md's "The weak mark's
rule decided again on direct counts", written before any of its figures.

    python bench/search_direct.py --rows d32all.json r34-weak-rows.json [--new d32new.json]

The rows are bench/search_match.py's (`--dump`), measured with the shipped delta (delta32, trained up to `round32`):
its answered in-API requests of `round33` and `round34` (`NEW`: requests it never saw, both parts spent) are the data;
a false flag is one of them whose closest cosine (what `gateway.offer.closeness` reads) is under the threshold.
What a threshold buys: the unrelated requests (search_match's `UNRELATED` pairs) of every part and the off-topic ones
it marks. Candidates (each one threshold for every index): D, the largest (steps of 0.001) that passes; C, B, A, the
thresholds shipped before (0.337, 0.301, 0.255); E and F, the lowest and second-lowest of the sixteen APIs' cuts at
`WORST_FLAGS` of their answered requests. The criterion (`passes`): at most `FALSE_FLAGS` of the answered requests
flagged pooled and `WORST_FLAGS` of every API's, on each part alone and on the two together. The check: D fitted on
one part alone, counted on the other. With `--new` (a dump of `NEW` and the off-topic requests carrying BM25's first
score and the two lists' agreement), second features are measured the same way. `round35`, `round36` and `round37`
are never read: search_match's parts stop at `round34`; this script reads only the rows it is given, and asserts it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.search_match import UNRELATED, parts  # noqa: E402  (run as a script)

NEW = ("round33", "round34")
DELTA32 = "bb95d761cb26fbf7370932d8e1d4e8da98ee650b58a77ea15760b5fc892d038a"
FALSE_FLAGS = 0.02
WORST_FLAGS = 0.05
SHIPPED_BEFORE = {"C: rank50's pooled cut": 0.337, "B: delta27's, rank50's second-lowest": 0.301,
                  "A: delta32's first, the lowest API's": 0.255}
Row = dict[str, Any]
Value = Callable[[Row], float]


def cosine(row: Row) -> float:
    return float(row["cosine"])


def load(paths: Iterable[Path]) -> list[Row]:
    """The rows of the files, joined; a later file's (API, kind, part) replaces an earlier's."""
    joined: dict[tuple[str, str, str], list[Row]] = {}
    for path in paths:
        found: dict[tuple[str, str, str], list[Row]] = {}
        for row in json.loads(path.read_text()):
            found.setdefault((row["api"], row["kind"], row["part"]), []).append(row)
        joined.update(found)
    rows = [row for group in joined.values() for row in group]
    assert {row["delta"] for row in rows} == {DELTA32}, "the rows are not the shipped delta's"
    assert {row["part"] for row in rows} <= {*parts, "offtopic"}, "a part the scripts never read"
    return rows


def answered(rows: list[Row], part: str | None = None) -> list[Row]:
    """The answered in-API requests of `NEW` (of `part` alone when given)."""
    return [row for row in rows if row["kind"] == "in" and row["fused_hit"] and row["part"] in NEW
            and (part is None or row["part"] == part)]


def marked(rows: list[Row], value: Value, limit: float) -> list[Row]:
    """What a threshold marks weak: a non-empty answer whose measure is under it (closeness.py's rule)."""
    return [row for row in rows if not row["fused_empty"] and value(row) < limit]


def by_api(rows: list[Row]) -> dict[str, list[Row]]:
    grouped: dict[str, list[Row]] = {}
    for row in rows:
        grouped.setdefault(row["api"], []).append(row)
    return grouped


def counted(rows: list[Row], value: Value, limit: float) -> tuple[int, int, str, int, int]:
    """(flagged, answered, the worst API, its flagged, its answered) of the answered `rows` at `limit`."""
    apis = by_api(rows)
    worst = max(apis, key=lambda api: len(marked(apis[api], value, limit)) / len(apis[api]))
    return (len(marked(rows, value, limit)), len(rows), worst, len(marked(apis[worst], value, limit)),
            len(apis[worst]))


def passes(sets: list[list[Row]], value: Value, limit: float) -> bool:
    """The criterion: on each set, at most `FALSE_FLAGS` pooled and `WORST_FLAGS` on every API flagged."""
    for rows in sets:
        flagged, total, _, worst, of = counted(rows, value, limit)
        if flagged > FALSE_FLAGS * total or worst > WORST_FLAGS * of:
            return False
    return True


def largest(sets: list[list[Row]], value: Value, steps: Iterable[float]) -> float:
    """The largest of `steps` (ascending) that passes; flags only grow with the threshold, so the first that fails
    ends the search."""
    chosen = -math.inf
    for limit in steps:
        if not passes(sets, value, limit):
            break
        chosen = limit
    return chosen


def thousandths() -> list[float]:
    return [step / 1000 for step in range(1, 1001)]


def floor3(value: float) -> float:
    return math.floor(value * 1000) / 1000


def percentile_cuts(rows: list[Row]) -> list[float]:
    """Each API's cut at `WORST_FLAGS` of its answered requests (the cosine with floor(0.05 n) of its n under it),
    lowest first."""
    return sorted(sorted(cosine(row) for row in mine)[int(WORST_FLAGS * len(mine))]
                  for mine in by_api(rows).values())


def candidates(rows: list[Row]) -> dict[str, float]:
    sets = [answered(rows, part) for part in NEW] + [answered(rows)]
    cuts = percentile_cuts(answered(rows))
    return {"D: the largest that passes": largest(sets, cosine, thousandths()), **SHIPPED_BEFORE,
            "E: the lowest API's 5% cut": floor3(cuts[0]), "F: the second-lowest API's 5% cut": floor3(cuts[1])}


def _share(flagged: int, total: int) -> str:
    return f"{flagged}/{total} ({flagged / total:.1%})"


def _cells(rows: list[Row], value: Value, limit: float) -> str:
    flagged, total, worst, mine, of = counted(rows, value, limit)
    return f"{_share(flagged, total)}; {worst} {mine}/{of}"


def benefit(rows: list[Row], value: Value, limit: float) -> tuple[int, int, int, int]:
    """(unrelated marked, unrelated, off-topic marked, off-topic) at `limit`."""
    unrelated = [row for row in rows if row["kind"] == "unrelated"]
    offtopic = [row for row in rows if row["kind"] == "offtopic"]
    return (len(marked(unrelated, value, limit)), len(unrelated), len(marked(offtopic, value, limit)),
            len(offtopic))


def report_rule(rows: list[Row]) -> float:
    """Each candidate's direct counts, whether it passes, what it buys; the decision (the highest benefit among those
    that pass, a tie to the lower threshold)."""
    sets = [answered(rows, part) for part in NEW] + [answered(rows)]
    print("| candidate | threshold | round33: flagged; worst API | round34 | together | passes | unrelated marked "
          "| off-topic marked |\n|---|---|---|---|---|---|---|---|")
    passing: list[tuple[int, float, str]] = []
    for name, limit in candidates(rows).items():
        ok = passes(sets, cosine, limit)
        gained, unrelated, off, offtopic = benefit(rows, cosine, limit)
        print(f"| {name} | {limit:.3f} | " + " | ".join(_cells(chosen, cosine, limit) for chosen in sets) +
              f" | {'yes' if ok else 'no'} | {_share(gained, unrelated)} | {_share(off, offtopic)} |")
        if ok:
            passing.append((gained + off, -limit, name))
    gain, negative, name = max(passing)
    print(f"the rule: {name}, weak under {-negative:.3f} (unrelated and off-topic marked: {gain})")
    return -negative


def report_api(rows: list[Row], limit: float) -> None:
    print(f"\nper API at {limit:.3f}\n| API | round33 | round34 | unrelated marked (whose) | off-topic marked |\n"
          "|---|---|---|---|---|")
    for api, mine in by_api([row for row in rows if row["kind"] != "in" or row["part"] in NEW]).items():
        cells = []
        for part in NEW:
            own = answered(mine, part)
            cells.append(_share(len(marked(own, cosine, limit)), len(own)))
        gained, unrelated, off, offtopic = benefit(mine, cosine, limit)
        print(f"| {api} | {' | '.join(cells)} | {_share(gained, unrelated)} ({UNRELATED[api]}) | "
              f"{_share(off, offtopic)} |")


def check(rows: list[Row], value: Value, steps: list[float]) -> list[str]:
    """D's rule fitted on one part alone, counted on the other: what it gave where fitted, what it gives there."""
    lines = []
    for fitted, other in (NEW, NEW[::-1]):
        limit = largest([answered(rows, fitted)], value, steps)
        lines.append(f"fitted on {fitted}: {limit:.4g} ({_cells(answered(rows, fitted), value, limit)}), counted on "
                     f"{other}: {_cells(answered(rows, other), value, limit)}")
    return lines


def _steps(rows: list[Row], value: Value) -> list[float]:
    """A feature's thresholds to try: each value it takes on the answered rows, and one above the highest."""
    values = sorted({value(row) for row in answered(rows)})
    return [*values, values[-1] + 1]


def features(new: list[Row]) -> dict[str, Value]:
    """The second features (step 2), alone and with the cosine: `cosine + w * feature / m` (m its median over the
    answered rows)."""
    alone: dict[str, Value] = {
        "the first cosine's margin over the fifth": lambda row: row["cosine"] - row["cosines"][min(4, len(
            row["cosines"]) - 1)],
        "BM25's first score": lambda row: float(row["bm25_first"]),
        "the two lists' first five in common": lambda row: float(row["agree"]),
    }
    every: dict[str, Value] = {"the cosine alone": cosine, **alone}
    for name, value in alone.items():
        values = sorted(value(row) for row in answered(new))
        middle = values[len(values) // 2] or 1.0
        for weight in (0.05, 0.1, 0.2):
            every[f"cosine + {weight} x {name} / {middle:.3g}"] = (
                lambda row, value=value, weight=weight, middle=middle: row["cosine"] + weight * value(row) / middle)
    return every


def report_features(new: list[Row]) -> None:
    sets = [answered(new, part) for part in NEW] + [answered(new)]
    print("\nsecond features (the rows of --new: unrelated of round33+round34 and the off-topic ones)\n"
          "| measure | largest passing | together: flagged; worst | unrelated marked | off-topic marked | sum | "
          "the check |\n|---|---|---|---|---|---|---|")
    for name, value in features(new).items():
        steps = thousandths() if name == "the cosine alone" else _steps(new, value)
        limit = largest(sets, value, steps)
        gained, unrelated, off, offtopic = benefit(new, value, limit)
        print(f"| {name} | {limit:.4g} | {_cells(sets[-1], value, limit)} | {_share(gained, unrelated)} | "
              f"{_share(off, offtopic)} | {gained + off} | {'; '.join(check(new, value, steps))} |")


def same(rows: list[Row], new: list[Row]) -> bool:
    """Whether the new dump's cosines and answers are those of the rows it measured again."""
    def key(row: Row) -> tuple[Any, ...]:
        return row["api"], row["kind"], row["part"], row["q"]

    def seen(row: Row) -> tuple[Any, ...]:
        return round(row["cosine"], 6), row["fused_hit"], row["fused_empty"]

    old = {key(row): seen(row) for row in rows if row["part"] in {*NEW, "offtopic"}}
    return {key(row): seen(row) for row in new} == old


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=Path, nargs="+", required=True, help="search_match.py --dump files, joined")
    parser.add_argument("--new", type=Path, help="a dump of round33, round34 and the off-topic requests with the "
                        "second features' fields")
    args = parser.parse_args(argv)
    rows = load(args.rows)
    decided = report_rule(rows)
    report_api(rows, decided)
    print("\nthe check (D's rule on one part alone):\n" + "\n".join(check(rows, cosine, thousandths())))
    if args.new:
        new = load([args.new])
        print(f"\nthe new dump's cosines and answers are the rows': {same(rows, new)}")
        report_features(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
