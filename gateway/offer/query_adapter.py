"""`adapter: true` of `gateway.search_embeddings: {kind: local}`: a request's embedding moved toward the words tools
are written in, before it is compared with them.

A request says "take the final amount from the hotel hold", a tool says "capture a payment intent": the packaged
model places the two apart. The adapter is one learned matrix W (d x d, float16 in `query_adapter.npy` beside this
module): a request's unit vector q becomes `normalise(q + q W)`; the tools' vectors are left as they are (their
cache stays valid). W was trained on the model's fp32 vectors of labelled requests of six APIs and of operations'
descriptions from other specs (`python bench/search_adapter.py train`); the int8 file the gateway runs gives vectors
within rounding of those, and the adapter the same gain on them (bench/README.md, "A learned query adapter"). Any other
model's vectors mean something else, the fine-tuned packaged model's too (`tuned`, gateway.offer.minilm_lora): it
is only offered with the packaged model as released (`tuned: false`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MATRIX = Path(__file__).with_name("query_adapter.npy")


@functools.cache
def _matrix() -> Any:
    import numpy

    return numpy.load(MATRIX).astype(numpy.float32)


def adapt(vector: Sequence[float]) -> list[float]:
    """The unit request vector `vector` moved by the learned matrix, as a unit vector (unchanged when its length is
    not the matrix's: another model's vector)."""
    import numpy

    matrix = _matrix()
    query = numpy.asarray(vector, dtype=numpy.float32)
    if query.shape != (matrix.shape[0],):
        return list(vector)
    moved = query + query @ matrix
    norm = float(numpy.linalg.norm(moved))
    moved_list: list[float] = (moved / norm).tolist() if norm else query.tolist()
    return moved_list
