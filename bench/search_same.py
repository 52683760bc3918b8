"""Whether two trees rank alike: every request's lists, names and scores, byte for byte.

    python bench/search_same.py --against /path/to/other/tree [--parts-before round10]
    python bench/search_same.py --tree /path/to/tree --dump lists.json
    python bench/search_same.py --against lists.json

For each API of `bench.search.SPECS` and every request of every part before `--parts-before` (default `round10`:
the parts still to be measured once are never searched), over the API's own catalog, three lists: BM25 alone
(`ToolIndex.search`, `FUSION_DEPTH` results, as a fused search asks it), BM25 for a caller allowed only some tools
(`allowed` refuses every third tool of the api: the path a toolset narrower than its apis takes) and the fused
search (`embeddings.hybrid`, `gateway.search_embeddings: {kind: local}`, its adapter on). Each list is written as
its tools' names and the `repr` of their scores. `--against` dumps the lists of this tree and of the other, each in
a process of its own that imports that tree's gateway, and prints every request whose lists differ; it exits 1 if
any does. Made for changes that must not move the ranking (a faster search): run it on the final commit against
the commit it started from. `--against` a file compares with the lists `--dump` wrote there (the other tree's,
dumped once).
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
UNMEASURED = {"round37"}
"""The parts not measured yet: never searched here, whatever `--parts-before` says (`round21` to `round36` were
measured once in their session, so a ranking check may search them now; `round37` is the next judge)."""


def _lists(tree: Path, before: str) -> dict[str, list[list[str]]]:
    """`{"api part request": [bm25, allowed, fused]}`, each list `["name score", ...]`, searched by `tree`'s gateway."""
    sys.path.insert(0, str(tree))
    from bench.search import PARTS, SPECS, _compile, load_tasks
    from gateway.config.embeddings_endpoint import SearchEmbeddings
    from gateway.offer import embeddings
    from gateway.offer.index import index_of

    settings = SearchEmbeddings.model_validate({"kind": "local", "timeout": 3600})
    parts = PARTS[:PARTS.index(before)]
    assert not UNMEASURED & set(parts), f"{sorted(UNMEASURED & set(parts))} are never searched here"
    cache = Path(tempfile.gettempdir()) / "gateway-bench-search-cache"
    found: dict[str, list[list[str]]] = {}
    for name, spec in SPECS.items():
        tasks = load_tasks(name)
        if not set(parts) & set(tasks):  # none of these parts (the APIs new in round15, round16): nothing to search
            continue
        catalog = _compile(spec, index=True, cache=cache)[1]
        api = next(iter(catalog.apis))
        for pending in embeddings.prepare(settings, catalog, [api]):
            if isinstance(pending, embeddings.Computation):
                pending.wait()
        index = index_of(catalog)
        refused = frozenset(tool.name for tool in list(catalog.for_api(api))[::3])
        allowed_here = functools.partial(_allowed, refused)
        for part in parts:
            for task in tasks.get(part, []):
                query = task["q"]
                hits = index.search(query, limit=embeddings.FUSION_DEPTH, apis=[api])
                bm25 = [(hit.tool, hit.score) for hit in hits]
                allowed = index.search(query, limit=embeddings.FUSION_DEPTH, apis=[api],
                                       allowed=allowed_here)
                fused = embeddings.hybrid(settings, catalog, [api], None, query, bm25)
                found[f"{name} {part} {query}"] = [_written(bm25), _written((h.tool, h.score) for h in allowed),
                                                   _written(fused)]
    return found


def _allowed(refused: frozenset[str], tool: Any) -> bool:
    return tool.name not in refused


def _written(ranked: Any) -> list[str]:
    return [f"{tool.name} {score!r}" for tool, score in ranked]


def _dumped(tree: Path, before: str, out: Path) -> dict[str, list[list[str]]]:
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "--tree", str(tree), "--parts-before", before,
                    "--dump", str(out)], check=True)
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, help="the other tree (its gateway/ and bench/), or its --dump")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the tree whose gateway searches (with --dump)")
    parser.add_argument("--dump", type=Path, help="write this tree's lists there")
    parser.add_argument("--parts-before", default="round10", help="the first part not searched")
    args = parser.parse_args(argv)
    if args.dump is not None:
        args.dump.write_text(json.dumps(_lists(args.tree.resolve(), args.parts_before)))
        return 0
    if args.against is None:
        parser.error("--against or --dump")
    with tempfile.TemporaryDirectory() as tmp:
        theirs = (json.loads(args.against.read_text()) if args.against.is_file()
                  else _dumped(args.against.resolve(), args.parts_before, Path(tmp) / "theirs.json"))
        ours = _dumped(ROOT, args.parts_before, Path(tmp) / "ours.json")
    differ = [key for key in sorted(theirs.keys() | ours.keys()) if theirs.get(key) != ours.get(key)]
    for key in differ:
        kinds = [kind for at, kind in enumerate(("BM25", "BM25 allowed", "fused"))
                 if (theirs.get(key) or [[]] * 3)[at] != (ours.get(key) or [[]] * 3)[at]]
        print(f"differs ({', '.join(kinds)}): {key}")
    print(f"{len(ours)} requests x 3 lists (BM25, BM25 allowed, fused): {len(differ)} differ from {args.against}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
