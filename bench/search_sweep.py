"""Tool search: how recall@5 on the tuning parts moves when one ranking constant (or a few together) changes.

    python bench/search_sweep.py '{"owner": [1.3, 1.6, 2.0], "W_description": [1.0, 2.0]}' ['[{"owner": 1.6}]']

Only the tuning parts (`tasks`, `holdout`, `fresh`, `tune`) are searched, never `heldout` or `final`. Each line prints
the change in hits per API against the product's; a name is a field of `gateway.offer.signals.Weights` (the index
searches with weights of its own), `W_<column>` a column's BM25 weight.
A constant was changed only where a plateau of values helped some API and hurt none (the middle of the plateau was
taken), so that no API's own requests choose what the others get. Catalogs come from the bench's compile cache
(run bench/search.py once first).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import search as bench  # noqa: E402

from gateway.offer import index, index_build, statements  # noqa: E402
from gateway.offer.signals import WEIGHTS, Weights  # noqa: E402

TUNING = ("tasks", "holdout", "fresh", "tune")


def _hits(data: dict[str, tuple[Any, str, list[dict[str, Any]]]], weights: Weights = WEIGHTS) -> dict[str, int]:
    found = {}
    for name, (catalog, api, tasks) in data.items():
        found[name] = 0
        tool_index = index.ToolIndex(catalog, weights)
        for task in tasks:
            wanted = set(task["ops"])
            hits = tool_index.search(task["q"], limit=5, apis=[api])
            found[name] += any(hit.tool.name in wanted or hit.tool.operation_id in wanted for hit in hits)
    return found


def _set(values: dict[str, float]) -> dict[str, float]:
    """Sets the columns' weights (`W_<column>`: bench only, the module's own globals) and answers the ones they
    replaced."""
    before = {}
    old = _bm25()
    for key, value in values.items():
        before[key] = index_build.COLUMN_WEIGHTS[key[2:]]
        index_build.COLUMN_WEIGHTS[key[2:]] = value
    new = _bm25()
    statements.BM25 = new
    for name in ("PLAIN", "ANSWERED"):  # each statement of both sets with the new weights
        kept = getattr(statements, name)
        setattr(statements, name, statements.Statements(
            **{field: getattr(kept, field).replace(old, new) for field in ("first", "both", "among", "addressed")}))
    return before


def _bm25() -> str:
    return f"bm25(tools, {', '.join(str(weight) for weight in index_build.COLUMN_WEIGHTS.values())})"


def main(argv: list[str]) -> int:
    grid: dict[str, list[float]] = json.loads(argv[0]) if argv else {}
    combos: list[dict[str, float]] = json.loads(argv[1]) if len(argv) > 1 else []
    cache = Path(bench.tempfile.gettempdir()) / "gateway-bench-search-cache"
    data = {}
    for name, spec in bench.specs_with(TUNING).items():  # the APIs new in round15 hold no tuning part
        catalog = bench._compile(spec, index=True, cache=cache)[1]
        tasks = [task for part in TUNING for task in bench.load_tasks(name).get(part, [])]
        data[name] = (catalog, next(iter(catalog.apis.values())).name, tasks)
    base = _hits(data)
    print("hits", base, "of", {name: len(tasks) for name, (_, _, tasks) in data.items()})
    trials = [{key: value} for key, values in grid.items() for value in values] + combos
    for trial in trials:
        before = _set({key: value for key, value in trial.items() if key.startswith("W_")})
        found = _hits(data, dataclasses.replace(WEIGHTS, **{key: value for key, value in trial.items()
                                                            if not key.startswith("W_")}))
        _set(before)
        change = {name: found[name] - base[name] for name in found}
        print(trial, change, sum(change.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
