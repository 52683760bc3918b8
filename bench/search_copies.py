"""Copies of one operation in tool search's first places (branch graph32).

    OMP_NUM_THREADS=1 python bench/search_copies.py collect      # every request's lists, as the product ranks them
    python bench/search_copies.py claim                          # do the request sets name every copy that answers?
    python bench/search_copies.py score [--keys K ...] [--rules R ...]   # recall@5 / @10 of each re-ordering
    python bench/search_copies.py fusions [--keys K ...] [--rules R ...] # the fusion, the model list by operation
    python bench/search_copies.py misses --apis graph [--parts P ...]    # each fused miss, then the misses by cause

Data: every part up to `round16` (the development data of its session); `round18` (the lead's judge) and `round19`
(being written) are never read (an assert says so). `collect` searches each request as the product does, over its
API's own catalog (the compile cache of bench/search.py): BM25 alone (`ToolIndex.search`, `FUSION_DEPTH` places) and
fused (`embeddings.hybrid`, `gateway.search_embeddings: {kind: local}`: the int8 model and the shipped delta, trained
on parts up to `round15`, so fused figures of those parts are over-confident for the model and `round16` is the clean
part), and keeps both lists (names and scores) in `DATA`. Everything else reads those lists: a variant re-orders a
list as `gateway.offer.copies` would and counts recall@5 and @10 hits (the share of requests with one of their
operations among the first k).

`KEYS` are the readings of what a copy is (`kept`: the product's, `gateway.offer.copies.address`); `RULES` the
re-orderings: `after` (a copy after every distinct operation), `cap1@5` / `cap2@5` (at most one / two copies of an
operation among the first five), `fold` (one place per operation, its copies named with it and counted as its hits, as
`toolsearch.search` answers). `fusions` keeps the model's first 400 places per request (`collect`, each request
embedded alone, as a search embeds it) and re-does the product's fusion with the model's list counted by operations
(`floor`: down to its 50th distinct operation; `distinct`: only the first copy of each); its first row checks that the
product's fused lists are reproduced. Groups (`GROUPS`): the tuning parts, `round5`..`round11`, `round12`..`round15`
(the rule is written from these) and `round16` (which confirms it).

`claim` checks what a re-ordering of copies relies on: where the request sets name one copy of an operation, do they
name its other copies too (then showing one copy of each operation loses no answer)? For each key of what a copy is,
the named operations' copies the sets do not name, per part.
"""

from __future__ import annotations

import argparse
import collections
import pickle
import re
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.search import PARTS, SPECS, TUNING, _compile, load_tasks  # noqa: E402
from gateway.offer.index_build import resources  # noqa: E402

NEVER = {"round18", "round19", "round20"}
DEV = PARTS[:PARTS.index("round17")]
"""Every part up to `round16`: the development data."""
assert not NEVER & set(DEV)
WRITE = ("round12", "round13", "round14", "round15")
"""The parts the rule is written from; `round16` confirms it."""
CONFIRM = ("round16",)
DATA = Path(tempfile.gettempdir()) / "gateway-bench-graph32"
CACHE = Path(tempfile.gettempdir()) / "gateway-bench-search-cache"


def _apis() -> list[str]:
    """The APIs whose request sets hold a part of `DEV` (Docker and Apacta hold `round17` alone: never opened)."""
    return [name for name in SPECS if set(DEV) & set(load_tasks(name))]


def _tasks(name: str) -> list[dict[str, Any]]:
    tasks = load_tasks(name)
    return [{**task, "part": part} for part in DEV for task in tasks.get(part, [])]


def _missing(suffix: str) -> Iterable[tuple[str, Path, Any]]:
    """Each API whose `DATA / NAME{suffix}.pickle` is still to be made: its name, that path and its catalog."""
    DATA.mkdir(parents=True, exist_ok=True)
    for name in _apis():
        target = DATA / f"{name}{suffix}.pickle"
        if not target.exists():
            yield name, target, _compile(SPECS[name], index=True, cache=CACHE)[1]


