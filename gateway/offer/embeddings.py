"""Hybrid tool search: BM25's ranking fused with the cosine similarity of embeddings (`gateway.offer.embeddings`).

With the setting (`gateway.config.embeddings_endpoint`), `gateway.offer.toolsearch.search` hands its BM25 ranking to
`hybrid(...)`, which ranks the same tools by the cosine between the query's embedding and each tool's text
(`embedding_text`: its name's words, its path's words and its summary, the text the packaged model was measured
on), then fuses the two lists by their scores, each scaled by its own list (`gateway.offer.fusion`: BM25's over its
first's, weight 1; the cosine between the embeddings' last and first place, `gateway.search_embeddings.weight`). A
weak second ranker at equal weight drags a good first one down (bench/README.md): its weight is what it is
measured to add.

- The embeddings come from an endpoint (`kind: openai | ollama`) or from a model run in this process
  (`kind: local`, `gateway.offer.local_model`).
- A spec's tool embeddings are computed once per spec version (its content hash), model and texts, in batches of
  `batch_size` texts, off the caller's thread (one computation at a time, `_WORK`), and kept on disk beside the
  catalog cache (`$GATEWAY_CACHE_DIR/embeddings`, one file per spec) and in memory per catalog. A search waits
  for them at most `timeout` seconds and meanwhile answers BM25's ranking (a local model takes minutes for Graph's
  11,000 tools the first time): nothing hangs. `prepare(...)` starts them before the first search. A query's
  embedding is kept in a small LRU (`QUERY_CACHE`).
- When the embeddings fail (an endpoint refused, timed out, answered an error or the wrong shape; a local model
  not installed), the search answers BM25's ranking and the log says so; they are not asked again for
  `RETRY_AFTER` seconds, so a dead endpoint does not add its timeout to every search. A search never fails
  because of embeddings.
- Requests are synchronous (httpx), as `search(...)` is: every door runs a search in a worker thread (the loop's
  `search_tools`, `GET /agents/{agent}/tools/search`, MCP), so a slow endpoint holds up only that search.
- The cosine over an api's tools is one pass of NumPy where it is installed (the local kind brings it), else a loop
  in Python (which grows with tools x dimensions: ask an endpoint for short vectors); only the best `FUSION_DEPTH`
  are sorted. Over many tools (Graph's) with onnxruntime installed, an int8 copy of the vectors first bounds every
  cosine, and only the tools that can be among the best get theirs computed (`gateway.offer.cosine_bounds`): the
  same places, in the same order.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..catalog import Catalog, Tool
from ..config.embeddings_endpoint import SearchEmbeddings
from .fusion import HELD_PLACES, Ranked, fuse, trusted
from .index import index_of
from .index_build import summary_of
from .query import words
from .signals import WEIGHTS
from .tool_vectors import ToolVectors, as_float32, cache_path, read, unit, unit_float32, write

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger("gateway.search")

FUSION_DEPTH = 50
"""How many places of the embeddings' ranking take part in the fusion (its last place is the floor its cosines are
scaled from), and of BM25's at least."""
QUERY_CACHE = 256
"""Query embeddings kept (least recently used out first)."""
RETRY_AFTER = 30.0
"""Seconds failed embeddings are left alone (BM25 alone meanwhile)."""


class EmbeddingsError(Exception):
    """No embeddings came (the message says what came instead: an endpoint's answer, a model not installed)."""


class NotReady(Exception):
    """A spec's embeddings are still being computed: this search answers BM25's ranking."""


def embedding_text(tool: Tool) -> str:
    """What a tool is embedded as: its name's words, its path's words and its summary (or its description's first
    sentence), the text the packaged model was measured on (bench/search_local_embeddings.py)."""
    return f"{words(tool.operation_id or tool.name)}. {words(tool.path)}. {summary_of(tool)}"


def hybrid(settings: SearchEmbeddings, catalog: Catalog, apis: Sequence[str], allowed: Callable[[Tool], bool] | None,
           query: str, bm25: Ranked) -> Ranked:
    """`bm25` (best first) fused with the embedding ranking of the `allowed` tools of `apis`; while they are being
    computed, or on any failure of the embeddings, `bm25` as it was (logged)."""
    return hybrid_with_similar(settings, catalog, apis, allowed, query, bm25)[0]


def hybrid_with_similar(settings: SearchEmbeddings, catalog: Catalog, apis: Sequence[str],
                        allowed: Callable[[Tool], bool] | None, query: str,
                        bm25: Ranked) -> tuple[Ranked, Ranked | None]:
    """`hybrid(...)`'s ranking and the embeddings' own, best first with their raw cosines (None when BM25 answered
    alone): what tool search's closeness reads (`gateway.offer.closeness`), a cosine not scaled by its list."""
    if _resting(settings):
        return bm25, None
    try:
        similar = _most_similar(settings, catalog, apis, allowed, query)
    except NotReady:
        return bm25, None
    except EmbeddingsError as exc:
        _rest(settings, exc)
        return bm25, None
    except Exception:  # noqa: BLE001 - a search must answer: whatever broke here, BM25's ranking still stands
        logger.exception("tool search: the embeddings ranking failed; BM25 alone for %g s", RETRY_AFTER)
        _RESTING[settings.identity] = time.monotonic() + RETRY_AFTER
        return bm25, None
    # the model trusted more where BM25's first places hold little of the request (`gateway.offer.fusion`)
    held = index_of(catalog).held(query, [tool for tool, _ in bm25[:HELD_PLACES]]) if WEIGHTS.held else 1.0
    return fuse(bm25, similar, trusted(settings.weight, held, WEIGHTS.held)), similar


