"""The request envelope: a request it refuses itself is still counted by door and status and gets its access line."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from recording_server import RecordingServer
from server_support import LenientLLM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "safety"))
from safety_support import WEATHER_KEY, bearer, safe_gateway  # noqa: E402


def _requests(text: str, status: str) -> float:
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == "gateway_requests_total" and sample.labels == {"door": "direct", "status": status})


def test_refusals_of_the_envelope_are_counted_and_logged(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer,
                                                         caplog: Any) -> None:
    caplog.set_level(logging.INFO, logger="gateway.access")
    door = "/agents/weather/tools/getForecast"
    with safe_gateway(tmp_path, llm.url, upstream.url, access_log=True, max_body_bytes=1000) as (url, _):
        with httpx.Client(base_url=url, timeout=30, headers=bearer(WEATHER_KEY)) as client:
            foreign = client.post(door, json={}, headers={"Host": "evil.example"})
            too_big = client.post(door, json={"latitude": 1, "longitude": 2, "timezone": "x" * 2000})
            not_json = client.post(door, content=b"latitude=1", headers={"Content-Type": "text/plain"})
            scraped = client.get("/metrics")
    assert (foreign.status_code, too_big.status_code, not_json.status_code) == (421, 413, 415)
    for status in ("421", "413", "415"):
        assert _requests(scraped.text, status) == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "gateway.access"]
    assert [line.rsplit(" ", 1)[1] for line in lines if door in line] == ["421", "413", "415"]
    assert upstream.requests == []