def collect() -> None:
    from gateway.config.embeddings_endpoint import SearchEmbeddings
    from gateway.offer import embeddings
    from gateway.offer.index import index_of

    settings = SearchEmbeddings.model_validate({"kind": "local", "timeout": 3600})
    for name, target, catalog in _missing(""):
        api = next(iter(catalog.apis))
        for pending in embeddings.prepare(settings, catalog, [api]):
            if isinstance(pending, embeddings.Computation):
                pending.wait()
        index = index_of(catalog)
        rows = []
        for task in _tasks(name):
            bm25 = [(hit.tool, hit.score) for hit in index.search(task["q"], limit=embeddings.FUSION_DEPTH, apis=[api])]
            fused = embeddings.hybrid(settings, catalog, [api], None, task["q"], bm25)
            rows.append({**task, "bm25": [(t.name, s) for t, s in bm25], "fused": [(t.name, s) for t, s in fused]})
        tools = {t.name: (t.method, t.path, t.summary, t.operation_id) for t in catalog}
        target.write_bytes(pickle.dumps({"rows": rows, "tools": tools}))
        print(f"{name}: {len(rows)} requests", flush=True)


MODEL_DEPTH = 400
"""The model's places kept per request (its cosines), for fusions re-done here."""


def collect_cosines() -> None:
    """Each request's model ranking, its first `MODEL_DEPTH` tools and cosines (`DATA / NAME-model.pickle`): the
    request's vector as the product computes it, the tools' from the gateway's own cache (their float32 rows)."""
    import numpy

    from bench.search_fusion import tool_vectors
    from gateway.config.embeddings_endpoint import SearchEmbeddings
    from gateway.offer import embeddings
    from gateway.offer.tool_vectors import unit

    settings = SearchEmbeddings.model_validate({"kind": "local", "timeout": 3600})
    for name, target, catalog in _missing("-model"):
        tools = list(catalog.for_api(next(iter(catalog.apis))))
        matrix = tool_vectors(settings, catalog)
        queries = [task["q"] for task in _tasks(name)]
        # one request at a time, as a search embeds it: the int8 model quantizes a batch's activations together
        vectors = numpy.asarray([unit(embeddings.embed(settings, [query])[0]) for query in queries],
                                dtype=numpy.float32)
        rows = []
        for cosines in vectors @ matrix.T:
            best = numpy.argsort(-cosines, kind="stable")[:MODEL_DEPTH]
            rows.append([(tools[i].name, float(cosines[i])) for i in best])
        target.write_bytes(pickle.dumps(rows))
        print(f"{name}: {len(rows)} requests' model rankings", flush=True)


def load(name: str) -> dict[str, Any]:
    return pickle.loads((DATA / f"{name}.pickle").read_bytes())  # type: ignore[no-any-return]


# -- what a copy is -------------------------------------------------------------------------------------------------

_SUFFIXES = frozenset({"$ref", "$value", "$count"})
"""Graph's path endings that say how a resource is answered (the index's `_PATH_SUFFIXES`)."""


def _kind(method: str, path: str, summary: str, ownerless: bool) -> tuple[str, ...]:
    segments = [s for s in path.split("/") if s]
    addressed = [s for s in segments if s not in _SUFFIXES][-1:] or [""]
    acted = 2 if "." in addressed[0] else 1
    said = summary.lower() or path
    if ownerless and segments:
        said = re.sub(rf" (from|for|in|to|of) {re.escape(segments[0].lower())}$", "", said)
    return (method, "item" if addressed[0].startswith("{") else "all", *resources(path)[:acted], said)


def _ownerless_path(method: str, path: str) -> tuple[str, ...]:
    segments = ["{}" if s.startswith("{") else s for s in path.split("/") if s]
    if segments[:1] == ["me"]:
        segments = segments[1:]
    elif len(segments) > 1 and segments[1] == "{}":
        segments = segments[2:]
    return (method, *segments)


_PERSON = re.compile(r"^/(me|users/\{[^}]*\})(?=/|$)")
_TEAM = re.compile(r"^/(teams/\{[^}]*\}|groups/\{[^}]*\}/team|me/joinedTeams/\{[^}]*\}"
                   r"|users/\{[^}]*\}/joinedTeams/\{[^}]*\})(?=/|$)")


def _owner(path: str, teams: bool) -> str:
    if teams and _TEAM.match(path):
        return "team"
    if _PERSON.match(path):
        return "person"
    return path.split("/")[1] if path.count("/") else ""


def _person_kind(t: tuple[str, str, str, str], teams: bool) -> tuple[str, ...]:
    method, path, summary, _ = t
    said = re.sub(r" (from|for|in|to|of) (me|users)$", "", summary.lower()) or path
    return (_owner(path, teams), *_kind(method, path, said, False))


def _person_path(t: tuple[str, str, str, str], teams: bool) -> tuple[str, ...]:
    method, path = t[0], t[1]
    if teams and (found := _TEAM.match(path)):
        path = "/team" + path[found.end():]
    path = _PERSON.sub("/me", path)
    return (method, *("{}" if s.startswith("{") else s for s in path.split("/") if s))