def prepare(settings: SearchEmbeddings, catalog: Catalog, apis: Sequence[str]) -> list[Computation | ToolVectors]:
    """Start computing (or reading from disk) the embeddings of `apis`' tools, so that the first search finds them
    ready: what is known already, and a `Computation` (`.wait()`) for each of the others."""
    return [_computation(settings, catalog, api) for api in apis]


def embed(settings: SearchEmbeddings, texts: Sequence[str]) -> list[list[float]]:
    """The embeddings of `texts`, in order (an endpoint: one request per `batch_size` texts)."""
    if settings.kind == "local":
        from .local_model import LocalModelMissing, encode

        try:
            return encode(settings.model, texts, tuned=settings.tuned)
        except LocalModelMissing as exc:
            raise EmbeddingsError(str(exc)) from None
    vectors: list[list[float]] = []
    for start in range(0, len(texts), settings.batch_size):
        batch = list(texts[start:start + settings.batch_size])
        vectors.extend(_request(settings, batch))
    return vectors


def _request(settings: SearchEmbeddings, texts: list[str]) -> list[list[float]]:
    import httpx  # here: a gateway without an embeddings endpoint (and `gateway mcp`'s start) never needs it

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
    import httpx

    key = (settings.identity, settings.timeout)
    with _LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = _CLIENTS[key] = httpx.Client(timeout=settings.timeout)
        return client


_QUERIES: OrderedDict[tuple[str, str], Sequence[float]] = OrderedDict()


def _query_vector(settings: SearchEmbeddings, query: str) -> Sequence[float]:
    """The request's unit vector (adapted, with `adapter`): with NumPy, the float32 array the cosines take."""
    key = (f"{settings.identity} adapted" if settings.adapter else settings.identity, query)
    with _LOCK:
        hit = _QUERIES.get(key)
        if hit is not None:
            _QUERIES.move_to_end(key)
            return hit
    vector = _local_query_vector(settings, query) if settings.kind == "local" else as_float32(
        unit(embed(settings, [query])[0]))
    if settings.adapter:  # the tools' vectors stay the model's own: only the request is moved
        from .query_adapter import adapt

        vector = as_float32(adapt(vector))
    with _LOCK:
        _QUERIES[key] = vector
        while len(_QUERIES) > QUERY_CACHE:
            _QUERIES.popitem(last=False)
    return vector


def _local_query_vector(settings: SearchEmbeddings, query: str) -> Sequence[float]:
    """`unit(embed(settings, [query])[0])` as a float32 array, made from the model's array without a list between."""
    from .local_model import LocalModelMissing, encode_array

    try:
        [vector] = encode_array(settings.model, [query], tuned=settings.tuned)
    except LocalModelMissing as exc:
        raise EmbeddingsError(str(exc)) from None
    made: Sequence[float] = unit_float32(vector)
    return made


def _most_similar(settings: SearchEmbeddings, catalog: Catalog, apis: Sequence[str],
                  allowed: Callable[[Tool], bool] | None, query: str) -> Ranked:
    vectors = [(api, _tool_vectors(settings, catalog, api)) for api in apis]  # first: NotReady asks no query
    query_vector = _query_vector(settings, query)
    scored: Ranked = []
    for api, known in vectors:
        tools = catalog.for_api(api)
        if allowed is None:  # what the fusion reads of it: its first places, found in NumPy where it is installed
            scored += [(tools[place], cosine) for place, cosine in known.best(query_vector, FUSION_DEPTH)]
            continue
        found = 0
        for place, cosine in known.best_first(query_vector, FUSION_DEPTH):
            tool = tools[place]
            if allowed(tool):
                scored.append((tool, cosine))
                found += 1
                if found == FUSION_DEPTH:
                    break
    if len(vectors) > 1:
        scored.sort(key=lambda pair: -pair[1])
    return scored[:FUSION_DEPTH]


_IN_MEMORY: weakref.WeakKeyDictionary[Catalog, dict[tuple[str, str], ToolVectors]] = weakref.WeakKeyDictionary()
_PENDING: weakref.WeakKeyDictionary[Catalog, dict[tuple[str, str], Computation]] = weakref.WeakKeyDictionary()
_ONE_AT_A_TIME = threading.Lock()
"""One computation at a time: a local model takes a core while it runs, and an endpoint is asked one batch at
a time."""


