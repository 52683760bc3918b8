"""Whether tool search's best answer is close to the request at all, on a scale its list does not set.

A search answers up to `limit` operations whatever the API holds, and its `score` is relative (BM25's over its own
first place; fused, the model's cosine scaled between its list's first and last: `gateway.offer.fusion`), so a
request the API cannot serve ("book me a flight" against GitHub) is answered as confidently as one it can. With the
packaged local model, fine-tuned (`search_embeddings: {kind: local}`, its default), the raw cosine between the
request's embedding and the closest tool's (the embeddings' first place, before any scaling) is such a measure: under
`WEAK_COSINE` the answer is `weak` (nothing close was found; its tools are the closest), else `close`.

The threshold was chosen on development requests (`round12`..`round20` of sixteen APIs): the highest that marks at
most 2% of the requests whose right tool was among the first five, on every API; then counted on `round21` and
`round22`, and on requests the API searched has no answer for (another API's, and off-topic ones):
bench/search_match.py, bench/README.md (branch match37). Nothing is said (None) where no threshold holds: BM25
alone (no share of the request's words, weighed by the index's IDF, told unanswerable requests apart at that cost:
same bench), an embeddings endpoint or another local model (cosines on scales of their own), the untuned model.
"""

from __future__ import annotations

from typing import Literal

from ..config.embeddings_endpoint import PACKAGED_MODEL, SearchEmbeddings
from .fusion import Ranked

Match = Literal["weak", "close"]

WEAK_COSINE = 0.288
"""The packaged fine-tuned model's cosine under which the closest tool is not close (bench/search_match.py)."""


def calibrated(settings: SearchEmbeddings | None) -> bool:
    """Whether the fused search's cosines have a measured threshold: the packaged model, fine-tuned, unadapted."""
    return (settings is not None and settings.kind == "local" and settings.model == PACKAGED_MODEL
            and settings.tuned and not settings.adapter)


def closeness(settings: SearchEmbeddings | None, similar: Ranked | None) -> Match | None:
    """`weak` or `close` by the embeddings' first cosine (`similar`, best first, raw); None where not measured."""
    if not similar or not calibrated(settings):
        return None
    return "weak" if similar[0][1] < WEAK_COSINE else "close"