def _kept(t: tuple[str, str, str, str]) -> str:
    """The product's key (`gateway.offer.copies.address`)."""
    from gateway.offer.copies import address

    return address(_Tool(t[0], t[1]))  # type: ignore[arg-type]


class _Tool:
    __slots__ = ("api", "method", "path")

    def __init__(self, method: str, path: str) -> None:
        self.api, self.method, self.path = "", method, path


KEYS: dict[str, Callable[[tuple[str, str, str, str]], tuple[str, ...]]] = {
    "kind": lambda t: _kind(t[0], t[1], t[2], False),
    "kind-ownerless": lambda t: _kind(t[0], t[1], t[2], True),
    "path-ownerless": lambda t: _ownerless_path(t[0], t[1]),
    "path-ownerless+summary": lambda t: (*_ownerless_path(t[0], t[1]), _kind(t[0], t[1], t[2], True)[-1]),
    "kept": lambda t: (_kept(t),),
    "person-kind": lambda t: _person_kind(t, False),
    "person-team-kind": lambda t: _person_kind(t, True),
    "person-path": lambda t: _person_path(t, False),
    "person-team-path": lambda t: _person_path(t, True),
}


def _key_of(key_name: str, tools: dict[str, Any]) -> Callable[[str], tuple[str, ...]]:
    """A tool's key by its name, for one API's tools."""
    key = KEYS[key_name]
    return lambda tool: key(tools[tool])


def _named(row: dict[str, Any], tools: dict[str, Any]) -> set[str]:
    wanted = set(row["ops"])
    return {name for name, facts in tools.items() if name in wanted or facts[3] in wanted}


def claim(apis: Iterable[str]) -> None:
    """Per key and part group: named operations, those with a copy the request does not name, and the requests whose
    fused first ten put an unnamed copy above the best named one (where showing one copy loses the answer)."""
    for key_name, key in KEYS.items():
        print(f"## {key_name}")
        for name in apis:
            data = load(name)
            tools = data["tools"]
            groups: dict[tuple[str, ...], list[str]] = collections.defaultdict(list)
            for tool, facts in tools.items():
                groups[key(facts)].append(tool)
            counts: collections.Counter[str] = collections.Counter()
            for row in data["rows"]:
                side = "tuning" if row["part"] in TUNING else "dev"
                named = _named(row, tools)
                counts[side + " named"] += len(named)
                counts[side + " with unnamed copies"] += sum(1 for op in named if set(groups[key(tools[op])]) - named)
                counts[side + " copies named"] += sum(1 for op in named if len(groups[key(tools[op])]) > 1)
                for which in ("bm25", "fused"):
                    top = [tool for tool, _ in row[which][:10]]
                    best = next((tool for tool in top if tool in named), None)
                    if best is None:
                        continue
                    first = next(tool for tool in top if key(tools[tool]) == key(tools[best]))
                    if first not in named:
                        counts[f"{side} {which}: an unnamed copy first"] += 1
            print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


GROUPS = {"tuning": TUNING, "middle": PARTS[PARTS.index("round5"):PARTS.index("round12")], "write": WRITE,
          "confirm": CONFIRM}


def spread(names: list[str], key: Callable[[str], tuple[str, ...]], rule: str) -> list[list[str]]:
    """`names` (best first) re-ordered by `rule`; each entry the names it stands for (one, or a folded group)."""
    if rule == "none":
        return [[name] for name in names]
    seen: dict[tuple[str, ...], int] = {}
    folded: dict[tuple[str, ...], list[str]] = {}
    first: list[list[str]] = []
    later: list[list[str]] = []
    for name in names:
        k = key(name)
        count = seen.get(k, 0)
        seen[k] = count + 1
        if rule == "fold":
            if count:
                folded[k].append(name)
            else:
                folded[k] = [name]
                first.append(folded[k])
            continue
        cap = {"after": 1, "cap1@5": 1, "cap2@5": 2}[rule]
        if count >= cap and (rule == "after" or len(first) < 5):
            later.append([name])
        else:
            first.append([name])
    if rule in ("cap1@5", "cap2@5"):
        place = {name: i for i, name in enumerate(names)}
        return first[:5] + sorted(first[5:] + later, key=lambda entry: place[entry[0]])
    return first + later


RULES = ("none", "after", "cap1@5", "cap2@5", "fold")


