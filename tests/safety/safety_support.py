"""A running gateway with the safety layer on: client keys, a store file, the example specs, a scripted LLM
and a recording upstream (the server tests' helpers, plus `clients` and `gateway:` settings)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from server_support import AGENTS_YAML, running, write_project

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
