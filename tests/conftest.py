"""Fixtures for every test. `pytest -q` runs the tests in parallel (pytest-xdist, one worker a core, a file's
tests on one worker): a session fixture is set up once per worker, and what the workers share goes through
`run_folder`."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import zip_longest
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from recording_server import RecordingServer
from scripted_llm import ScriptedLLM
from shared_servers import postgres_server, postgres_url, redis_server, redis_url  # noqa: F401 (fixtures)

from gateway.catalog import Catalog
from gateway.kernel import tracing
from gateway.openapi import compile_specs

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files with slow tests first (a worker that took one last would finish long after the others), those
    that need the compiled corpus taking turns with the others: one worker compiles it while the next runs tests
    that do not need it. A file's tests keep their order."""
    files: dict[Path, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.path, []).append(item)
    corpus = [path for path, tests in files.items() if any("corpus_catalog" in getattr(test, "fixturenames", ())
                                                          for test in tests)]
    slow = [path for path, tests in files.items() if path not in corpus and any(
        test.get_closest_marker("slow") or test.get_closest_marker("corpus") for test in tests)]
    first = [path for pair in zip_longest(corpus, slow) for path in pair if path is not None]
    order = first + [path for path in files if path not in first]
    items[:] = [item for path in order for item in files[path]]


def run_folder(factory: pytest.TempPathFactory) -> Path:
    """A folder of this run that every worker shares (each worker's own temporary folders are inside it)."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def one_worker_at_a_time(lock: Path) -> Iterator[None]:
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def spec_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A compiled-spec cache all workers share, for tests that load a big spec to test something else: the
    first compiles it, the others load it (cache entries are written whole, then renamed into place)."""
    return run_folder(tmp_path_factory) / "spec-cache"


@pytest.fixture(scope="session")
def corpus_catalog(tmp_path_factory: pytest.TempPathFactory, spec_cache: Path) -> Catalog:
    """Every spec of ../shared/corpus, compiled once for the run: one worker compiles while the others wait,
    then load what it cached (a tenth of the time)."""
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is absent")
    with one_worker_at_a_time(run_folder(tmp_path_factory) / "corpus.lock"):
        return compile_specs(CORPUS, cache_dir=spec_cache / "corpus")


@pytest.fixture(scope="module")
def slack(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """Slack's spec from ../shared/corpus (174 tools), compiled on its own (the search tests' small real api)."""
    spec = CORPUS / "apis-guru" / "slack.com.json"
    if not spec.is_file():
        pytest.skip("../shared/corpus is absent")
    folder = tmp_path_factory.mktemp("slack") / "specs"
    folder.mkdir()
    (folder / "slack.json").symlink_to(spec)
    return compile_specs(folder, use_cache=False)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is absent")
    return CORPUS


@pytest.fixture
def s3_spec(corpus: Path) -> dict[str, Any]:
    """The corpus's S3 spec (its only XML request bodies), parsed."""
    path = corpus / "apis-guru" / "amazonaws.com" / "s3.json"
    if not path.is_file():
        pytest.skip("the S3 spec is not in the corpus")
    return json.loads(path.read_bytes())  # type: ignore[no-any-return]


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    """A scripted LLM on 127.0.0.1 (tests/server and tests/safety override it with their lenient one)."""
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def upstream() -> Iterator[RecordingServer]:
    """A recording upstream API on 127.0.0.1 (tests/server and tests/safety override it with a routed one)."""
    with RecordingServer() as server:
        yield server


@pytest.fixture
def fresh_embeddings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tool search's embeddings cached under this test's folder, and no failure remembered from another test."""
    from gateway.offer import embeddings

    monkeypatch.setenv("GATEWAY_CACHE_DIR", str(tmp_path / "cache"))
    embeddings.forget_failures()
    yield
    embeddings.forget_failures()


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """The gateway's spans, kept in memory: a provider of its own (`tracing.install`), so no test leaves
    OpenTelemetry's once-per-process global provider set for the others. Ask for it before the gateway is built:
    its pipeline has the observe stage only while a provider is installed."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    try:
        yield exporter
    finally:
        tracing.install(None)
        provider.shutdown()