def score(apis: Iterable[str], keys: Iterable[str], rules: Iterable[str]) -> None:
    """recall@5 (@10) hits per API and part group, BM25 alone and fused, for each key and rule."""
    apis = list(apis)
    print("| key | rule | list | group | " + " | ".join(apis) + " | all |")
    print("|---|---|---|---|" + "---|" * (len(apis) + 1))
    data = {name: load(name) for name in apis}
    for key_name in keys:
        for rule in rules:
            if rule == "none" and key_name != next(iter(KEYS)):
                continue
            for which in ("bm25", "fused"):
                for group, parts in GROUPS.items():
                    cells = []
                    total = [0, 0, 0]
                    for name in apis:
                        tools = data[name]["tools"]
                        key = _key_of(key_name, tools)
                        hits = [0, 0, 0]
                        for row in data[name]["rows"]:
                            if row["part"] not in parts:
                                continue
                            named = _named(row, tools)
                            entries = spread([tool for tool, _ in row[which]], key, rule)
                            hits[0] += 1
                            for at, k in ((1, 5), (2, 10)):
                                if any(set(entry) & named for entry in entries[:k]):
                                    hits[at] += 1
                        cells.append(f"{hits[1]} ({hits[2]})" if hits[0] else "-")
                        total = [a + b for a, b in zip(total, hits, strict=True)]
                    print(f"| {key_name} | {rule} | {which} | {group} | " + " | ".join(cells)
                          + f" | **{total[1]}** ({total[2]}) of {total[0]} |", flush=True)


class _Named:
    """A tool as `gateway.offer.fusion.fuse` reads it (its name)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


def _model_list(model: list[tuple[str, float]], key: Callable[[str], tuple[str, ...]] | None, variant: str,
                depth: int = 50) -> list[tuple[str, float]]:
    """The model's list as a variant takes it: its first `depth` places (the product), or its places down to its
    `depth`th distinct operation (copies counted once: `floor`), or only the first copy of each (`distinct`)."""
    if variant == "product" or key is None:
        return model[:depth]
    seen: set[tuple[str, ...]] = set()
    kept = []
    for name, cosine in model:
        k = key(name)
        if k in seen:
            if variant == "floor":
                kept.append((name, cosine))
            continue
        if len(seen) == depth:
            break
        seen.add(k)
        kept.append((name, cosine))
    return kept


def refuse(bm25: list[tuple[str, float]], model: list[tuple[str, float]], weight: float) -> list[str]:
    from gateway.offer.fusion import fuse

    named = {name: _Named(name) for name, _ in [*bm25, *model]}
    ranked = fuse([(named[n], s) for n, s in bm25], [(named[n], c) for n, c in model], weight)  # type: ignore[misc]
    return [tool.name for tool, _ in ranked]


FUSIONS = ("product", "floor", "distinct")


def fusions(apis: Iterable[str], keys: Iterable[str], rules: Iterable[str], depths: Iterable[int]) -> None:
    """recall@5 (@10) of the fusion re-done with the model's list per variant (and a rule after it), per API and
    group; the first row checks that the product's fused lists are reproduced."""
    from gateway.config.embeddings_endpoint import SearchEmbeddings

    weight = SearchEmbeddings.model_validate({"kind": "local"}).weight
    apis = list(apis)
    print("| model's list | key | depth | rule | group | " + " | ".join(apis) + " | all |")
    print("|---|---|---|---|---|" + "---|" * (len(apis) + 1))
    data = {name: (load(name), pickle.loads((DATA / f"{name}-model.pickle").read_bytes())) for name in apis}
    same = [0, 0]
    for variant in FUSIONS:
        for key_name in keys if variant != "product" else [next(iter(keys))]:
            for depth in depths:
                for rule in rules:
                    cells: dict[str, list[str]] = {group: [] for group in GROUPS}
                    totals = {group: [0, 0, 0] for group in GROUPS}
                    for name in apis:
                        found, models = data[name]
                        tools = found["tools"]
                        key = _key_of(key_name, tools)
                        hits = {group: [0, 0, 0] for group in GROUPS}
                        for row, model in zip(found["rows"], models, strict=True):
                            ranked = refuse(row["bm25"], _model_list(model, key, variant, depth), weight)
                            if variant == "product" and depth == 50:
                                same[0] += ranked[:10] == [n for n, _ in row["fused"][:10]]
                                same[1] += 1
                            named = _named(row, tools)
                            entries = spread(ranked, key, rule)
                            for group, parts in GROUPS.items():
                                if row["part"] in parts:
                                    hits[group][0] += 1
                                    for at, k in ((1, 5), (2, 10)):
                                        hits[group][at] += any(set(entry) & named for entry in entries[:k])
                        for group in GROUPS:
                            h = hits[group]
                            cells[group].append(f"{h[1]} ({h[2]})" if h[0] else "-")
                            totals[group] = [a + b for a, b in zip(totals[group], h, strict=True)]
                    for group in GROUPS:
                        t = totals[group]
                        shown = key_name if variant != "product" else "-"
                        print(f"| {variant} | {shown} | {depth} | {rule} | {group} | " + " | ".join(cells[group])
                              + f" | **{t[1]}** ({t[2]}) of {t[0]} |", flush=True)
    print(f"\nthe product's first ten reproduced for {same[0]} of {same[1]} requests")


