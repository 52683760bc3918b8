from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

# The server tests' helpers (a real uvicorn gateway, the scripted LLM and upstream fixtures) serve these tests too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from identity_support import Setup, route_repos, started  # noqa: E402
from recording_server import RecordingServer  # noqa: E402
from server_support import LenientLLM  # noqa: E402


@pytest.fixture
def model() -> Iterator[LenientLLM]:
    with LenientLLM() as server:
        yield server


@pytest.fixture
def repos() -> Iterator[RecordingServer]:
    with RecordingServer() as server:
        route_repos(server)
        yield server


@pytest.fixture
def setup(tmp_path: Path, repos: RecordingServer, model: LenientLLM,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[Setup]:
    monkeypatch.setenv("GATEWAY_CONNECTIONS_KEY", Fernet.generate_key().decode())
    with started(tmp_path, repos, model) as setup:
        yield setup
