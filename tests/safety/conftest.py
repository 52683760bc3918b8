from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The server tests' helpers (a real uvicorn gateway over the example specs) serve these tests too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from recording_server import RecordingServer  # noqa: E402
from server_support import LenientLLM, route_upstream  # noqa: E402


@pytest.fixture
def llm() -> Iterator[LenientLLM]:
    with LenientLLM() as server:
        yield server


@pytest.fixture
def upstream() -> Iterator[RecordingServer]:
    with RecordingServer() as server:
        route_upstream(server)
        yield server
