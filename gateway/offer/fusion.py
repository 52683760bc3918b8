"""How tool search fuses BM25's ranking with an embedding model's (`gateway.offer.embeddings.hybrid`): by their scores,
each scaled by its own list.

A tool of either list scores `bm25 / top + weight * (cosine - floor) / (first - floor)`: its BM25 score over that of
BM25's first place (0 where BM25's list lacks it), plus the model's weight (`gateway.search_embeddings.weight`, BM25's
being 1) times its cosine scaled between the model's list's last place (0) and its first (1).

Why scores and not places (reciprocal-rank fusion, before: `weight / (60 + place)` summed): a place says nothing of
how sure a list is. A tool only the model found, its first by a wide margin, scored at most `weight / 61` by place,
below BM25's first 21 however close their scores were: over Graph's 11,422 tools BM25's first fifty are often one
word held by many operations (usage reports, copies of one operation under other paths), each about as good as the
next and the right one not among them. By score the model's confident first comes through there, while a BM25 sure
of its first (far ahead of its second) keeps it. Chosen on requests no model delta was trained on, fitted on one set
and counted on another (bench/README.md, "Fusing by scores"); a learned model of the fusion did no better.

Where BM25's first places hold little of the request (`gateway.offer.index.ToolIndex.held`: its first three, one word
of eight: "switch off his login without deleting it" ranks three DELETEs first on "deleting"), the model's weight is
divided by that share to a small power (`trusted`), so that its confident first is not buried under a BM25 that read
one word; where they hold every word, nothing changes. Measured through this path on the development requests
(bench/README.md, "The fusion's trust in BM25, in the gateway").

A place's BM25 score is at most the one above it: the index's own order (its cap on one family among the first five
places) stands where it put a lower score first.
"""

from __future__ import annotations

from operator import itemgetter

from ..catalog import Tool

Ranked = list[tuple[Tool, float]]

HELD_PLACES = 3
"""BM25's first places whose share of the request the fusion reads: one place alone lost HERE's service checks (a
check lifted first holds few of the request's words), three hold the service's words too."""
LEAST_HELD = 0.05
"""The least share read: where BM25's first places hold no word of the request the model's weight is multiplied by
at most `LEAST_HELD ** -gain`."""


def trusted(weight: float, held: float, gain: float) -> float:
    """The model's `weight` in the fusion where BM25's first places hold the share `held` of the request: divided by
    `held ** gain` (unchanged where they hold all of it)."""
    return weight / float(max(held, LEAST_HELD) ** gain)  # a float to a float power: typed Any


def fuse(bm25: Ranked, similar: Ranked, weight: float = 1.0) -> Ranked:
    """`bm25` (BM25's ranking, best first) and `similar` (the embeddings', best first, with their cosines) as one
    ranking, best first, scored as the module says."""
    scores: dict[str, float] = {}
    tools: dict[str, Tool] = {}
    if bm25:
        top = above = bm25[0][1]
        for tool, score in bm25:
            above = min(score, above)
            scores[tool.name] = above / top if top > 0 else 0.0
            tools[tool.name] = tool
    if similar:
        first, floor = similar[0][1], similar[-1][1]
        span = first - floor
        for tool, cosine in similar:  # a list of one tool, or of one cosine: each is as good as the first
            share = weight * ((cosine - floor) / span if span > 0 else 1.0)
            scores[tool.name] = scores.get(tool.name, 0.0) + share
            tools[tool.name] = tool
    return [(tools[name], round(score, 6)) for name, score in sorted(scores.items(), key=itemgetter(1), reverse=True)]
