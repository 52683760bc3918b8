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

Without the key nothing changes and nothing is sent anywhere (`gateway.search_embeddings`). Parsed here, in the
config layer, so `gateway validate` reports a bad value with its line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ConfigError

KINDS = ("openai", "ollama")
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "ollama": "http://127.0.0.1:11434"}
DEFAULT_TIMEOUT = 10.0
DEFAULT_BATCH_SIZE = 256
_KEYS = ("kind", "model", "base_url", "api_key", "timeout", "batch_size", "headers", "dimensions", "weight")


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchEmbeddings:
    """`gateway.search_embeddings` in agents.yaml."""

    kind: Literal["openai", "ollama"]
    model: str
    base_url: str
    """openai: the `/v1` root (`/embeddings` is appended); ollama: the server root (`/api/embed`)."""
    api_key: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    batch_size: int = DEFAULT_BATCH_SIZE
    headers: Mapping[str, str] = field(default_factory=dict)
    dimensions: int | None = None
    """openai: the `dimensions` asked for (None: the model's own length)."""
    weight: float = 1.0
    """The embeddings ranking's weight in the fusion, BM25's being 1: measure what it adds on requests never used to
    choose it (bench/README.md) and lower it, or leave the key out, where it does not help."""

    @property
    def identity(self) -> str:
        """What an embedding depends on (the key of its caches): the endpoint, the model and the length asked for,
        not the key."""
        return f"{self.kind} {self.base_url} {self.model} {self.dimensions or ''}".rstrip()

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> SearchEmbeddings | None:
        """From the manifest's `gateway:` settings (None without the key); a ConfigError names a bad value."""
        section = settings.get("search_embeddings")
        if section is None:
            return None
        if not isinstance(section, Mapping):
            raise ConfigError("gateway.search_embeddings must be a mapping (kind, model, base_url, api_key, ...).")
        unknown = sorted(set(section) - set(_KEYS))
        if unknown:
            raise ConfigError(f"gateway.search_embeddings has unknown key(s) {', '.join(unknown)}; the keys are "
                              f"{', '.join(_KEYS)}.")
        kind = section.get("kind")
        if kind not in KINDS:
            raise ConfigError(f"gateway.search_embeddings.kind must be one of {', '.join(KINDS)}, got {kind!r}.")
        model = section.get("model")
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("gateway.search_embeddings.model is required (the embedding model's id, e.g. "
                              "text-embedding-3-small or nomic-embed-text).")
        base_url = section.get("base_url", DEFAULT_BASE_URLS[kind])
        if not isinstance(base_url, str) or not re.match(r"^https?://[^/\s]+", base_url):
            raise ConfigError(f"gateway.search_embeddings.base_url must be an http:// or https:// URL, "
                              f"got {base_url!r}.")
        api_key = section.get("api_key")
        if api_key is not None and not isinstance(api_key, str):
            raise ConfigError("gateway.search_embeddings.api_key must be a string (e.g. ${OPENAI_API_KEY}).")
        headers = section.get("headers") or {}
        if not isinstance(headers, Mapping) or not all(isinstance(v, str) for v in headers.values()):
            raise ConfigError("gateway.search_embeddings.headers must map header names to strings.")
        dimensions = None
        if "dimensions" in section:
            if kind != "openai":
                raise ConfigError("gateway.search_embeddings.dimensions is OpenAI's (text-embedding-3-*); "
                                  f"a {kind} endpoint answers its model's own length, so remove the key.")
            dimensions = int(_positive(section, "dimensions", 0, integer=True))
        weight = section.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 < weight < float("inf"):
            raise ConfigError(f"gateway.search_embeddings.weight must be a positive number (BM25's is 1), "
                              f"got {weight!r}.")
        return cls(kind=kind, model=model.strip(), dimensions=dimensions, base_url=base_url.rstrip("/"),
                   weight=float(weight),
                   api_key=api_key or None,
                   timeout=_positive(section, "timeout", DEFAULT_TIMEOUT),
                   batch_size=int(_positive(section, "batch_size", DEFAULT_BATCH_SIZE, integer=True)),
                   headers={str(k): v for k, v in headers.items()})


def _positive(section: Mapping[str, Any], key: str, default: float, *, integer: bool = False) -> float:
    value = section.get(key, default)
    wrong = isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int))
    if wrong or not 0 < value < float("inf"):
        raise ConfigError(f"gateway.search_embeddings.{key} must be a positive "
                          f"{'integer' if integer else 'number'}, got {value!r}.")
    return float(value)
