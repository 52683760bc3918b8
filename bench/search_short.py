"""The APIs that stay short (branch rank45, issue #30): Graph's, Docker's and HERE's fused misses on the last three
judged parts by what they have in common, and the ideas that census points to, measured on all of `DEV`.

    python bench/search_short.py census [--apis graph docker here] [--parts round27 round28 round29]
    python bench/search_short.py judge --base main LABEL ...   # the keep rule on DEV (round12..round29)

`census` prints each fused miss@5 of the parts: the right tool's place in the fusion, BM25's list and the model's;
the fusion's first three (method, path) and the request's words each holds; and, for every match term of the
request, which texts of the right tool hold it (stemmed as bench/search_rankers.py stems): its summary, its own
description, its path, its parameters' names and descriptions, what it answers (`answer_text`: the response's field
names) and its tags. Then counts: misses whose right tool holds no word of the request in any of them.

`judge` is `search_agreement.judge` with `round29` shown (`DEV` is `search_misses.DEV`: `round12`..`round29`).
`round30` (the lead's judge this session) and `round31` are never read: `search_misses`'s assert.
What was measured: bench/README.md, "The APIs that stay short".
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.search_agreement import Lists  # noqa: E402
from bench.search_misses import APIS, DEV, _first  # noqa: E402

CENSUS = ("round27", "round28", "round29")
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["census"])
    parser.add_argument("--apis", nargs="+", choices=APIS, default=["graph", "docker", "here"])
    parser.add_argument("--parts", nargs="+", choices=DEV, default=list(CENSUS))
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    census(args.apis, tuple(args.parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
