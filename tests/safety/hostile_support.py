"""A real gateway (uvicorn on 127.0.0.1) whose one api, `hostile`, is a spec of the test's making, sent to an
upstream of the test's making: the judge of redteam46's hostile specs and hostile upstreams."""

from __future__ import annotations

import concurrent.futures
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import running

from gateway.runtime import Runtime, RuntimeHolder, load_runtime
from gateway.server import create_app

OK = {"200": {"description": "ok", "content": {"application/json": {"schema": {}}}}}


def hostile_spec(paths: dict[str, Any]) -> dict[str, Any]:
    return {"openapi": "3.0.3", "info": {"title": "hostile", "version": "1"}, "paths": paths}


def gets(*names: str) -> dict[str, Any]:
    """A spec of one GET per name, at `/<name>`, operationId `<name>`, answering anything (no schema)."""
    anything = {"200": {"description": "anything"}}
    return hostile_spec({f"/{name}": {"get": {"operationId": name, "responses": anything}} for name in names})


@contextmanager
def serving(folder: Path, spec: dict[str, Any], upstream_url: str, api: str = "",
            base_url: bool = True) -> Iterator[tuple[str, Runtime]]:
    """(URL, runtime) of a gateway whose agent `a` has the api `hostile` (`spec`, at `upstream_url`, its base_url
    unless `base_url` is False: then at the spec's servers); `api`: more of the api's settings, as YAML flow mapping
    entries."""
    specs = folder / "specs"
    specs.mkdir()
    (specs / "hostile.json").write_text(json.dumps(spec))
    agents = folder / "agents.yaml"
    agents.write_text(f"""
providers: {{llm: {{kind: openai, base_url: "{upstream_url}/v1", api_key: k}}}}
apis: {{hostile: {{{f'base_url: "{upstream_url}", ' if base_url else ""}{api}}}}}
agents: {{a: {{model: llm/m, tools: [{{api: hostile}}]}}}}
""")
    runtime = load_runtime(specs, agents, use_cache=False)
    with running(create_app(RuntimeHolder(runtime), watch=False)) as url:
        yield url, runtime


def hold(monkeypatch: pytest.MonkeyPatch, real: Callable[..., Any], *owners: Any) -> tuple[threading.Event,
                                                                                        threading.Event]:
    """`real` (a function of the gateway's, named so in each of `owners`' modules) made to wait, once entered, until
    released: `(entered, release)`. What it computes is the gateway's own."""
    entered, release = threading.Event(), threading.Event()

    def held(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        release.wait(30)
        return real(*args, **kwargs)

    for owner in owners:
        monkeypatch.setattr(owner, real.__name__, held)
    return entered, release


def healthz_while_held(url: str, held: tuple[threading.Event, threading.Event],
                       send: Callable[[], httpx.Response]) -> httpx.Response:
    """`send()`'s answer, once /healthz has answered while the held part waited: a part run on the event loop
    would hold /healthz until released, past the hang guard."""
    entered, release = held
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        answer = pool.submit(send)
        assert entered.wait(30)
        try:
            health = httpx.get(f"{url}/healthz", trust_env=False, timeout=10)  # a hang guard, not a measure
        finally:
            release.set()
        assert health.status_code == 200
        return answer.result()
