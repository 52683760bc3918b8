"""Hybrid tool search: BM25's ranking fused with the cosine similarity of embeddings (`gateway.offer.embeddings`).

With the setting (`gateway.config.embeddings_endpoint`), `gateway.offer.toolsearch.search` hands its BM25 ranking to
`hybrid(...)`, which ranks the same tools by the cosine between the query's embedding and each tool's one-line
text (the summary a search answers), then fuses the two lists by weighted reciprocal rank (`weight / (RRF_K + rank)`
summed over the lists, BM25's weight 1 and the embeddings' `gateway.search_embeddings.weight`; robust to the two
scores' different scales). A weak second ranker at equal weight drags a good first one down (bench/README.md): its
weight is what it is measured to add.

- A spec's tool embeddings are computed once per spec version (its content hash), endpoint and model, in batches
  of `batch_size` texts, and kept on disk beside the catalog cache (`$GATEWAY_CACHE_DIR/embeddings`, one file per
  spec) and in memory per catalog; a query's embedding is kept in a small LRU (`QUERY_CACHE`).
- When the endpoint fails (refused, timed out, an error status, an answer of the wrong shape), the search answers
  BM25's ranking and the log says so; the endpoint is not asked again for `RETRY_AFTER` seconds, so a dead endpoint
  does not add its timeout to every search. A search never fails because of embeddings.
- Requests are synchronous (httpx), as `search(...)` is: every door runs a search in a worker thread (the loop's
  `search_tools`, `GET /agents/{agent}/tools/search`, MCP), so a slow endpoint holds up only that search.
"""

from __future__ import annotations

import array
import hashlib
import json
import logging
import math
import os
import tempfile
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from operator import mul
from pathlib import Path
from typing import Any

import httpx

from ..catalog import Catalog, Tool
from ..config.embeddings_endpoint import SearchEmbeddings

logger = logging.getLogger("gateway.search")

RRF_K = 60
"""The usual reciprocal-rank-fusion constant: a list's first places count, but no single list dominates."""
FUSION_DEPTH = 50
"""How many places of each list take part in the fusion."""
QUERY_CACHE = 256
"""Query embeddings kept (least recently used out first)."""
RETRY_AFTER = 30.0
"""Seconds a failed endpoint is left alone (BM25 alone meanwhile)."""
_FORMAT = "gateway-embeddings-1"

Ranked = list[tuple[Tool, float]]


class EmbeddingsError(Exception):
    """The endpoint did not answer embeddings (the message says what it answered instead)."""


def hybrid(settings: SearchEmbeddings, catalog: Catalog, apis: Sequence[str], allowed: Callable[[Tool], bool] | None,
           query: str, bm25: Ranked, text_of: Callable[[Tool], str]) -> Ranked:
    """`bm25` (best first) fused with the embedding ranking of the `allowed` tools of `apis`; on any failure of the
    endpoint, `bm25` as it was (logged)."""
    if _resting(settings):
        return bm25
    try:
        vectors = _query_vector(settings, query)
        similar = _most_similar(settings, catalog, apis, allowed, vectors, text_of)
    except EmbeddingsError as exc:
        _rest(settings, exc)
        return bm25
    except Exception:  # noqa: BLE001 - a search must answer: whatever broke here, BM25's ranking still stands
        logger.exception("tool search: the embeddings ranking failed; BM25 alone for %g s", RETRY_AFTER)
        _RESTING[settings.identity] = time.monotonic() + RETRY_AFTER
        return bm25
    return fuse(bm25, similar, weights=(1.0, settings.weight))


def fuse(*rankings: Ranked, weights: Sequence[float] = ()) -> Ranked:
    """Weighted reciprocal-rank fusion of rankings (each best first): `sum(weight / (RRF_K + place))`, best first
    (`weights`: one per ranking, default 1 each)."""
    scores: dict[str, float] = {}
    tools: dict[str, Tool] = {}
    for ranking, weight in zip(rankings, [*weights, *[1.0] * (len(rankings) - len(weights))], strict=True):
        for place, (tool, _) in enumerate(ranking[:FUSION_DEPTH], start=1):
            scores[tool.name] = scores.get(tool.name, 0.0) + weight / (RRF_K + place)
            tools[tool.name] = tool
    order = sorted(scores, key=lambda name: -scores[name])
    return [(tools[name], round(scores[name], 6)) for name in order]


