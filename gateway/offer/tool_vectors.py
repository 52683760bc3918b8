"""The embeddings of one api's tools: kept in one flat float32 array, on disk and in memory, and compared with a query.

One file per spec version, model and tool texts (`$GATEWAY_CACHE_DIR/embeddings`, default
`~/.cache/gateway/embeddings`): a JSON header line (`format`, `count`, `dim`) and the vectors' float32 bytes. A file
that does not read back whole (another format, a count or length that does not match) is computed again.
"""

from __future__ import annotations

import array
import functools
import hashlib
import itertools
import json
import logging
import math
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from operator import mul
from pathlib import Path
from typing import Any

from .cosine_bounds import CosineBounds

logger = logging.getLogger("gateway.search")

_FORMAT = "gateway-embeddings-1"
BOUNDED_FROM = 2048
"""Vectors from which a search bounds the cosines in int8 before computing them (`ToolVectors.bounds`): below, the
full pass reads little, and the integer product's call would cost about what it saves."""


@functools.cache
def _numpy() -> Any:
    """NumPy where it is installed (the local kind brings it; an endpoint need not), imported at the first search
    with embeddings, not with this module: start-up does not pay for it."""
    try:
        import numpy
    except ImportError:  # pragma: no cover - exercised where NumPy is absent
        return None
    return numpy


class ToolVectors:
    """`count` unit vectors of `dim` floats, one per tool in catalog order, in one flat float32 array."""

    __slots__ = ("flat", "count", "dim", "_matrix", "_bounds")

    def __init__(self, flat: array.array[float], count: int, dim: int) -> None:
        self.flat, self.count, self.dim = flat, count, dim
        self._matrix: Any = None
        self._bounds: CosineBounds | bool | None = None

    @classmethod
    def of(cls, vectors: Sequence[Sequence[float]]) -> ToolVectors | None:
        """The unit vectors of `vectors` (None when they differ in length: not worth comparing or keeping)."""
        dim = len(vectors[0]) if vectors else 0
        if any(len(v) != dim for v in vectors):
            return None
        flat = array.array("f")
        for vector in vectors:
            flat.extend(unit(vector))
        return cls(flat, len(vectors), dim)

    def best(self, query: Sequence[float], first: int) -> list[tuple[int, float]]:
        """`best_first`'s first `first` places: with NumPy, found in its arrays, no Python step per place; over many
        vectors, with onnxruntime, the cosines computed only for the vectors that can be among them
        (`gateway.offer.cosine_bounds`)."""
        numpy = _numpy()
        if numpy is None or len(query) != self.dim or first < 1 or first >= self.count:
            return list(itertools.islice(self.best_first(query, first), first))
        query = numpy.asarray(query, dtype=numpy.float32)
        bounds = self.bounds()
        places = None if bounds is None else bounds.candidates(query, first)
        rows = self._rows(numpy)
        negated = -numpy.vecdot(rows if places is None else rows[places], query)  # each row's, as over all of them
        order = _first_of(numpy, negated, first)
        if order is None:  # NaN (a vector of NaN): the walk's own order, where NaN comes last
            return list(itertools.islice(self.best_first(query, first), first))
        values = negated[order]
        if places is not None:
            order = places[order]
        stop = numpy.flatnonzero(values >= 0)  # the walk ends before the first cosine <= 0
        if len(stop):
            order, values = order[:stop[0]], values[:stop[0]]
        return list(zip(order.tolist(), (-values).tolist(), strict=True))

    def bounds(self) -> CosineBounds | None:
        """The int8 bounds on these vectors' cosines (made at the first call), or None: fewer than `BOUNDED_FROM`
        vectors, a vector not finite, or onnxruntime (or onnx) not installed."""
        if self._bounds is None:
            self._bounds = False
            numpy = _numpy()
            if numpy is not None and self.count >= BOUNDED_FROM:
                rows = self._rows(numpy)
                try:
                    import onnxruntime

                    if numpy.isfinite(rows).all():
                        self._bounds = CosineBounds(numpy, onnxruntime, rows)
                except ImportError:  # an endpoint's vectors, without the local kind's libraries: the full pass
                    pass
                except Exception:  # noqa: BLE001 - the full pass answers the same: a search never fails for this
                    logger.warning("tool search: no int8 bounds on %d vectors; every cosine computed", self.count,
                                   exc_info=True)
        return self._bounds if isinstance(self._bounds, CosineBounds) else None

    def _rows(self, numpy: Any) -> Any:
        if self._matrix is None:
            self._matrix = numpy.frombuffer(self.flat, dtype=numpy.float32).reshape(self.count, self.dim)
        return self._matrix

    def best_first(self, query: Sequence[float], first: int = 50) -> Iterator[tuple[int, float]]:
        """`(tool's place, cosine)` of the tools whose vector is alike the unit `query` (cosine above 0), best first,
        ties in catalog order; nothing when its length differs. Lazy: a search reads the first few of 11,000, so with
        NumPy only the `first` best are sorted at first, and the others only if the walk goes past them (a search
        whose `allowed` refuses many of the best)."""
        if len(query) != self.dim:
            return
        numpy = _numpy()
        if numpy is None:
            dim, flat = self.dim, self.flat
            cosines = [sum(map(mul, query, flat[i * dim:(i + 1) * dim])) for i in range(self.count)]
            for place in sorted(range(self.count), key=lambda i: -cosines[i]):
                if cosines[place] <= 0:
                    return
                yield place, cosines[place]
            return
        negated = self._negated(numpy, query)
        for places in _best_first_places(numpy, negated, max(first, 1)):
            for place, negative in zip(places.tolist(), negated[places].tolist(), strict=True):
                if negative >= 0:
                    return
                yield place, -negative

    def _negated(self, numpy: Any, query: Sequence[float]) -> Any:
        """Minus the cosine of each vector with the unit `query` (ascending is best first)."""
        # a dot product per row, not `matrix @ query`: NumPy hands that to its BLAS, whose threads take the other
        # core for a product this small, and keep it busy a while after (the same order, bench/README.md)
        return -numpy.vecdot(self._rows(numpy), numpy.asarray(query, dtype=numpy.float32))


