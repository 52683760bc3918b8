"""A running gateway for the server tests: real uvicorn on 127.0.0.1 (free port, own thread), the example
specs, an agents.yaml pointing the providers at a scripted LLM and the APIs at a local upstream."""

from __future__ import annotations

import asyncio
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from recording_server import Recorded, RecordingServer, Reply
from scripted_llm import Recorded as LLMRecorded
from scripted_llm import Reply as LLMReply
from scripted_llm import ScriptedLLM

from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app
from gateway.server.bounded_head import server_options

ROOT = Path(__file__).resolve().parents[2]

AGENTS_YAML = """\
providers:
  openai: {{kind: openai, base_url: "{llm}/v1", api_key: test-key}}
  ollama: {{kind: ollama, base_url: "{llm}"}}
apis:
  open-meteo: {{base_url: "{upstream}/meteo"}}
  github:
    base_url: "{upstream}/github"
    auth: {{type: bearer, token: gh-secret-token}}
agents:
  weather:
    model: openai/gpt-test
    description: Weather from Open-Meteo.
    instructions: You answer weather questions.
    tools: [{{api: open-meteo}}]
    max_iterations: 4
  triage:
    model: ollama/llama-test
    description: GitHub issue triage.
    tools:
      - api: github
    approval: writes
"""

FORECAST = {
    "latitude": 52.52, "longitude": 13.42, "elevation": 38.0, "generationtime_ms": 0.1, "utc_offset_seconds": 0,
    "timezone": "GMT", "timezone_abbreviation": "GMT",
    "current": {"time": "2026-11-30T10:00", "interval": 900, "temperature_2m": 3.5},
    "current_units": {"time": "iso8601", "interval": "seconds", "temperature_2m": "°C"},
}

ISSUE = {"id": 1, "number": 7, "title": "Crash on start", "state": "open", "body": None,
         "html_url": "https://github.com/acme/app/issues/7", "user": {"login": "ann", "id": 3},
         "labels": [], "comments": 0}


def route_upstream(upstream: RecordingServer) -> None:
    """Answers shaped like the real APIs, so tool results match the specs' output schemas."""
    upstream.route("/meteo/v1/forecast", Reply(200, FORECAST))

    def github(request: Recorded) -> Reply:
        if request.path.endswith("/comments"):
            return Reply(201, {"id": 99, "body": "ack", "html_url": "https://github.com/acme/app/issues/7#c99"})
        if "/issues/" in request.path:
            return Reply(200, ISSUE)
        if request.path.endswith("/issues"):
            return Reply(200, [ISSUE])
        return Reply(404, {"message": "Not Found"})

    upstream.route("/github/", github)


class LenientLLM(ScriptedLLM):
    """A scripted LLM that answers a plain text when its script is empty (for fuzzing)."""

    def _next(self, recorded: LLMRecorded) -> LLMReply | None:
        reply = super()._next(recorded)
        return reply if reply is not None else LLMReply(text="fine")


# The fixtures of tests/server (its conftest imports them) and of tests/safety (`llm`, `upstream`).
@pytest.fixture
def llm() -> Iterator[LenientLLM]:
    with LenientLLM() as server:
        yield server


@pytest.fixture
def upstream() -> Iterator[RecordingServer]:
    with RecordingServer() as server:
        route_upstream(server)
        yield server


def write_project(folder: Path, llm_url: str, upstream_url: str, agents_yaml: str = AGENTS_YAML) -> tuple[Path, Path]:
    specs = folder / "specs"
    specs.mkdir(parents=True, exist_ok=True)
    for name in ("open-meteo.yaml", "github.yaml"):
        shutil.copy(ROOT / "specs" / name, specs / name)
    agents = folder / "agents.yaml"
    agents.write_text(agents_yaml.format(llm=llm_url, upstream=upstream_url))
    return specs, agents


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


class _Server(uvicorn.Server):
    """uvicorn, noticing `should_exit` within 10 ms rather than on its 100 ms tick: every server test stops one."""

    async def main_loop(self) -> None:
        while not await self.on_tick(0):
            await asyncio.sleep(0.01)


@contextmanager
def running(app: Any, *, root_path: str = "", sock: socket.socket | None = None) -> Iterator[str]:
    """Serve `app` with uvicorn on a free 127.0.0.1 port (or on `sock`, bound already) in a thread; yields the
    base URL.

    `root_path`: as behind a proxy that strips it: uvicorn puts it in front of each request's path."""
    sock = sock or free_socket()
    port = sock.getsockname()[1]
    server = _Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5,
                                    root_path=root_path, **server_options()))  # as `gateway serve` runs it
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the gateway did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


GITHUB_AGENTS = """\
providers:
  openai: {{kind: openai, base_url: "{llm}/v1", api_key: test-key}}
apis:
  github: {{base_url: "{upstream}/gh", auth: {{type: bearer, token: gh-token}}}}
agents:
  dev:
    model: openai/gpt-test
    tools: [{{api: github}}]
    pinned: [users/get-authenticated]
"""
"""An agent on all of GitHub's spec (1,223 operations: tool search on by `auto`) behind a recording upstream."""


def github_project(folder: Path, corpus: Path, llm_url: str, upstream_url: str, extra: str = "") -> tuple[Path, Path]:
    """specs/ with the corpus's GitHub spec and agents.yaml with `GITHUB_AGENTS` (+ `extra` lines)."""
    specs = folder / "specs"
    specs.mkdir()
    (specs / "github.json").symlink_to(corpus / "github" / "api.github.com.json")
    agents = folder / "agents.yaml"
    agents.write_text(GITHUB_AGENTS.format(llm=llm_url, upstream=upstream_url) + extra)
    return specs, agents


@contextmanager
def gateway(folder: Path, llm_url: str, upstream_url: str, *, agents_yaml: str = AGENTS_YAML, root_path: str = "",
            **options: Any) -> Iterator[tuple[str, Any]]:
    specs, agents = write_project(folder, llm_url, upstream_url, agents_yaml)
    runtime = load_runtime(specs, agents, use_cache=False)
    options.setdefault("watch", False)
    app = create_app(RuntimeHolder(runtime), **options)
    with running(app, root_path=root_path) as url:
        yield url, app


@pytest.fixture
def gw(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Iterator[tuple[str, Any]]:
    """(base URL, app) of a running gateway over the example specs."""
    with gateway(tmp_path, llm.url, upstream.url) as served:
        yield served
