"""`gateway.search_embeddings` in agents.yaml: the embeddings endpoint that tool search may blend with BM25.

Declared with the keys of a `providers:` entry (`kind`, `base_url`, `api_key`, `timeout`, `headers`) plus the
`model`; `${VAR}` reads a secret from the environment as anywhere else in the file:

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

from typing import Annotated, Literal

from pydantic import ConfigDict, StringConstraints, model_validator

from .fields import Count, HttpUrl, KindEndpoint, Positive, Seconds, TextMap, at_key, doc, filled

KINDS = ("openai", "ollama")
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "ollama": "http://127.0.0.1:11434"}
DEFAULT_TIMEOUT = 10.0
DEFAULT_BATCH_SIZE = 256


class SearchEmbeddings(KindEndpoint):
    """The embeddings endpoint tool search blends with BM25 (`gateway.search_embeddings`)."""

    default_base_urls = DEFAULT_BASE_URLS

    model_config = ConfigDict(frozen=True)

    kind: Literal["openai", "ollama"] = doc("openai: POST {base_url}/embeddings; ollama: POST {base_url}/api/embed.")
    model: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)] = doc(
        "The embedding model's id (e.g. text-embedding-3-small or nomic-embed-text).")
    base_url: HttpUrl = filled("openai: the `/v1` root; ollama: the server root (default per kind).")
    api_key: str | None = doc("Sent as a bearer token (write `${VAR}`); ollama: only when given.", None)
    timeout: Seconds = doc("Seconds per request.", DEFAULT_TIMEOUT)
    batch_size: Count = doc("Tool texts per request when a spec's embeddings are computed.", DEFAULT_BATCH_SIZE)
    headers: TextMap = doc("Extra request headers.", default={})
    dimensions: Count | None = doc("openai only: the vector length asked for (text-embedding-3-*; default: the "
                                 "model's own).", None)
    weight: Positive = doc("The embeddings ranking's weight in the fusion, BM25's being 1: measure what it adds on "
                           "requests never used to choose it (bench/README.md) and lower it, or leave the key out, "
                           "where it does not help.", 1.0)

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
        return f"{self.kind} {self.base_url} {self.model} {self.dimensions or ''}".rstrip()