def _first_of(numpy: Any, negated: Any, first: int) -> Any:
    """The places of the `first` smallest of `negated` in ascending order, ties in place order (the beginning of
    `argsort(kind="stable")`), or None when the value at the cut is NaN. The places equal to the value past the
    `first` smallest that still count among them are the first of those equal to it."""
    if first >= len(negated):
        return numpy.argsort(negated, kind="stable")
    cut = numpy.partition(negated, first)[first]
    if cut != cut:
        return None
    below = numpy.flatnonzero(negated < cut)
    return numpy.concatenate((below[numpy.argsort(negated[below], kind="stable")],
                              numpy.flatnonzero(negated == cut)[:first - len(below)]))


def _best_first_places(numpy: Any, negated: Any, first: int) -> Iterator[Any]:
    """The places of `negated` in ascending order, ties in place order (what `argsort(kind="stable")` gives), in two
    steps: the `first` smallest (fewer when values tie at the cut), sorted among themselves, then, if the walk goes
    on, the others (NaN last, as the sort puts it).

    `partition` finds the value past the first `first` without sorting; which of the places equal to it would count
    among the first is its own choice, so they all wait for the second step, where a stable sort gives them in place
    order."""
    if first >= len(negated):
        yield numpy.argsort(negated, kind="stable")
        return
    cut = numpy.partition(negated, first)[first]  # everything below it is among the `first` smallest
    before = negated < cut
    below = numpy.flatnonzero(before)  # in place order, which the stable sort keeps among equal values
    yield below[numpy.argsort(negated[below], kind="stable")]
    rest = numpy.flatnonzero(~before)
    yield rest[numpy.argsort(negated[rest], kind="stable")]


def unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else list(vector)


def unit_float32(vector: Any) -> Any:
    """`as_float32(unit(vector))` of a float32 array, without its list of floats: the norm summed in Python floats
    in the same order, each value divided in float64, then rounded to float32 (the same numbers)."""
    numpy = _numpy()
    values = vector.tolist()
    norm = math.sqrt(sum(map(mul, values, values)))
    return (vector.astype(numpy.float64) / norm).astype(numpy.float32) if norm else vector.astype(numpy.float32)


def as_float32(vector: Sequence[float]) -> Sequence[float]:
    """A request's vector as the cosines take it (`best_first`): a float32 array with NumPy, else as it is."""
    numpy = _numpy()
    return vector if numpy is None else numpy.asarray(vector, dtype=numpy.float32)


def cache_dir() -> Path:
    """Beside the compiled catalogs: `$GATEWAY_CACHE_DIR/embeddings` (default `~/.cache/gateway/embeddings`)."""
    configured = os.environ.get("GATEWAY_CACHE_DIR")
    base = Path(configured) if configured else Path(os.environ.get("XDG_CACHE_HOME") or
                                                    Path.home() / ".cache") / "gateway"
    return base / "embeddings"


def cache_path(identity: str, api: str, content_hash: str, texts: Iterable[str]) -> Path:
    """The file of an api's vectors by the embeddings' `identity` (endpoint or model), for one spec version."""
    digest = hashlib.sha256(f"{_FORMAT}\0{identity}\0{api}\0{content_hash}".encode())
    for text in texts:  # the texts too: a change in how a tool's text is made is a new version
        digest.update(b"\0" + text.encode())
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in api)[:60]
    return cache_dir() / f"{safe}-{digest.hexdigest()[:24]}.f32"


def read(path: Path, count: int) -> ToolVectors | None:
    """The vectors in `path` if it holds `count` of them whole, else None. The body is read straight into the array:
    reading it as bytes first held the vectors three times at the peak (the bytes, the array, the file's buffer),
    and the allocator kept the freed copies (Graph's 16.7 MB of vectors took 49 MB of the process)."""
    try:
        with path.open("rb") as file:
            header = json.loads(file.readline())
            if not isinstance(header, dict):
                return None
            dim = header.get("dim")
            if header.get("format") != _FORMAT or header.get("count") != count or not isinstance(dim, int) or (
                    dim < 1) or os.fstat(file.fileno()).st_size - file.tell() != count * dim * 4:
                return None  # (the size checked first: a header's count and dim allocate nothing until they fit)
            data = array.array("f", [0.0]) * (count * dim)
            if file.readinto(memoryview(data).cast("B")) != count * dim * 4:
                return None
    except (OSError, ValueError):
        return None
    return ToolVectors(data, count, dim)


def write(path: Path, vectors: ToolVectors) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.NamedTemporaryFile("wb", dir=path.parent, delete=False) as file:
            file.write(json.dumps({"format": _FORMAT, "count": vectors.count, "dim": vectors.dim}).encode() + b"\n")
            file.write(memoryview(vectors.flat).cast("B"))  # not a copy of the vectors as bytes
        os.replace(file.name, path)
    except OSError:
        logger.warning("tool search: could not cache embeddings in %s", path.parent, exc_info=True)
