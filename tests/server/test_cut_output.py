"""A body cut to the result's size is still judged against the spec's output schema: whole, when the gateway read it
to its end (the model reads the cut; what drifted past the cut is `invalid_output` all the same), and when its
end never came (cut where reading stops) the result says that nothing judged it. Real uvicorn gateway, real
upstream on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from recording_server import RecordingServer, Reply
from safety.safety_support import safe_gateway
from server_support import FORECAST, LenientLLM

AGENTS = """\
providers:
  openai: {{kind: openai, base_url: "{llm}/v1", api_key: test-key}}
apis:
  open-meteo: {{base_url: "{upstream}/meteo"}}
agents:
  weather:
    model: openai/gpt-test
    tools: [{{api: open-meteo}}]
"""
ARGS = {"latitude": 52.52, "longitude": 13.41, "hourly": ["temperature_2m"]}
HOURS = 30_000  # about 150 KB of numbers: past the 64,000 bytes a result shows, within what is read


def _forecast(last: Any) -> dict[str, Any]:
    return {**FORECAST, "hourly": {"time": list(range(HOURS)), "temperature_2m": [1.5] * (HOURS - 1) + [last]}}


@pytest.fixture
def served(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Iterator[str]:
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=AGENTS) as (url, _):
        yield url


def _call(url: str) -> httpx.Response:
    return httpx.post(f"{url}/agents/weather/tools/getForecast", json=ARGS, timeout=30)


def test_a_body_that_drifts_past_the_cut_is_invalid_output(served: str, upstream: RecordingServer) -> None:
    upstream.route("/meteo/v1/forecast", Reply(200, _forecast("hot")))  # the last hour: text, not a number
    answer = _call(served)
    assert answer.status_code == 502, answer.text
    result = answer.json()["result"]
    assert result["error_type"] == "invalid_output" and result["truncated"] is True
    assert "does not match the spec's output schema" in result["error"]


def test_a_whole_body_that_holds_is_passed_on_cut(served: str, upstream: RecordingServer) -> None:
    upstream.route("/meteo/v1/forecast", Reply(200, _forecast(2.5)))
    result = _call(served).json()
    assert result["ok"] is True and result["truncated"] is True and "warning" not in result


def test_a_body_whose_end_never_came_says_it_was_not_checked(served: str, upstream: RecordingServer) -> None:
    upstream.route("/meteo/v1/forecast", Reply(200, b"", headers={"Content-Type": "application/json"}, endless=True))
    result = _call(served).json()
    assert result["ok"] is True and result["truncated"] is True
    assert "cut at the gateway's read limit" in result["warning"]
    assert "not checked against the spec's output schema" in result["warning"]