def misses(name: str, parts: Iterable[str], key_name: str) -> None:
    """Each fused miss@5 of `parts`: where each list put the right tool, the fusion's first six (a copy of one above
    marked), then the misses of every group counted by cause, BM25 alone and fused."""
    found = load(name)
    tools = found["tools"]
    key = _key_of(key_name, tools)
    shown = set(parts)
    for row in found["rows"]:
        if row["part"] not in shown:
            continue
        named = _named(row, tools)
        places = {which: next((i for i, (t, _) in enumerate(row[which]) if t in named), None)
                  for which in ("bm25", "fused")}
        if places["fused"] is not None and places["fused"] < 5:
            continue
        print(f"\n[{row['part']}] {row['q']!r} fused {_place(places['fused'])}, BM25 {_place(places['bm25'])}")
        keys = [key(tool) for tool, _ in row["fused"][:6]]
        for i, (tool, _) in enumerate(row["fused"][:6]):
            method, path, summary, _ = tools[tool]
            copy = " [copy]" if keys.index(keys[i]) < i else ""
            print(f"   {i + 1}. {method} {path[:90]} | {summary[:50]}{copy}")
    print()
    for group, group_parts in GROUPS.items():
        counts: collections.Counter[str] = collections.Counter()
        for row in found["rows"]:
            if row["part"] in group_parts:
                counts.update(_causes(row, tools, key))
        print(f"{group}: " + ", ".join(f"{cause} {count}" for cause, count in sorted(counts.items())))


def _place(place: int | None) -> str:
    return "past its 50th" if place is None else f"{place + 1}th"


def _causes(row: dict[str, Any], tools: dict[str, Any], key: Callable[[str], tuple[str, ...]]) -> list[str]:
    """What a request's misses@5 have: where the right tool is, copies of one operation among the first five, and
    whether they stand between it and the fifth place."""
    named = _named(row, tools)
    causes = []
    for which in ("bm25", "fused"):
        ranked = [tool for tool, _ in row[which]]
        place = next((i for i, tool in enumerate(ranked) if tool in named), None)
        causes.append(f"{which} requests")
        if place is not None and place < 5:
            continue
        causes.append(f"{which} misses")
        causes.append(f"{which} misses, right tool " + ("past 50" if place is None else "6-10" if place < 10
                                                        else "11-50"))
        keys = [key(tool) for tool in ranked[:5]]
        copies = len(keys) - len(set(keys))
        if copies:
            causes.append(f"{which} misses, copies among the first five")
            if place is not None and place < 5 + copies:
                causes.append(f"{which} misses, one place per operation would reach it")
    return causes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["collect", "claim", "score", "fusions", "misses"])
    parser.add_argument("--apis", nargs="+")
    parser.add_argument("--keys", nargs="+", choices=list(KEYS))
    parser.add_argument("--rules", nargs="+", choices=RULES)
    parser.add_argument("--depths", nargs="+", type=int, default=[50])
    parser.add_argument("--parts", nargs="+", default=list(WRITE + CONFIRM), help="misses: the parts printed")
    args = parser.parse_args(argv)
    apis = args.apis or [name for name in _apis() if (DATA / f"{name}.pickle").exists()]
    if args.command == "collect":
        collect()
        collect_cosines()
    elif args.command == "claim":
        claim(apis)
    elif args.command == "fusions":
        fusions(apis, args.keys or ["person-path"], args.rules or ["none"], args.depths)
    elif args.command == "misses":
        for name in apis:
            misses(name, args.parts, (args.keys or ["kept"])[0])
    elif args.command == "score":
        score(apis, args.keys or list(KEYS), args.rules or RULES)
    return 0


if __name__ == "__main__":
    sys.exit(main())
