"""Pseudo-relevance feedback measured on the development data (branch rank42, issue #30): the first places of a list
taken as relevant, to reach the words a request does not say.

    python bench/search_feedback.py rocchio --source model fused --k 1 3 5 --b 0.1 0.3 0.5 1
    python bench/search_feedback.py rm3 [--feedback alone fused] --k 2 3 5 --terms 5 --weight 0.05 0.1 0.2
    python bench/search_misses.py table --labels lift rocchio-fused-k3-b0.3 ...   # the rule, chosen leaving one out
    OMP_NUM_THREADS=1 python bench/search_feedback.py cost --apis graph github --k 3 --terms 5   # CPU per search

(a) **Rocchio on the model's side**: the request's vector `q` moved toward the mean of the first `k` tools' vectors of
the model's list (`--source model`) or of the fused one (`fused`), `q' = q + b * mean`, before the model's ranking;
the fusion then as the product fuses (`gateway.offer.fusion.fuse`). The tools' vectors are unit, so a tool's
`q'.t = q.t + b * mean.t`: the saved cosines (`search_misses.py prepare`) plus one product with the tools' matrix;
`|q'|` scales every tool alike, which neither the model's order nor the fusion's scaling (between the list's last
and first) sees. BM25 alone does not change. The tools' vectors are the gateway's own cache of each delta (the one
every part is measured with, `search_misses.MODEL_OF`), read by its identity; a delta not cached is an error, never
computed here with another delta in place.

(b) **RM3 on BM25's side**: the first `k` tools of BM25's own list, their terms (the index's, stemmed: FTS5's
`fts5vocab`) weighted by their share of each tool's row (columns weighted as the search weighs them) times their
idf over the api's tools, the request's own out; the best `terms` of them as phrases ORed, a second match whose BM25
times `weight` is added to the first's before the search's signals (the index's kept scores of each phrase,
`phrase_scores.added`), so a tool only the expansion matches may become a candidate. Both rankers read the
expanded list; with `--feedback fused` the fusion's first `k` feed the expansion (the model's words into BM25's), the
fusion reads the expanded list and BM25 alone, which has no model, is unchanged.

What was measured, and why nothing of it is kept: bench/README.md, "The near misses by feedback from the first
places".

Each variant's lists are saved as `search_misses.py rank` saves them (`DATA / ranked-LABEL.json`), so `table` counts
them, finds each API's largest loss on a part, and chooses leaving one API out. `DEV` is `search_misses.DEV`
(`round12`..`round26`); `round27`, `round28`, `round29`, `round30`, `round31`,
`round32`, `round33`, `round34`, `round35`, `round36` and `round37` are never read.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
COMMON = 0.05
"""RM3's expansion reads no term of more than this share of the api's tools."""
sys.path.insert(0, str(ROOT))

from bench import search_misses  # noqa: E402
from bench.search_misses import APIS, DATA, DELTAS, MODEL_OF, _first, _folded, _weight  # noqa: E402


def _vectors(label: str, catalog: Any, api: str) -> Any:
    """The unit vectors of the api's tools as the gateway cached them for delta `label` (one row a tool)."""
    import numpy

    from gateway.config.embeddings_endpoint import SearchEmbeddings, packaged_delta_sha256
    from gateway.offer import embeddings

    settings = SearchEmbeddings.model_validate({"kind": "local"})
    identity = settings.identity.replace(packaged_delta_sha256()[:16], DELTAS[label][:16])
    tools = catalog.for_api(api)
    spec = catalog.apis[api]
    path = embeddings.cache_path(identity, api, spec.content_hash, [embeddings.embedding_text(t) for t in tools])
    known = embeddings.read(path, len(tools))
    assert known is not None, f"{api}: no cached vectors for {label} ({path})"
    return numpy.frombuffer(known.flat, dtype=numpy.float32).reshape(known.count, known.dim)


