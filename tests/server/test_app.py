"""The app's lifecycle: hot reload rebuilds the executors, shutdown lets in-flight requests finish."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
from recording_server import RecordingServer, Reply
from server_support import AGENTS_YAML, FORECAST, LenientLLM, gateway, route_upstream, running, write_project

from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app


def _wait_for(predicate: Any, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.05)


def test_reload_swaps_agents_and_rebuilds_the_executor(tmp_path: Path, llm: LenientLLM,
                                                       upstream: RecordingServer) -> None:
    with RecordingServer() as second:
        route_upstream(second)
        with gateway(tmp_path, llm.url, upstream.url, watch=True, watch_interval=0.05) as (url, app):
            first_generation = app.state.gateway.current
            changed = AGENTS_YAML.replace("max_iterations: 4", "max_iterations: 4\n  forecaster:\n"
                                          "    model: openai/gpt-test\n    tools: [{{api: open-meteo}}]")
            (tmp_path / "agents.yaml").write_text(changed.format(llm=llm.url, upstream=second.url))

            _wait_for(lambda: "forecaster" in [m["id"] for m in httpx.get(f"{url}/v1/models").json()["data"]])
            response = httpx.post(f"{url}/agents/forecaster/tools/getForecast", json={"latitude": 1, "longitude": 2})
            assert response.status_code == 200
            assert second.last.path == "/meteo/v1/forecast"  # the new base_url: a new executor
            assert not [r for r in upstream.requests if r.path.startswith("/meteo")]
            assert app.state.gateway.reloads == 1
            assert first_generation.closed  # no request held it: its clients are closed

            (tmp_path / "agents.yaml").write_text("agents: {broken: [")  # a bad edit keeps the last good one
            _wait_for(lambda: app.state.gateway.holder.last_error is not None)  # the watcher tried it
            assert "forecaster" in [m["id"] for m in httpx.get(f"{url}/v1/models").json()["data"]]


def test_a_reload_changes_the_hosts_answered_from_the_next_request(tmp_path: Path, llm: LenientLLM,
                                                                   upstream: RecordingServer) -> None:
    # The envelope reads the host policy the reload swapped in (it no longer looks at the manifest per request).
    with gateway(tmp_path, llm.url, upstream.url, watch=True, watch_interval=0.05) as (url, app):
        foreign = {"Host": "gw.example.com"}
        assert httpx.get(f"{url}/v1/models", headers=foreign).status_code == 421
        allowed = AGENTS_YAML + "gateway: {{allowed_hosts: [gw.example.com]}}\n"
        (tmp_path / "agents.yaml").write_text(allowed.format(llm=llm.url, upstream=upstream.url))
        _wait_for(lambda: app.state.gateway.reloads == 1)
        assert httpx.get(f"{url}/v1/models", headers=foreign).status_code == 200
        (tmp_path / "agents.yaml").write_text(AGENTS_YAML.format(llm=llm.url, upstream=upstream.url))
        _wait_for(lambda: app.state.gateway.reloads == 2)
        assert httpx.get(f"{url}/v1/models", headers=foreign).status_code == 421


def test_shutdown_lets_an_in_flight_call_finish(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    upstream.route("/meteo/", Reply(200, FORECAST, delay=1.0))
    specs, agents = write_project(tmp_path, llm.url, upstream.url)
    app = create_app(RuntimeHolder(load_runtime(specs, agents, use_cache=False)), watch=False)
    answers: list[httpx.Response] = []
    with running(app) as url:
        call = threading.Thread(target=lambda: answers.append(
            httpx.post(f"{url}/agents/weather/tools/getForecast", json={"latitude": 1, "longitude": 2}, timeout=30)))
        call.start()
        _wait_for(lambda: len(upstream.requests) == 1)
    # leaving `running` asked uvicorn to exit while the upstream was still answering
    call.join(timeout=30)
    assert answers and answers[0].status_code == 200
    assert answers[0].json()["body"] == FORECAST
