from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from recording_server import RecordingServer
from server_support import LenientLLM, gateway, route_upstream


@pytest.fixture
def llm() -> Iterator[LenientLLM]:
    with LenientLLM() as server:
        yield server


@pytest.fixture
def upstream() -> Iterator[RecordingServer]:
    with RecordingServer() as server:
        route_upstream(server)
        yield server


@pytest.fixture
def gw(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Iterator[tuple[str, Any]]:
    """(base URL, app) of a running gateway over the example specs."""
    with gateway(tmp_path, llm.url, upstream.url) as running:
        yield running