class Api:
    """One API's `DEV` requests: BM25's list of each (this tree), the model's cosines, the tools' vectors per delta."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ranked = search_misses.Ranked(name)  # BM25's lists, the model's first 50, the right tools
        self.tools = self.ranked.tools
        self.cosines = search_misses._cosines(name)
        self.vectors = {label: _vectors(label, self.ranked.catalog, self.ranked.api)
                        for label in {MODEL_OF[task["part"]] for task in self.ranked.requests}}
        self.bm25: list[list[tuple[Any, float]]] = []
        from gateway.offer.index import ToolIndex

        searcher = ToolIndex(self.ranked.catalog)
        for task in self.ranked.requests:
            hits = searcher.search(task["q"], limit=50, apis=[self.ranked.api])
            self.bm25.append([(hit.tool, hit.score) for hit in hits])


def _row(task: dict[str, Any], alone: list[int], model: list[int], fused: list[int], wanted: set[int],
         tools: list[Any]) -> dict[str, Any]:
    return {"part": task["part"], "q": task["q"], "alone": _first(alone, wanted), "model": _first(model, wanted),
            "fused": _first(fused, wanted), "alone3": [tools[t].name for t in alone[:3]],
            "fused3": [tools[t].name for t in fused[:3]]}


def rocchio(apis: list[Api], source: str, k: int, b: float) -> dict[str, list[dict[str, Any]]]:
    """Every request's lists with the model's query moved `b` toward the mean of the first `k` of `source`."""
    import numpy

    from gateway.offer.fusion import fuse

    weight = _weight()
    saved: dict[str, list[dict[str, Any]]] = {}
    for api in apis:
        r = api.ranked
        rows = saved[api.name] = []
        for at, task in enumerate(r.requests):
            cosine = api.cosines[at]
            best, similar, wanted = r.model[at]
            bm25 = api.bm25[at]
            if source == "model":
                first = best[:k]
            else:
                first = [r.place[tool.name] for tool, _ in fuse(bm25, similar, weight)[:k]]
            matrix = api.vectors[MODEL_OF[task["part"]]]
            moved = cosine + b * (matrix @ matrix[first].mean(axis=0))
            order = numpy.argsort(-moved, kind="stable")[:50]
            similar2 = [(api.tools[t], float(moved[t])) for t in order.tolist()]
            alone = _folded(bm25, wanted, r.place, r.known)
            fused = _folded(fuse(bm25, similar2, weight), wanted, r.place, r.known)
            rows.append(_row(task, alone, order.tolist(), fused, wanted, api.tools))
    return saved


class _Terms:
    """An api's index read as terms: each tool's weighted term counts and each term's idf (`fts5vocab`)."""

    def __init__(self, connection: Any) -> None:
        from gateway.offer.index_build import COLUMN_WEIGHTS

        weights = list(COLUMN_WEIGHTS.values())
        connection.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.feedback_instance "
                           "USING fts5vocab(main, tools, instance)")
        connection.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.feedback_row USING fts5vocab(main, tools, row)")
        columns = [row[1] for row in connection.execute("PRAGMA table_info(tools)").fetchall()]
        weight_of = {column: weights[at] if at < len(weights) else 0.0 for at, column in enumerate(columns)}
        self.counts: dict[int, dict[str, float]] = collections.defaultdict(lambda: collections.defaultdict(float))
        for term, doc, column in connection.execute("SELECT term, doc, col FROM temp.feedback_instance"):
            self.counts[doc][term] += weight_of.get(column, 0.0)
        size = max(len(self.counts), 1)
        # a term of more than `COMMON` of the tools is no distinctive word of a few ("get", "list", "all")
        self.idf = {term: math.log((size - docs + 0.5) / (docs + 0.5) + 1)
                    for term, docs in connection.execute("SELECT term, doc FROM temp.feedback_row")
                    if docs <= COMMON * size}
        # the request's own terms as the index tokenizes them (FTS5's porter: "statuses" -> "statu")
        connection.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.feedback_request USING fts5(text, "
                           "tokenize = 'porter unicode61')")
        connection.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.feedback_request_terms "
                           "USING fts5vocab(temp, feedback_request, row)")
        self._connection = connection

    def own(self, text: str) -> set[str]:
        self._connection.execute("DELETE FROM temp.feedback_request")
        self._connection.execute("INSERT INTO temp.feedback_request VALUES (?)", (text,))
        return {term for term, in self._connection.execute("SELECT term FROM temp.feedback_request_terms")}

    def expansion(self, rowids: list[int], own: set[str], terms: int, least: int = 1) -> list[str]:
        """The `terms` best terms of the tools `rowids` (each tool's share of the term times its idf, summed), held by
        at least `least` of them (2: what the first places agree on, `search_agreement.py`), the request's own and
        the common ones out."""
        score: dict[str, float] = collections.defaultdict(float)
        held: collections.Counter[str] = collections.Counter()
        for rowid in rowids:
            counts = self.counts.get(rowid)
            if not counts:
                continue
            total = sum(counts.values()) or 1.0
            for term, count in counts.items():
                if term not in own and term in self.idf and term.isalpha() and len(term) > 2:
                    held[term] += 1
                    score[term] += count / total * self.idf[term]
        return sorted((term for term in score if held[term] >= least),
                      key=lambda term: -score[term])[:terms]  # ties in the order met