class Computation:
    """The embeddings of one api's tools, read from disk or computed in a thread of their own (a daemon: a process
    that exits does not wait for it)."""

    def __init__(self, settings: SearchEmbeddings, catalog: Catalog, api: str) -> None:
        self.key = (settings.identity, api)
        self._done = threading.Event()
        self._vectors: ToolVectors | None = None
        self._error: BaseException | None = None
        self.announced = False
        """Whether a search has logged that it answered without these embeddings."""
        self.computing = False
        """Whether the disk cache missed, so the vectors are being computed (set before `_known`)."""
        self._known = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(settings, catalog, api), daemon=True,
                                        name=f"gateway-embeddings {api}")

    def start(self) -> Computation:
        self._thread.start()
        return self

    def wait(self, timeout: float | None = None) -> ToolVectors:
        """The vectors, once done (`NotReady` after `timeout` seconds; a failure raises its error)."""
        if not self._done.wait(timeout):
            raise NotReady(self.key[1])
        if self._error is not None:
            raise self._error
        assert self._vectors is not None
        return self._vectors

    def from_cache(self) -> bool:
        """Whether the vectors are read from the disk cache rather than computed: waits until that is known (the
        cache looked up) or the computation has ended, whichever comes first."""
        self._known.wait()
        return not self.computing

    def _missed(self) -> None:
        self.computing = True
        self._known.set()

    def _run(self, settings: SearchEmbeddings, catalog: Catalog, api: str) -> None:
        try:
            with _ONE_AT_A_TIME:
                vectors = _compute(settings, catalog, api, self._missed)
            with _LOCK:
                _IN_MEMORY.setdefault(catalog, {})[self.key] = vectors
            self._vectors = vectors
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits: the search falls back on it
            self._error = exc
        finally:
            with _LOCK:  # done or failed: a failure is asked again after its rest, by the next search
                _PENDING.get(catalog, {}).pop(self.key, None)
            self._done.set()
            self._known.set()


def _tool_vectors(settings: SearchEmbeddings, catalog: Catalog, api: str) -> ToolVectors:
    """The unit embeddings of an api's tools, in catalog order, once computed (or read from disk): waited for at
    most `timeout` seconds, else `NotReady` (the computation goes on)."""
    known = _IN_MEMORY.get(catalog, {}).get((settings.identity, api))
    if known is not None:
        return known
    computation = _computation(settings, catalog, api)
    if isinstance(computation, ToolVectors):
        return computation
    try:
        return computation.wait(settings.timeout)
    except NotReady:
        if not computation.announced:  # once per computation, not once per search while it runs
            computation.announced = True
            logger.info("tool search: the embeddings of %s are being computed; BM25 alone meanwhile", api)
        raise


def _computation(settings: SearchEmbeddings, catalog: Catalog, api: str) -> Computation | ToolVectors:
    key = (settings.identity, api)
    with _LOCK:
        known = _IN_MEMORY.get(catalog, {}).get(key)
        if known is not None:
            return known
        pending = _PENDING.setdefault(catalog, {})
        computation = pending.get(key)
        if computation is None:
            computation = pending[key] = Computation(settings, catalog, api)
            computation.start()
        return computation


def _compute(settings: SearchEmbeddings, catalog: Catalog, api: str,
             missed: Callable[[], None] = lambda: None) -> ToolVectors:
    """The api's tool vectors from the disk cache, else computed and cached (`missed` called first)."""
    tools = catalog.for_api(api)  # the list a search reads the vectors' places in
    texts = [embedding_text(tool) for tool in tools]
    spec = catalog.apis.get(api)
    path = cache_path(settings.identity, api, spec.content_hash if spec is not None else "", texts)
    vectors = read(path, len(texts))
    if vectors is None:
        missed()
        logger.info("tool search: computing %d embeddings of %s with %s", len(texts), api, settings.model)
        started = time.monotonic()
        vectors = ToolVectors.of(embed(settings, texts))
        if vectors is None:
            raise EmbeddingsError(f"{settings.model} answered vectors of different lengths for {api}'s tools")
        write(path, vectors)
        logger.info("tool search: %d embeddings of %s computed in %.1f s", len(texts), api,
                    time.monotonic() - started)
    vectors.bounds()  # made here, off the searching thread (onnx's import and the int8 copy: under a second)
    return vectors


_RESTING: dict[str, float] = {}


def _resting(settings: SearchEmbeddings) -> bool:
    until = _RESTING.get(settings.identity)
    return until is not None and time.monotonic() < until


def _rest(settings: SearchEmbeddings, error: EmbeddingsError) -> None:
    _RESTING[settings.identity] = time.monotonic() + RETRY_AFTER
    logger.warning("tool search: the embeddings failed (%s); BM25 alone for %g s", error, RETRY_AFTER)


def forget_failures() -> None:
    """Ask a failed endpoint again at the next search (tests; an operator who fixed the endpoint can wait)."""
    _RESTING.clear()