def embed(settings: SearchEmbeddings, texts: Sequence[str]) -> list[list[float]]:
    """The endpoint's embeddings of `texts`, in order (one request per `batch_size` texts)."""
    vectors: list[list[float]] = []
    for start in range(0, len(texts), settings.batch_size):
        batch = list(texts[start:start + settings.batch_size])
        vectors.extend(_request(settings, batch))
    return vectors


def _request(settings: SearchEmbeddings, texts: list[str]) -> list[list[float]]:
    headers = {**settings.headers}
    if settings.api_key:
        headers["Authorization"] = f"Bearer {settings.api_key}"
    if settings.kind == "openai":
        url = f"{settings.base_url}/embeddings"
        body: dict[str, Any] = {"model": settings.model, "input": texts, "encoding_format": "float"}
        if settings.dimensions is not None:
            body["dimensions"] = settings.dimensions
    else:
        url, body = f"{settings.base_url}/api/embed", {"model": settings.model, "input": texts}
    try:
        response = _client(settings).post(url, json=body, headers=headers)
    except httpx.HTTPError as exc:
        raise EmbeddingsError(f"{url}: {type(exc).__name__}: {exc}") from None
    if response.status_code != 200:
        raise EmbeddingsError(f"{url} answered HTTP {response.status_code}: {response.text[:200]}")
    try:
        answer = response.json()
        if settings.kind == "openai":
            vectors = [item["embedding"] for item in sorted(answer["data"], key=lambda item: item["index"])]
        else:
            vectors = answer["embeddings"]
    except (ValueError, KeyError, TypeError) as exc:
        raise EmbeddingsError(f"{url} answered no embeddings ({type(exc).__name__}: {exc})") from None
    count = len(vectors) if isinstance(vectors, list) else 0
    if count != len(texts) or not all(isinstance(v, list) and v for v in vectors):
        raise EmbeddingsError(f"{url} answered {count} embeddings for {len(texts)} texts")
    try:
        return [[float(x) for x in v] for v in vectors]
    except (TypeError, ValueError):
        raise EmbeddingsError(f"{url} answered embeddings that are not lists of numbers") from None


_CLIENTS: dict[tuple[str, float], httpx.Client] = {}
_LOCK = threading.Lock()


def _client(settings: SearchEmbeddings) -> httpx.Client:
    """One client (its connection pool) per endpoint: a search reuses the connection the last one opened."""
    key = (settings.identity, settings.timeout)
    with _LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = _CLIENTS[key] = httpx.Client(timeout=settings.timeout)
        return client


_QUERIES: OrderedDict[tuple[str, str], list[float]] = OrderedDict()


def _query_vector(settings: SearchEmbeddings, query: str) -> list[float]:
    key = (settings.identity, query)
    with _LOCK:
        hit = _QUERIES.get(key)
        if hit is not None:
            _QUERIES.move_to_end(key)
            return hit
    [vector] = embed(settings, [query])
    unit = _unit(vector)
    with _LOCK:
        _QUERIES[key] = unit
        while len(_QUERIES) > QUERY_CACHE:
            _QUERIES.popitem(last=False)
    return unit


def _most_similar(settings: SearchEmbeddings, catalog: Catalog, apis: Sequence[str],
                  allowed: Callable[[Tool], bool] | None, query: list[float],
                  text_of: Callable[[Tool], str]) -> Ranked:
    scored: Ranked = []
    for api in apis:
        tools = catalog.for_api(api)
        for tool, vector in zip(tools, _tool_vectors(settings, catalog, api, tools, text_of), strict=True):
            if (allowed is None or allowed(tool)) and len(vector) == len(query):
                similarity = sum(map(mul, query, vector))
                if similarity > 0:
                    scored.append((tool, similarity))
    scored.sort(key=lambda pair: -pair[1])
    return scored[:FUSION_DEPTH]


