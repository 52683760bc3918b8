"""Whether tool search's best answer is close to the request at all, on a scale its list does not set.

A search answers up to `limit` operations whatever the API holds, and its `score` is relative (BM25's over its own
first place; fused, the model's cosine scaled between its list's first and last: `gateway.offer.fusion`), so a
request the API cannot serve ("book me a flight" against GitHub) is answered as confidently as one it can. With the
packaged local model, fine-tuned (`search_embeddings: {kind: local}`, its default), the raw cosine between the
request's embedding and the closest tool's (the embeddings' first place, before any scaling) is such a measure: under
`WEAK_COSINE` the answer is `weak` (nothing close was found; its tools are the closest), else `close`.

The threshold was measured for one delta (`MEASURED_DELTA`, delta32: Graph's sets drawn twice an epoch, trained up
to `round32`) on requests it never saw, counted directly: the answered requests of `round33` and `round34` (sixteen
APIs). An earlier rule (branch rank50) read the cost off delta32's training requests through an earlier delta's gap,
and it under-read what new requests get. By a rule written before its figures (branch rank51) the threshold is the
highest at which, on each of the two sets alone and on both together, at most 2% of the answered requests are flagged
pooled and at most 5% of every API's (about one flag an API a set; Adyen Management's sets it). It was then counted on
requests the API searched has no answer for (another API's, and off-topic ones): bench/search_direct.py,
bench/search_match.py, bench/README.md (branches match37, ship49, rank50, rank51). Nothing is said (None) where no
threshold holds: BM25 alone (no share of the request's words, weighed by the index's IDF, told unanswerable requests
apart at that cost: same bench), an embeddings endpoint or another local model (cosines on scales of their own), the
untuned model, another delta, and a searched scope smaller than any API measured (`MIN_SCOPE_TOOLS`).
"""

from __future__ import annotations

from typing import Literal

from ..config.embeddings_endpoint import PACKAGED_MODEL, SearchEmbeddings, packaged_delta_sha256
from .fusion import Ranked

Match = Literal["weak", "close"]

WEAK_COSINE = 0.266
"""The packaged fine-tuned model's cosine under which the closest tool is not close (bench/search_direct.py)."""
MEASURED_DELTA = "bb95d761cb26fbf7370932d8e1d4e8da98ee650b58a77ea15760b5fc892d038a"
"""The sha256 of the packaged delta (gateway/offer/minilm_lora.npz) `WEAK_COSINE` was measured for: a delta trained
again moves every cosine, so the two are set together (a test fails when they part; with another delta the search
says nothing)."""
MIN_SCOPE_TOOLS = 100
"""The fewest tools the searched scope (the agent's tools searched) holds for the search to say anything: the
smallest API measured holds 105, and over a handful of tools the closest's cosine runs lower than over an API's
worth (a nine-operation spec's right first answer was marked weak), a scale nobody measured."""


def calibrated(settings: SearchEmbeddings | None) -> bool:
    """Whether the fused search's cosines have a measured threshold: the packaged model, fine-tuned with the delta
    measured (`MEASURED_DELTA`), unadapted."""
    return (settings is not None and settings.kind == "local" and settings.model == PACKAGED_MODEL
            and settings.tuned and not settings.adapter and packaged_delta_sha256() == MEASURED_DELTA)


def closeness(settings: SearchEmbeddings | None, similar: Ranked | None, scope: int) -> Match | None:
    """`weak` or `close` by the embeddings' first cosine (`similar`, best first, raw) over a searched scope of `scope`
    tools; None where not measured (under `MIN_SCOPE_TOOLS` tools, or not `calibrated`)."""
    if not similar or scope < MIN_SCOPE_TOOLS or not calibrated(settings):
        return None
    return "weak" if similar[0][1] < WEAK_COSINE else "close"
