"""Which tools can be among a request's nearest, found from an int8 copy of their vectors: bounds on every cosine
without reading the float32 vectors.

The cosines over Graph's 11,422 tools read 17.5 MB of float32 vectors at each search, and push out of the CPU's
caches what the model and the index read next. Here an int8 copy (4.4 MB, each row scaled by its own largest value)
is multiplied with the request rounded to 8 bits by onnxruntime's integer kernel (`MatMulInteger`, exact in int32).
What each side lost to the rounding is known (each row's, measured when the copy is made; the request's, when it is
rounded), so each cosine is known within a bound (Cauchy-Schwarz on the two rounding errors, plus `MARGIN` for the
float32 sums of the exact pass). A tool whose upper bound is under the `first`-th best lower bound cannot be among the
first `first`; the others (a few hundred) get their exact float32 cosines, computed as the full pass computes them,
so the places and their order are the full pass's (tests/test_search_local_model.py compares the two).
"""

from __future__ import annotations

from typing import Any

MARGIN = 1e-4
"""Added to every bound: the float32 sum of 384 products is within about 2.3e-5 of the exact cosine (384 times
float32's epsilon over 2), the float64 arithmetic here within 1e-15."""
_LEVELS = 127
_CHUNK = 1024
_UNIT = 1 + 1e-6
"""The longest request bounded: a unit vector in float32 (longer ones, none of tool search's, are not bounded)."""
_REACHES = (0.2, 0.4)
"""How far under the best lower bound the first-th is looked for first (cosines: the first 50 are mostly within 0.2)."""


class CosineBounds:
    """Bounds on the cosines of a unit request with each row of a float32 matrix (`candidates`)."""

    def __init__(self, numpy: Any, onnxruntime: Any, matrix: Any) -> None:
        """Parameters: matrix: the float32 rows, finite (`ToolVectors`); numpy and onnxruntime, imported."""
        self.count = len(matrix)
        self._scale = numpy.empty(self.count)
        self._error = numpy.empty(self.count)
        """How far each row's int8 copy is from it (the length of the difference)."""
        self._length = numpy.empty(self.count)
        """The length of each row's int8 copy."""
        steps = numpy.empty(matrix.shape[::-1], dtype=numpy.int8)
        """The int8 rows, one per column (the product's layout): onnxruntime reads them where they are, so they are
        kept as long as the session is."""
        for start in range(0, self.count, _CHUNK):  # in float64 a chunk at a time: not three copies of Graph's
            rows = matrix[start:start + _CHUNK].astype(numpy.float64)
            scale = numpy.abs(rows).max(axis=1) / _LEVELS
            rounded = numpy.rint(rows / numpy.where(scale > 0, scale, 1.0)[:, None])
            steps[:, start:start + _CHUNK] = rounded.T
            rounded *= scale[:, None]
            self._scale[start:start + _CHUNK] = scale
            self._error[start:start + _CHUNK] = numpy.linalg.norm(rows - rounded, axis=1)
            self._length[start:start + _CHUNK] = numpy.linalg.norm(rounded, axis=1)
        self._reach = self._error * _UNIT
        """What each row's rounding can move its cosine with a request of length up to `_UNIT`."""
        self._longest = float(self._length.max(initial=0.0))
        self._numpy = numpy
        self._steps = steps
        self._session = _integer_product(onnxruntime, steps)

    def candidates(self, query: Any, first: int) -> Any:
        """The places (ascending) of every row whose cosine with `query` (a float32 array) can be among the `first`
        best: a superset of the first `first` of the full pass, ties included; None when nothing can be bounded."""
        numpy = self._numpy
        request = query.astype(numpy.float64)
        scale = float(numpy.abs(request).max()) / _LEVELS
        length = float(numpy.linalg.norm(request))
        if not 0 < scale < float("inf") or not length <= _UNIT or not 0 < first < self.count:
            return None  # (a request longer than a unit one: the rows' errors are bounded for a unit one)
        steps = numpy.rint(request / scale)
        # the request's rounding, bounded for every row at once by the longest int8 row (its products with each)
        spread = float(numpy.linalg.norm(request - steps * scale)) * self._longest + MARGIN
        [[products]] = self._session.run(None, {"request": (steps + _LEVELS + 1).astype(numpy.uint8)[None]})
        approximate = products * self._scale
        approximate *= scale
        # each cosine is within `self._reach + spread` of its approximation: the best lower bounds and the upper ones
        return numpy.flatnonzero(approximate + self._reach >= _first_largest(numpy, approximate - self._reach, first)
                                 - 2 * spread)


def _first_largest(numpy: Any, values: Any, first: int) -> float:
    """The `first`-th largest of `values`: partitioned among the values near the largest when `first` of them are
    (all the largest are then among them), else among all."""
    top = float(values.max())
    for reach in _REACHES:
        near = values[values >= top - reach]
        if len(near) >= first:
            return float(numpy.partition(near, len(near) - first)[len(near) - first])
    return float(numpy.partition(values, len(values) - first)[len(values) - first])


def _integer_product(onnxruntime: Any, steps: Any) -> Any:
    """An onnxruntime session multiplying a request (uint8, zero point 128) with the int8 rows (`steps`, [dim, count],
    which the caller keeps while the session lives), in int32.

    The rows are handed to the session as they are (`add_external_initializers`), not written into the model: the
    model's bytes, their parsed copy and the session's own copy of them held Graph's 4.4 MB of rows about five
    times (38 MiB more for the process, against 15 MiB this way; bench/README.md)."""
    from onnx import TensorProto, helper

    dim, count = steps.shape
    outside = TensorProto(name="rows", data_type=TensorProto.INT8, dims=[dim, count],
                          data_location=TensorProto.EXTERNAL)
    for key, value in (("location", "rows"), ("offset", "0"), ("length", str(steps.nbytes))):
        outside.external_data.add(key=key, value=value)
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["request", "rows", "zero"], ["products"])], "cosine_bounds",
        [helper.make_tensor_value_info("request", TensorProto.UINT8, [1, dim])],
        [helper.make_tensor_value_info("products", TensorProto.INT32, [1, count])],
        [helper.make_tensor("zero", TensorProto.UINT8, [], [_LEVELS + 1]), outside])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1  # one product of a request: the searching thread's, no pool beside it
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_external_initializers(["rows"], [onnxruntime.OrtValue.ortvalue_from_numpy(steps)])
    return onnxruntime.InferenceSession(model.SerializeToString(), sess_options=options,
                                        providers=["CPUExecutionProvider"])