_IN_MEMORY: weakref.WeakKeyDictionary[Catalog, dict[tuple[str, str], list[array.array[float]]]] = (
    weakref.WeakKeyDictionary())
_COMPUTING = threading.Lock()


def _tool_vectors(settings: SearchEmbeddings, catalog: Catalog, api: str, tools: Sequence[Tool],
                  text_of: Callable[[Tool], str]) -> list[array.array[float]]:
    """The unit embeddings of an api's tools, in catalog order: from memory, else from disk, else computed."""
    key = (settings.identity, api)
    known = _IN_MEMORY.get(catalog, {}).get(key)
    if known is not None:
        return known
    with _COMPUTING:  # one computation per spec, however many searches arrive meanwhile
        known = _IN_MEMORY.get(catalog, {}).get(key)
        if known is not None:
            return known
        texts = [text_of(tool) or tool.name for tool in tools]
        spec = catalog.apis.get(api)
        path = _cache_path(settings, api, spec.content_hash if spec is not None else "", texts)
        vectors = _read(path, len(texts))
        if vectors is None:
            logger.info("tool search: computing %d embeddings of %s with %s", len(texts), api, settings.model)
            vectors = [array.array("f", _unit(v)) for v in embed(settings, texts)]
            _write(path, vectors)
        _IN_MEMORY.setdefault(catalog, {})[key] = vectors
        return vectors


def cache_dir() -> Path:
    """Beside the compiled catalogs: `$GATEWAY_CACHE_DIR/embeddings` (default `~/.cache/gateway/embeddings`)."""
    configured = os.environ.get("GATEWAY_CACHE_DIR")
    base = Path(configured) if configured else Path(os.environ.get("XDG_CACHE_HOME") or
                                                    Path.home() / ".cache") / "gateway"
    return base / "embeddings"


def _cache_path(settings: SearchEmbeddings, api: str, content_hash: str, texts: Iterable[str]) -> Path:
    digest = hashlib.sha256(f"{_FORMAT}\0{settings.identity}\0{api}\0{content_hash}".encode())
    for text in texts:  # the texts too: a change in how a tool's line is made is a new version
        digest.update(b"\0" + text.encode())
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in api)[:60]
    return cache_dir() / f"{safe}-{digest.hexdigest()[:24]}.f32"


def _read(path: Path, count: int) -> list[array.array[float]] | None:
    try:
        with path.open("rb") as file:
            header = json.loads(file.readline())
            data = array.array("f")
            data.frombytes(file.read())
    except (OSError, ValueError):
        return None
    dim = header.get("dim") if isinstance(header, dict) else None
    if header.get("format") != _FORMAT or header.get("count") != count or not isinstance(dim, int) or dim < 1 or (
            len(data) != count * dim):
        return None
    return [data[i * dim:(i + 1) * dim] for i in range(count)]


def _write(path: Path, vectors: list[array.array[float]]) -> None:
    dim = len(vectors[0]) if vectors else 0
    if any(len(v) != dim for v in vectors):
        return  # an endpoint that answers vectors of different lengths: not worth keeping
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.NamedTemporaryFile("wb", dir=path.parent, delete=False) as file:
            file.write(json.dumps({"format": _FORMAT, "count": len(vectors), "dim": dim}).encode() + b"\n")
            for vector in vectors:
                file.write(vector.tobytes())
        os.replace(file.name, path)
    except OSError:
        logger.warning("tool search: could not cache embeddings in %s", path.parent, exc_info=True)


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else list(vector)


_RESTING: dict[str, float] = {}


def _resting(settings: SearchEmbeddings) -> bool:
    until = _RESTING.get(settings.identity)
    return until is not None and time.monotonic() < until


def _rest(settings: SearchEmbeddings, error: EmbeddingsError) -> None:
    _RESTING[settings.identity] = time.monotonic() + RETRY_AFTER
    logger.warning("tool search: the embeddings endpoint failed (%s); BM25 alone for %g s", error, RETRY_AFTER)


def forget_failures() -> None:
    """Ask a failed endpoint again at the next search (tests; an operator who fixed the endpoint can wait)."""
    _RESTING.clear()