class Expanded:
    """While entered, every search of `gateway.offer.index` adds `weight` times the BM25 of `terms` (phrases ORed) to
    the first match's before the signals (the index's kept scores, `phrase_scores.added`: a tool only the expansion
    matches may become a candidate); no `terms`, the search as it is. The index's `phrase_scored` is replaced meanwhile
    (this process only)."""

    def __init__(self, weight: float) -> None:
        self.weight = weight
        self.terms: list[str] = []

    def __enter__(self) -> Expanded:
        from gateway.offer import index
        from gateway.offer.phrase_scores import added

        self._original = original = index.phrase_scored

        def scored(opened: Any, expression: str, answered: bool) -> Any:
            first = original(opened, expression, answered)
            if first is None or not self.terms:
                return first
            return added(first, opened.phrases.scored(" OR ".join(f'"{term}"' for term in self.terms)), self.weight)

        index.phrase_scored = scored
        return self

    def __exit__(self, *_: object) -> None:
        from gateway.offer import index

        index.phrase_scored = self._original


def spread(times: list[float]) -> str:
    """The p50 / p95 of `times` (seconds) in ms."""
    import statistics

    ordered = sorted(times)
    return f"{statistics.median(ordered) * 1e3:.3f} / {ordered[int(0.95 * (len(ordered) - 1))] * 1e3:.3f}"


def rm3(apis: list[Api], k: int, terms: int, weight: float, source: str = "alone") -> dict[str, list[dict[str, Any]]]:
    """Every request searched again with the first `k` tools' best `terms` terms as a second match, its BM25 times
    `weight` added to the first's: the first of BM25's own list (`source` "alone": both rankers read the expanded
    list), or of the fused one (`fused`: the model's words feed BM25's; BM25 alone, which has no model, unchanged)."""
    from gateway.offer import index
    from gateway.offer.fusion import fuse

    fusion_weight = _weight()
    saved: dict[str, list[dict[str, Any]]] = {}
    with Expanded(weight) as expanding:  # the request's expansion while it is searched again
        for api in apis:
            r = api.ranked
            searcher = index.ToolIndex(r.catalog)
            opened = searcher.opened(r.api)
            read = _Terms(opened.connection)
            rowid_of = {id(facts.tool): rowid for rowid, facts in enumerate(opened.facts, 1)}
            rows = saved[api.name] = []
            for at, task in enumerate(r.requests):
                _, similar, wanted = r.model[at]
                bm25 = api.bm25[at]
                first = bm25[:k] if source == "alone" else fuse(bm25, similar, fusion_weight)[:k]
                expanding.terms = read.expansion([rowid_of[id(tool)] for tool, _ in first], read.own(task["q"]),
                                                 terms)
                hits = searcher.search(task["q"], limit=50, apis=[r.api])
                expanding.terms = []
                second = [(hit.tool, hit.score) for hit in hits]
                alone = _folded(second if source == "alone" else bm25, wanted, r.place, r.known)
                fused = _folded(fuse(second, similar, fusion_weight), wanted, r.place, r.known)
                rows.append(_row(task, alone, r.model[at][0], fused, wanted, api.tools))
    return saved


