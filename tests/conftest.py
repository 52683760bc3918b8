from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from recording_server import RecordingServer
from scripted_llm import ScriptedLLM
from shared_servers import postgres_server, postgres_url, redis_server, redis_url  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"


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
