"""A running gateway with the safety layer on: client keys, a store file, the example specs, a scripted LLM
and a recording upstream (the server tests' helpers, plus `clients` and `gateway:` settings)."""

from __future__ import annotations

import socket
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from recording_server import Recorded, RecordingServer, Reply
from server_support import AGENTS_YAML, ISSUE, running, write_project

from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app
from gateway.server.supervision import Safety

WEATHER_KEY = "ck-weather-5f1e2d3c4b5a6978"
TRIAGE_KEY = "ck-triage-a1b2c3d4e5f60718"
API_TOKEN = "gh-secret-token"
"""The github api's bearer token in server_support.AGENTS_YAML."""
PROVIDER_KEY = "test-key"

CLIENTS_YAML = f"""\
clients:
  weather-bot: {{{{key: {WEATHER_KEY}, agents: [weather]}}}}
  triage-bot: {{{{key: {TRIAGE_KEY}, agents: [triage], approver: true}}}}
"""

SAFE_AGENTS_YAML = AGENTS_YAML + CLIENTS_YAML


def delegating_yaml(lead: str, clients: str, *, approval: str = "never") -> str:
    """agents.yaml with a `lead` agent (open-meteo's tools, under `approval`) that delegates to `worker` (github's
    tools, approval: never), and the `clients:` entries given (one YAML line each, indented two spaces)."""
    return AGENTS_YAML + f"""\
  {lead}:
    model: openai/gpt-test
    tools: [{{{{api: open-meteo}}}}]
    approval: {approval}
    delegates: [worker]
  worker:
    model: openai/gpt-test
    tools: [{{{{api: github}}}}]
    approval: never
clients:
{clients}"""


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def build_app(folder: Path, *, store: Path | str, **options: Any) -> tuple[Any, Safety]:
    """A new app instance (as after a restart) over the project in `folder` and the store file."""
    runtime = load_runtime(folder / "specs", folder / "agents.yaml", use_cache=False)
    safety = Safety.open(runtime, store=str(store))
    options.setdefault("watch", False)
    return create_app(RuntimeHolder(runtime), **{**safety.app_options(), **options}), safety


@contextmanager
def safe_gateway(folder: Path, llm_url: str, upstream_url: str, *, agents_yaml: str = SAFE_AGENTS_YAML,
                 store: Path | str | None = None, **options: Any) -> Iterator[tuple[str, Safety]]:
    """The gateway on its own server; `store`: a file (default: state.db in `folder`) or a PostgreSQL URL."""
    write_project(folder, llm_url, upstream_url, agents_yaml)
    app, safety = build_app(folder, store=store or folder / "state.db", **options)
    try:
        with running(app) as url:
            yield url, safety
    finally:
        close = getattr(safety.store, "close", None)  # SQLite's file; a PostgreSQL pool went with the server's loop
        if close is not None:
            close()


class Served:
    """A running gateway, its store file, and what the audit log held while the upstream had issue 7's request."""

    def __init__(self, url: str, store: Path, admin_key: str) -> None:
        self.url = url
        self.store = store
        self.admin_key = admin_key
        self.seen: list[list[dict[str, Any]]] = []

    def rows(self) -> list[dict[str, Any]]:
        """Every audit row, oldest first, as `GET /audit` gives them (read by an admin key)."""
        answer = httpx.get(f"{self.url}/audit", params={"limit": 1000}, headers=bearer(self.admin_key), timeout=30)
        assert answer.status_code == 200, answer.text
        return list(reversed(answer.json()["data"]))

    def stored(self) -> list[dict[str, Any]]:
        with sqlite3.connect(self.store) as db:
            found = db.execute("SELECT kind, agent, tool, status FROM audit ORDER BY id").fetchall()
        return [{"kind": kind, "agent": agent, "tool": tool, "status": status} for kind, agent, tool, status in found]


def chat_step_rows(served: Served, key: str, model: str) -> tuple[dict[str, Any], dict[str, Any],
                                                                   list[dict[str, Any]]]:
    """One chat (asking about issue 7) on the served gateway, answered: its body, its one step, and the audit's
    rows after it."""
    answer = httpx.post(f"{served.url}/v1/chat/completions", headers=bearer(key), timeout=30,
                        json={"model": model, "messages": [{"role": "user", "content": "what is issue 7?"}]})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    (step,) = body["gateway"]["steps"]
    return body, step, served.rows()


@contextmanager
def served_gateway(folder: Path, llm_url: str, upstream: RecordingServer, agents_yaml: str,
                   admin_key: str) -> Iterator[Served]:
    """`safe_gateway` on a store file, with the audit log's rows noted while issue 7's request is upstream."""
    store = folder / "state.db"
    with safe_gateway(folder, llm_url, upstream.url, agents_yaml=agents_yaml, store=store) as (url, _):
        found = Served(url, store, admin_key)

        def issue(request: Recorded) -> Reply:
            found.seen.append(found.stored())  # what the log says while the call is upstream
            return Reply(200, ISSUE)

        upstream.route("/github/repos/acme/app/issues/7", issue)
        yield found


def hang_up_during_a_call(url: str, upstream: RecordingServer, key: str = WEATHER_KEY) -> None:
    """A direct call of weather's getForecast sent on a raw socket, which is closed once the upstream has the
    call (a client that gave up waiting)."""
    address = urlsplit(url)
    body = b'{"latitude": 52.5, "longitude": 13.4}'
    with socket.create_connection((address.hostname, address.port)) as sock:
        sock.sendall(b"POST /agents/weather/tools/getForecast HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Authorization: Bearer " + key.encode() + b"\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body)
        deadline = time.monotonic() + 10
        while not upstream.requests:  # the call reached the api (its row says `running`); then the client leaves
            assert time.monotonic() < deadline, "the call never reached the api"
            time.sleep(0.02)