def cost(apis: list[Api], k: int, terms: int) -> None:
    """What each costs a search, the searching thread's CPU (p50 / p95, ms) over every request of each api: the
    model's side, one more product of the tools' matrix (the mean of `k` rows, times the matrix); BM25's side, the
    search as it is, and with RM3: the search, the expansion chosen from its first `k`, and the search again with the
    expansion's `terms` phrases (the request's own phrases kept from a search before, as a busy gateway keeps them)."""
    from gateway.offer import index

    for api in apis:
        r = api.ranked
        moved: list[float] = []
        plain: list[float] = []
        expanded: list[float] = []
        for at, task in enumerate(r.requests):
            matrix = api.vectors[MODEL_OF[task["part"]]]
            started = time.thread_time()
            matrix @ matrix[r.model[at][0][:k]].mean(axis=0)
            moved.append(time.thread_time() - started)
        searcher = index.ToolIndex(r.catalog)
        opened = searcher.opened(r.api)
        read = _Terms(opened.connection)
        rowid_of = {id(facts.tool): rowid for rowid, facts in enumerate(opened.facts, 1)}
        with Expanded(0.1) as expanding:
            for task in r.requests:
                searcher.search(task["q"], limit=50, apis=[r.api])  # its phrases kept
                started = time.thread_time()
                hits = searcher.search(task["q"], limit=50, apis=[r.api])
                plain.append(time.thread_time() - started)
                expanding.terms = read.expansion([rowid_of[id(hit.tool)] for hit in hits[:k]], read.own(task["q"]),
                                                 terms)
                searcher.search(task["q"], limit=50, apis=[r.api])
                expanding.terms = []
                expanded.append(time.thread_time() - started)
        print(f"{api.name} ({len(api.tools)} tools, {len(r.requests)} requests, load {os.getloadavg()[0]:.1f}): "
              f"Rocchio's product {spread(moved)} ms; BM25's search {spread(plain)} ms, with RM3's second pass "
              f"{spread(expanded)} ms", flush=True)


def _save(label: str, saved: dict[str, list[dict[str, Any]]]) -> None:
    import gateway

    (DATA / f"ranked-{label}.json").write_text(json.dumps({"gateway": gateway.__file__, "apis": saved}))
    alone = sum(1 for rows in saved.values() for row in rows if row["alone"] is not None and row["alone"] <= 5)
    fused = sum(1 for rows in saved.values() for row in rows if row["fused"] is not None and row["fused"] <= 5)
    print(f"{label}: alone {alone}, fused {fused} ({time.strftime('%H:%M:%S')}, load {os.getloadavg()[0]:.1f})",
          flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["rocchio", "rm3", "cost"])
    parser.add_argument("--source", nargs="+", choices=["model", "fused"], default=["fused"])
    parser.add_argument("--feedback", nargs="+", choices=["alone", "fused"], default=["alone"],
                        help="rm3: the list whose first tools feed the expansion")
    parser.add_argument("--k", nargs="+", type=int, default=[3])
    parser.add_argument("--b", nargs="+", type=float, default=[0.3])
    parser.add_argument("--terms", nargs="+", type=int, default=[5])
    parser.add_argument("--weight", nargs="+", type=float, default=[0.1])
    parser.add_argument("--apis", nargs="+", choices=APIS, default=list(APIS))
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    apis = [Api(name) for name in args.apis]
    print(f"lists ready ({time.strftime('%H:%M:%S')})", flush=True)
    if args.stage == "cost":
        cost(apis, args.k[0], args.terms[0])
    elif args.stage == "rocchio":
        for source in args.source:
            for k in args.k:
                for b in args.b:
                    _save(f"rocchio-{source}-k{k}-b{b:g}", rocchio(apis, source, k, b))
    else:
        for source in args.feedback:
            for k in args.k:
                for terms in args.terms:
                    for weight in args.weight:
                        label = f"rm3-k{k}-t{terms}-w{weight:g}" + ("" if source == "alone" else f"-{source}")
                        _save(label, rm3(apis, k, terms, weight, source))
    return 0


if __name__ == "__main__":
    sys.exit(main())
