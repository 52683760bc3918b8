"""The packaged model's fine-tuning: a LoRA delta added to its weights before they are quantized for int8 kernels.

all-MiniLM-L6-v2 was fine-tuned for tool search with LoRA (rank 16 on every attention and feed-forward matrix of
its six layers; `python bench/search_finetune.py train`, bench/README.md "Fine-tuning the local model"). The file
(`gateway.config.embeddings_endpoint.PACKAGED_DELTA`, float16) holds, for each changed matrix, three arrays named
by the parameter of the original model they change (e.g. `encoder.layer.0.attention.self.query.weight`):
- `{parameter}.A[rank,in]` and `{parameter}.B*scale[out,rank]`: the change of the torch weight ([out, in]) is
  `B*scale @ A`; an ONNX `MatMul` holds the same weight transposed ([in, out]), so it gains `(B*scale @ A)^T`;
- `{parameter}.base_first_input[out]`: the original weight's first column (the first row of the `MatMul`'s
  weight): the ONNX file names its weights after nothing in the model, so this is how each matrix is found in it,
  and checked.

`merge_delta(model, path)` adds the delta to the fp32 weights of the model as `quant_pre_process` leaves it (the
int8 file's constants folded to fp32), in place; `gateway.offer.minilm_int8` then quantizes the sum as it
quantizes the untuned weights. A delta that does not fit the file (another model, another release of the package)
is refused with `DeltaMismatch`, never added to the nearest matrix that happens to have the shape.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MATCH_TOLERANCE = 0.05
"""The largest difference allowed between a delta's `base_first_input` and the first row of the file's matrix it
is added to: above what the int8 file's rounding (half a step of a column's scale) and float16 leave, well below
the difference between two of the model's matrices of one shape (bench/search_finetune.py's `merge` checks the
whole matrix against the same bound)."""
_A, _B, _BASE = ".A[rank,in]", ".B*scale[out,rank]", ".base_first_input[out]"


class DeltaMismatch(Exception):
    """The delta file does not fit the ONNX model (the message says which matrix and how)."""


def merge_delta(model: Any, path: Path) -> int:
    """Adds the delta in `path` to the constant `MatMul` weights of the onnx `model` (fp32, [in, out]), in place;
    the number of matrices changed. Raises DeltaMismatch when a matrix of the delta has no match in the model."""
    import numpy
    from onnx import TensorProto, numpy_helper

    delta = _read(path)
    constants = {tensor.name: tensor for tensor in model.graph.initializer}
    weights = {node.input[1]: constants[node.input[1]] for node in model.graph.node
               if node.op_type == "MatMul" and node.input[1] in constants
               and constants[node.input[1]].data_type == TensorProto.FLOAT and len(constants[node.input[1]].dims) == 2}
    free = {name: numpy_helper.to_array(tensor) for name, tensor in weights.items()}
    for parameter, (a, b, first) in delta.items():
        shape = (a.shape[1], b.shape[0])
        same = [name for name, value in free.items() if value.shape == shape]
        if not same:
            raise DeltaMismatch(f"{path}: {parameter} changes a {shape[0]}x{shape[1]} matrix; the model has no "
                                f"(other) MatMul weight of that shape: the delta is not for this model file")
        distance = {name: float(numpy.abs(free[name][0] - first).max()) for name in same}
        nearest = min(same, key=distance.__getitem__)
        if distance[nearest] > MATCH_TOLERANCE:
            raise DeltaMismatch(f"{path}: {parameter} matches none of the model's {shape[0]}x{shape[1]} MatMul "
                                f"weights (the nearest, {nearest}, differs by {distance[nearest]:.3g} > "
                                f"{MATCH_TOLERANCE}): the delta is not for this model file")
        merged = free.pop(nearest) + (b @ a).T
        weights[nearest].CopyFrom(numpy_helper.from_array(merged.astype(numpy.float32), nearest))
    return len(delta)


def _read(path: Path) -> dict[str, tuple[Any, Any, Any]]:
    """The delta's matrices by parameter: (A, B*scale, base_first_input) in float32, their shapes checked."""
    import numpy

    try:
        with numpy.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key].astype(numpy.float32) for key in archive.files}
    except (OSError, ValueError) as exc:
        raise DeltaMismatch(f"{path}: not a delta file ({type(exc).__name__}: {exc})") from None
    parameters = sorted(key[:-len(_A)] for key in arrays if key.endswith(_A))
    if not parameters or len(arrays) != 3 * len(parameters):
        raise DeltaMismatch(f"{path}: expected the arrays {_A}, {_B} and {_BASE} of each changed matrix; it has "
                            f"{sorted(arrays)[:6]}...")
    delta = {}
    for parameter in parameters:
        a, b, first = (arrays.get(parameter + suffix) for suffix in (_A, _B, _BASE))
        if a is None or b is None or first is None or a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[1] or (
                first.shape != (b.shape[0],)):
            raise DeltaMismatch(f"{path}: {parameter}'s arrays are missing or their shapes do not fit "
                                f"(A [rank, in], B*scale [out, rank], base_first_input [out])")
        delta[parameter] = (a, b, first)
    return delta
