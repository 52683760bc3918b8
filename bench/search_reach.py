"""What reaches a person's words (branch rank48, issue #30): three ideas `round31`'s census points to, each read from
the spec and the language only (never a request set), measured on all of `DEV` (`round12`..`round31`).

    python bench/search_stay.py census --parts round29 round30 round31 > census.txt   # all sixteen APIs
    python bench/search_reach.py groups --census census.txt           # its misses by first cause
    python bench/search_reach.py variants [--ideas ...] [--apis ...] [--share B]   # each idea's lists, as `rank` saves
    python bench/search_reach.py merge --ideas ... --shares B ...        # the lists of processes that shared the apis
    python bench/search_agreement.py judge --base main IDEA ...          # the keep rule; chosen leaving one API out
    OMP_NUM_THREADS=1 python bench/search_reach.py cost [--apis graph here]   # each idea's CPU per search

The ideas (`IDEAS`):

- (1) `neighbours-T`: a request's word that no name or summary of the api says (`OpenedApi.knows` false for the word
  and every alternative the reader gave it: "chargeback", "plate", "tracker") matched also as the api's own word
  nearest to it in the packaged model's space (the int8 model with the shipped delta, each word embedded alone), when
  their cosine is at least `T`. The api's words are the surface words of its operations' names and summaries (one per
  stem: the vocabulary the index keeps, `OpenedApi.vocabulary`), less the language's stop words and generic verbs.
  Both rankers read the widened list.
- (2) `questions-W`: a question of which, what or how many/much ("which addresses does Stripe send our event
  notifications to", "how many phones are enrolled") matches what the operations answer (`answer_text`) at `W`
  instead of main's 0.35; both rankers read it.
- (3) `share-each-G[-fused]`: BM25's first 50 re-ranked, each times its own share of the request's match terms to
  the power `G`, the share read as the index reads a row (`own_shares`: each term, with its alternatives, asked of
  FTS5 over the rows, as `ToolIndex.held` asks it of the first three together); `-fused`: only the list the
  fusion reads (BM25 alone as main's), rank45's `covered-each` (both rankers, bench stems: it lost BM25 alone 3-4 on
  a part) the other way.

`round32` (the lead's judge this session), `round33`, `round34`, `round35`, `round36` and `round37` are never
read: `search_misses`'s assert.
What was measured: bench/README.md, "What reaches a person's words".
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.search_misses import APIS, DATA, Ranked, _folded  # noqa: E402
from bench.support import clocked  # noqa: E402

WORDS = DATA / "words"
"""The words embedded alone, one file a word list: `WORDS / NAME.json` (the word -> its vector's row) and `.npy`."""


class Reranked(Ranked):
    """`search_misses.Ranked` with two hooks: BM25's list changed before both rankers read it (`bm25`), and the list
    the fusion reads changed (`fusable`), BM25 alone left as it is."""

    def search(self) -> list[tuple[list[int], list[int], list[int], set[int]]]:
        from bench.search_misses import _weight
        from gateway.offer.fusion import HELD_PLACES, fuse, trusted
        from gateway.offer.index import ToolIndex
        from gateway.offer.signals import WEIGHTS

        self.searcher = ToolIndex(self.catalog)
        weight = _weight()
        rows = []
        for task, (model, similar, wanted) in zip(self.requests, self.model, strict=True):
            with self.reading(task["q"]):
                ranked = self.bm25(task["q"], [(hit.tool, hit.score) for hit in
                                               self.searcher.search(task["q"], limit=50, apis=[self.api])])
            alone = _folded(ranked, wanted, self.place, self.known)
            held = self.searcher.held(task["q"], [tool for tool, _ in ranked[:HELD_PLACES]])
            fused = _folded(fuse(self.fusable(task["q"], ranked), similar, trusted(weight, held, WEIGHTS.held)),
                            wanted, self.place, self.known)
            rows.append((alone, model, fused, wanted))
        return rows

    def reading(self, query: str) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def bm25(self, query: str, ranked: list[tuple[Any, float]]) -> list[tuple[Any, float]]:
        return ranked

    def fusable(self, query: str, ranked: list[tuple[Any, float]]) -> list[tuple[Any, float]]:
        return ranked


# -- (1) a person's word as the api's nearest -------------------------------------------------------------------


class Embedded:
    """Words embedded alone by the packaged model (`{kind: local}`), kept on disk under `WORDS / label`."""

    def __init__(self, label: str) -> None:
        import numpy

        self.path = WORDS / label
        self.rows: dict[str, int] = {}
        self.vectors = numpy.zeros((0, 384), dtype=numpy.float32)
        if self.path.with_suffix(".json").exists():
            self.rows = json.loads(self.path.with_suffix(".json").read_text())
            self.vectors = numpy.load(self.path.with_suffix(".npy"))

    def of(self, words: Sequence[str]) -> Any:
        """The unit vectors of `words`, one row each (those not kept embedded now, 64 at a time, and saved)."""
        import numpy

        from gateway.config.embeddings_endpoint import SearchEmbeddings
        from gateway.offer import embeddings

        missing = list(dict.fromkeys(word for word in words if word not in self.rows))
        if missing:
            settings = SearchEmbeddings.model_validate({"kind": "local", "timeout": 3600})
            found = [vector for start in range(0, len(missing), 64)
                     for vector in embeddings.embed(settings, missing[start:start + 64])]
            new = numpy.asarray(found, dtype=numpy.float32)
            new /= numpy.maximum(numpy.linalg.norm(new, axis=1, keepdims=True), 1e-12)
            for word in missing:
                self.rows[word] = len(self.rows)
            self.vectors = numpy.concatenate([self.vectors, new])
            WORDS.mkdir(parents=True, exist_ok=True)
            numpy.save(self.path.with_suffix(".npy"), self.vectors)
            self.path.with_suffix(".json").write_text(json.dumps(self.rows))
        return self.vectors[[self.rows[word] for word in words]]


def api_words(tools: Sequence[Any], vocabulary: dict[str, int]) -> list[str]:
    """The api's own words: the surface words of its operations' names and summaries whose stem the index keeps, one
    (the most frequent) per stem, less stop words and generic verbs."""
    from gateway.offer.index_build import summary_of
    from gateway.offer.query import _GENERIC_VERBS, STOP, stems, words

    counted: collections.Counter[str] = collections.Counter()
    for tool in tools:
        counted.update(word for word in f"{words(tool.operation_id or tool.name)} {words(summary_of(tool))}".split()
                       if word.isalpha() and len(word) >= 3 and word not in STOP and word not in _GENERIC_VERBS)
    chosen: dict[str, str] = {}
    for word, _ in counted.most_common():
        stem = next(iter(stems(word)), "")
        if stem in vocabulary:
            chosen.setdefault(stem, word)
    return sorted(chosen.values())


class Neighbours(Reranked):
    """(1) The request's words no name or summary of the api says, matched also as the api's nearest word."""

    least = 0.7

    def reading(self, query: str) -> contextlib.AbstractContextManager[None]:
        return _widened(self, query)

    def nearest(self, word: str) -> str | None:
        """The api's word nearest to `word` in the model's space, if at least `least` close."""
        import numpy

        if not hasattr(self, "own"):
            opened = self.searcher.opened(self.api)
            self.own = api_words(self.tools, opened.vocabulary)
            self.own_vectors = EMBEDDED["api"].of(self.own)
        vector = EMBEDDED["asked"].of([word])[0]
        cosines = self.own_vectors @ vector
        best = int(numpy.argmax(cosines))
        return self.own[best] if float(cosines[best]) >= self.least else None


EMBEDDED: dict[str, Embedded] = {}


@contextlib.contextmanager
def _widened(ranked: Neighbours, query: str) -> Iterator[None]:
    """`index.spelled_out` (the api's reading of a request) widened by `ranked.nearest` while `query` is searched."""
    import dataclasses

    from gateway.offer import index
    from gateway.offer.query import expression_of, stems

    original = vars(index)["spelled_out"]

    def widened(request: Any, abbreviations: Any, knows: Callable[[str], bool]) -> Any:
        request = original(request, abbreviations, knows)
        terms = []
        for alternatives in request.terms:
            word = alternatives[0]
            if word.isalpha() and len(word) >= 4 and not any(knows(a) for a in alternatives):
                near = ranked.nearest(word)
                if near is not None and near not in alternatives:
                    alternatives = (*alternatives, near)
            terms.append(alternatives)
        if terms == request.terms:
            return request
        return dataclasses.replace(request, terms=terms, expression=expression_of(terms),
                                   stems=request.stems | stems(" ".join(a for group in terms for a in group)))

    vars(index)["spelled_out"] = widened  # bench only: the name the search reads a request by, while it searches
    try:
        yield
    finally:
        vars(index)["spelled_out"] = original


# -- (2) a question matched against what the operations answer, weighed more --------------------------------------

QUESTION = re.compile(r"^\s*(?:which|what|whose|how\s+(?:many|much))\b|\bhow\s+many\b", re.IGNORECASE)
"""A question of which, what or how many: what an operation answers (a field) says it more than its name does."""


class Questions(Reranked):
    """(2) `answer_text.WEIGHT` at `weight` while a question (`QUESTION`) is searched."""

    weight = 0.7

    @contextlib.contextmanager
    def reading(self, query: str) -> Iterator[None]:
        from gateway.offer import answer_text

        if not QUESTION.search(query):
            yield
            return
        was = answer_text.WEIGHT
        answer_text.WEIGHT = self.weight
        try:
            yield
        finally:
            answer_text.WEIGHT = was


# -- (3) each of BM25's places by its own share of the request ----------------------------------------------------


class Shares(Reranked):
    """(3) BM25's first 50, each times its own share of the request's match terms to `gain`; in the list the fusion
    reads only (`fused_only`) or in both."""

    gain = 0.3
    fused_only = True

    def bm25(self, query: str, ranked: list[tuple[Any, float]]) -> list[tuple[Any, float]]:
        return ranked if self.fused_only else self.shared(query, ranked)

    def fusable(self, query: str, ranked: list[tuple[Any, float]]) -> list[tuple[Any, float]]:
        return self.shared(query, ranked) if self.fused_only else ranked

    def shared(self, query: str, ranked: list[tuple[Any, float]]) -> list[tuple[Any, float]]:
        return by_own_share(ranked, own_shares(self.searcher, query, [tool for tool, _ in ranked]), self.gain)


def own_shares(searcher: Any, query: str, tools: Sequence[Any]) -> list[float]:
    """Each tool's own share of `query`'s match terms as the index reads its row (`ToolIndex.held` of that tool
    alone): each term, with its alternatives, asked of FTS5 over the tools' rows. Built in the gateway at commit
    9c0ddd5 (`ToolIndex.shares`, from the phrases' kept rows; the same shares), measured there and not kept."""
    from gateway.offer.query import expression_of, read

    terms = read(query).terms
    if not terms or not tools:
        return [1.0] * len(tools)
    opened = searcher.opened(tools[0].api)
    rowids = [opened.rowid_of[tool.name] for tool in tools]
    statement = f"SELECT rowid FROM tools WHERE tools MATCH ? AND rowid IN ({', '.join('?' * len(rowids))})"
    held: collections.Counter[int] = collections.Counter()
    for group in terms:
        held.update(rowid for (rowid,) in opened.connection.execute(statement, (expression_of([group]), *rowids)))
    return [held[rowid] / len(terms) for rowid in rowids]


def by_own_share(bm25: list[tuple[Any, float]], shares: Sequence[float], gain: float) -> list[tuple[Any, float]]:
    """`bm25` with each place's score times its own share (at least `fusion.LEAST_HELD`) to the power `gain`, best
    first again (9c0ddd5's `fusion.by_own_share`)."""
    from gateway.offer.fusion import LEAST_HELD

    scored = [(tool, score * float(max(share, LEAST_HELD) ** gain)) for (tool, score), share in zip(bm25, shares,
                                                                                                     strict=True)]
    return sorted(scored, key=lambda pair: -pair[1])


def _kind(kind: type[Reranked], **fields: Any) -> type[Reranked]:
    return type(kind.__name__, (kind,), fields)


IDEAS: dict[str, type[Reranked]] = {
    "neighbours-0.6": _kind(Neighbours, least=0.6), "neighbours-0.7": _kind(Neighbours, least=0.7),
    "questions-0.7": _kind(Questions, weight=0.7), "questions-1": _kind(Questions, weight=1.0),
    "share-each-0.3-fused": _kind(Shares, gain=0.3), "share-each-0.5-fused": _kind(Shares, gain=0.5),
    "share-each-0.3": _kind(Shares, gain=0.3, fused_only=False)}


def variants(ideas: list[str], names: list[str], share: str = "") -> None:
    """Every `DEV` request of the apis `names` (in that order) ranked under each idea, saved as `search_misses.py
    rank` saves its lists after each api (`ranked-IDEA.json`, or `ranked-IDEA-SHARE.json` for one of several
    processes sharing the apis: `merge` joins them)."""
    import gateway

    EMBEDDED.setdefault("api", Embedded("api"))
    EMBEDDED.setdefault("asked", Embedded(f"asked-{share}" if share else "asked"))  # a file a process
    saved: dict[str, dict[str, list[dict[str, Any]]]] = {idea: {} for idea in ideas}
    for name in names:
        for idea in ideas:
            saved[idea][name] = IDEAS[idea](name).saved()
            (DATA / f"ranked-{idea}{'-' + share if share else ''}.json").write_text(
                json.dumps({"gateway": gateway.__file__, "apis": saved[idea]}))
        print(f"{name}: {len(saved[ideas[0]][name])} requests ({time.strftime('%H:%M:%S')})", flush=True)


def merge(ideas: list[str], shares: list[str]) -> None:
    """`ranked-IDEA.json` made whole from the files of the processes that shared its apis (each api from the first
    file that holds it), in `APIS`' order; an api none holds is an error."""
    import gateway
    from bench.search_agreement import _totals

    saved: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for idea in ideas:
        files = [DATA / f"ranked-{idea}{'-' + share if share else ''}.json" for share in ["", *shares]]
        found = [json.loads(path.read_text())["apis"] for path in files if path.exists()]
        missing = [name for name in APIS if not any(name in apis for apis in found)]
        assert not missing, f"{idea}: no file holds {missing}"
        saved[idea] = {name: next(apis[name] for apis in found if name in apis) for name in APIS}
        (DATA / f"ranked-{idea}.json").write_text(json.dumps({"gateway": gateway.__file__, "apis": saved[idea]}))
    _totals(saved)


_CENSUS_HEAD = re.compile(r"^(\w+) (round\d+) fused (\S+) alone (\S+) model (\S+) held (\S+) (.*)$")


def _place(text: str) -> int:
    return 99 if text == "None" else int(text)


def groups(path: Path) -> None:
    """The census's misses (`search_stay.py census`'s output, saved to `path`) by first cause, in this order: the
    right tool is HERE's or Docker's service check; a Stripe object named by its id's prefix; BM25 alone had it in
    its first five (the fusion lost it); no match term of the request is in any text of the right tool; the right
    tool holds under a third of the request's terms and the fusion's first more (a person's words); else the words
    are read and a neighbour holding as many above. Then where each ranker had them, and what the requests share."""
    import statistics

    lines = path.read_text().splitlines()
    rows: list[dict[str, Any]] = []
    for at, line in enumerate(lines):
        if (found := _CENSUS_HEAD.match(line)) is None:
            continue
        api, _, fused, alone, model, held, query = found.groups()
        want, said, above = (lines[at + k].strip().split(" ", 1)[1] for k in (1, 2, 3))
        terms = [term.rsplit(":", 1)[1] for term in said.split()]
        first = above.split(" | ")[0]
        rows.append({"api": api, "fused": _place(fused), "alone": _place(alone), "model": _place(model),
                     "held": float(held), "query": query, "want": want, "terms": len(terms),
                     "right": sum(1 for where in terms if where != "-"),
                     "first": len(first.split("[", 1)[1].rstrip("]").split()) if "[" in first else 0})

    def cause(row: dict[str, Any]) -> str:
        if row["api"] in ("here", "docker") and re.search(r"/(health|version|_ping)\b", row["want"]):
            return "a service's own check"
        if row["api"] == "stripe" and re.search(r"\b[a-z]{2,5}_[A-Za-z0-9]*[0-9]", row["query"]):
            return "an object named by its id's prefix"
        if row["alone"] <= 5:
            return "BM25 alone had it in its first 5, the fusion lost it"
        if row["right"] == 0:
            return "no word of the request in any text of the right tool"
        if row["right"] * 3 < row["terms"] and row["right"] < row["first"]:
            return "the right tool holds under a third of the request, the fusion's first more"
        return "the words read, a neighbour holding as many or more above"

    counted: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for row in rows:
        counted[cause(row)][row["api"]] += 1
    apis = [name for name in APIS if any(row["api"] == name for row in rows)]
    print(f"| cause | {' | '.join(apis)} | all |")
    for reason, by in counted.items():
        print(f"| {reason} | {' | '.join(str(by.get(name, '-')) for name in apis)} | {sum(by.values())} |")
    print(f"misses {len(rows)}; fused at 6-10 {sum(1 for row in rows if row['fused'] <= 10)}, not in its 50 "
          f"{sum(1 for row in rows if row['fused'] == 99)}; BM25 alone first 5 / 10: "
          f"{sum(1 for row in rows if row['alone'] <= 5)} / {sum(1 for row in rows if row['alone'] <= 10)}; the model "
          f"{sum(1 for row in rows if row['model'] <= 5)} / {sum(1 for row in rows if row['model'] <= 10)}; BM25's "
          f"first three hold under a third {sum(1 for row in rows if row['held'] < 1 / 3)}; questions (`QUESTION`) "
          f"{sum(1 for row in rows if QUESTION.search(row['query']))}; the right tool holds fewer terms than the "
          f"fusion's first {sum(1 for row in rows if row['right'] < row['first'])}, none "
          f"{sum(1 for row in rows if row['right'] == 0)}; the median share of the request's terms the right tool "
          f"holds "
          f"{statistics.median(row['right'] / max(row['terms'], 1) for row in rows):.2f}, the fusion's first "
          f"{statistics.median(row['first'] / max(row['terms'], 1) for row in rows):.2f}")


def cost(names: list[str]) -> None:
    """What each idea adds to a search, the searching thread's CPU (p50 / p95 µs) over every `DEV` request of each
    api: (1) the request's words the api lacks, each embedded alone and its nearest found (the api's words' vectors
    made once); (2) the question read; (3) the shares of BM25's 50 and the re-sort."""
    import statistics

    from bench.search_misses import _catalog, _requests
    from gateway.config.embeddings_endpoint import SearchEmbeddings
    from gateway.offer import embeddings
    from gateway.offer.index import ToolIndex
    from gateway.offer.query import read

    settings = SearchEmbeddings.model_validate({"kind": "local", "timeout": 3600})

    for name in names:
        import numpy

        catalog = _catalog(name)
        api = next(iter(catalog.apis))
        tools = catalog.for_api(api)
        searcher = ToolIndex(catalog)
        opened = searcher.opened(api)
        own = api_words(tools, opened.vocabulary)
        vectors = numpy.asarray(embeddings.embed(settings, own[:2000]), dtype=numpy.float32)

        def near(query: str, opened: Any = opened, vectors: Any = vectors) -> None:
            lacking = [a[0] for a in read(query).terms if a[0].isalpha() and len(a[0]) >= 4
                       and not any(opened.knows(w) for w in a)]
            if lacking:
                for vector in embeddings.embed(settings, lacking):
                    numpy.argmax(vectors @ numpy.asarray(vector, dtype=numpy.float32))

        def shares(query: str, ranked: list[tuple[Any, float]], searcher: Any = searcher) -> None:
            by_own_share(ranked, own_shares(searcher, query, [tool for tool, _ in ranked]), 0.3)

        times: dict[str, list[float]] = collections.defaultdict(list)
        for task in _requests(name):
            query = task["q"]
            ranked = [(hit.tool, hit.score) for hit in searcher.search(query, limit=50, apis=[api])]
            times["(1) the lacking words embedded, their nearest"].append(clocked(near, query))
            times["(2) the question read"].append(clocked(QUESTION.search, query))
            times["(3) the shares of BM25's 50"].append(clocked(shares, query, ranked))
        for step, found in times.items():
            found.sort()
            print(f"{name} ({len(tools)} tools, {len(own)} words, {len(found)} requests) {step}: p50 "
                  f"{statistics.median(found):.1f} p95 {found[int(len(found) * 0.95)]:.1f} µs", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage", choices=["groups", "variants", "merge", "cost"])
    parser.add_argument("--census", type=Path, help="groups: the census's output, saved")
    parser.add_argument("--ideas", nargs="+", choices=list(IDEAS), default=list(IDEAS))
    parser.add_argument("--apis", nargs="+", choices=APIS)
    parser.add_argument("--share", default="", help="variants: this process's share of the apis (its own file)")
    parser.add_argument("--shares", nargs="*", default=[], help="merge: the shares' names")
    args = parser.parse_args(argv)
    if args.stage == "groups":
        groups(args.census)
    elif args.stage == "cost":
        cost(args.apis or ["graph", "here"])
    elif args.stage == "merge":
        merge(args.ideas, args.shares)
    else:
        variants(args.ideas, args.apis or list(APIS), args.share)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
