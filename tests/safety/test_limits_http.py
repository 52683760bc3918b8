"""Rate limits and the per-run tool-call cap on a running gateway."""

from __future__ import annotations

from pathlib import Path

import httpx
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import LenientLLM

from .safety_support import SAFE_AGENTS_YAML, TRIAGE_KEY, WEATHER_KEY, bearer, safe_gateway

FORECAST = Call("getForecast", {"latitude": 52.52, "longitude": 13.41, "current": ["temperature_2m"]})
LIMITS = """\
gateway:
  rate_limits:
    client: 3/min
    tools: {{getForecast: 1/min}}
"""


def test_client_buckets_answer_429_with_retry_after(tmp_path: Path, llm: LenientLLM,
                                                    upstream: RecordingServer) -> None:
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=SAFE_AGENTS_YAML + LIMITS) as (url, _):
        with httpx.Client(base_url=url, timeout=30) as client:
            statuses = [client.get("/agents/weather/tools", headers=bearer(WEATHER_KEY)).status_code
                        for _ in range(4)]
            limited = client.get("/v1/models", headers=bearer(WEATHER_KEY))
            other = client.get("/agents/triage/tools", headers=bearer(TRIAGE_KEY))
    assert statuses == [200, 200, 200, 429]
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
    assert limited.json()["error"]["type"] == "rate_limit_error"
    assert other.status_code == 200


def test_a_tool_over_its_limit_is_refused_to_the_model_not_sent(tmp_path: Path, llm: LenientLLM,
                                                                upstream: RecordingServer) -> None:
    llm.script(Reply(calls=[FORECAST]), Reply(calls=[FORECAST]), Reply(text="Enough."))
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=SAFE_AGENTS_YAML + LIMITS) as (url, _):
        with httpx.Client(base_url=url, headers=bearer(TRIAGE_KEY), timeout=30) as client:
            chat = client.post("/v1/chat/completions", headers=bearer(WEATHER_KEY),
                               json={"model": "weather", "messages": [{"role": "user", "content": "twice"}]})
            audit = client.get("/audit", headers=bearer(WEATHER_KEY)).json()["data"]
    steps = chat.json()["gateway"]["steps"]
    assert [s["error_type"] for s in steps] == [None, "rate_limited"]
    assert len([r for r in upstream.requests if r.path.startswith("/meteo")]) == 1
    assert [r["status"] for r in audit if r["kind"] == "tool"] == ["rate_limited", "ok"]


def test_the_tool_call_cap_of_a_run(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    capped = SAFE_AGENTS_YAML.replace("    max_iterations: 4\n", "    max_iterations: 4\n    max_tool_calls: 1\n")
    assert capped != SAFE_AGENTS_YAML
    llm.script(Reply(calls=[FORECAST, FORECAST]), Reply(text="One was enough."))
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=capped) as (url, _):
        with httpx.Client(base_url=url, headers=bearer(WEATHER_KEY), timeout=30) as client:
            chat = client.post("/v1/chat/completions",
                               json={"model": "weather", "messages": [{"role": "user", "content": "twice"}]})
    steps = chat.json()["gateway"]["steps"]
    assert sorted(str(s["error_type"]) for s in steps) == ["None", "rate_limited"]
    assert len([r for r in upstream.requests if r.path.startswith("/meteo")]) == 1


def test_a_direct_call_over_its_tool_limit_is_429_with_retry_after(tmp_path: Path, llm: LenientLLM,
                                                                   upstream: RecordingServer) -> None:
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=SAFE_AGENTS_YAML + LIMITS) as (url, _):
        with httpx.Client(base_url=url, headers=bearer(WEATHER_KEY), timeout=30) as client:
            first = client.post("/agents/weather/tools/getForecast", json=FORECAST.args)
            second = client.post("/agents/weather/tools/getForecast", json=FORECAST.args)
    assert first.status_code == 200
    assert second.status_code == 429 and int(second.headers["retry-after"]) >= 1
    assert second.json()["result"]["error_type"] == "rate_limited"


def test_the_direct_door_charges_the_client_bucket_before_anything_runs(tmp_path: Path, llm: LenientLLM,
                                                                        upstream: RecordingServer) -> None:
    # The direct door admits its routed agent itself (no gate around it): the same charge, before the call runs.
    arguments = {"latitude": 52.52, "longitude": 13.41}
    limits = "gateway:\n  rate_limits:\n    client: 2/min\n"
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=SAFE_AGENTS_YAML + limits) as (url, _):
        with httpx.Client(base_url=url, timeout=30) as client:
            answers = [client.post("/agents/weather/tools/getForecast", json=arguments, headers=bearer(WEATHER_KEY))
                       for _ in range(3)]
            forbidden = client.post("/agents/triage/tools/getForecast", json=arguments, headers=bearer(WEATHER_KEY))
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert int(answers[2].headers["retry-after"]) >= 1 and answers[2].json()["error"]["type"] == "rate_limit_error"
    assert forbidden.status_code == 403  # another client's agent: refused before anything is charged
    assert len([r for r in upstream.requests if r.path == "/meteo/v1/forecast"]) == 2
