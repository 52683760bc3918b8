"""Fixtures of the HTTP-layer tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from raw_server import Answer, RawServer


@pytest.fixture
def serve() -> Iterator[Callable[[Answer], RawServer]]:
    servers: list[RawServer] = []

    def start(answer: Answer) -> RawServer:
        servers.append(RawServer(answer))
        return servers[-1]

    yield start
    for server in servers:
        server.close()
