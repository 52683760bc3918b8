"""The request envelope: a request it refuses itself is still counted by door and status and gets its access line."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from recording_server import RecordingServer, Reply
from server_support import LenientLLM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "safety"))
from safety_support import SAFE_AGENTS_YAML, WEATHER_KEY, bearer, hang_up_during_a_call, safe_gateway  # noqa: E402

OPS_KEY = "ck-ops-envelope-1f2e3d4c"
"""An admin key: /metrics is the operator's."""


def _requests(text: str, status: str) -> float:
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == "gateway_requests_total" and sample.labels == {"door": "direct", "status": status})


def test_refusals_of_the_envelope_are_counted_and_logged(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer,
                                                         caplog: Any) -> None:
    caplog.set_level(logging.INFO, logger="gateway.access")
    door = "/agents/weather/tools/getForecast"
    yaml = SAFE_AGENTS_YAML + f"  ops: {{{{key: {OPS_KEY}, admin: true}}}}\n"
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=yaml, access_log=True,
                      max_body_bytes=1000) as (url, _):
        with httpx.Client(base_url=url, timeout=30, headers=bearer(WEATHER_KEY)) as client:
            foreign = client.post(door, json={}, headers={"Host": "evil.example"})
            too_big = client.post(door, json={"latitude": 1, "longitude": 2, "timezone": "x" * 2000})
            not_json = client.post(door, content=b"latitude=1", headers={"Content-Type": "text/plain"})
            scraped = client.get("/metrics", headers=bearer(OPS_KEY))
    assert (foreign.status_code, too_big.status_code, not_json.status_code) == (421, 413, 415)
    for status in ("421", "413", "415"):
        assert _requests(scraped.text, status) == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "gateway.access"]
    assert [line.rsplit(" ", 1)[1] for line in lines if door in line] == ["421", "413", "415"]
    assert upstream.requests == []


def test_oversized_headers_and_targets_are_refused_before_any_key_is_checked(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    from gateway.server.limits import MAX_HEADER_BYTES, MAX_HEADERS, MAX_TARGET_BYTES

    door = "/agents/weather/tools/getForecast"
    many = {f"x-pad-{i}": "a" for i in range(MAX_HEADERS + 1)}
    with safe_gateway(tmp_path, llm.url, upstream.url) as (url, _):
        with httpx.Client(base_url=url, timeout=30) as client:  # no key: the limits come first
            too_many = client.post(door, json={}, headers=many)
            too_big = client.post(door, json={}, headers={"x-pad": "a" * MAX_HEADER_BYTES})
            too_long = client.get("/healthz", params={"q": "a" * MAX_TARGET_BYTES})
            fine = client.post(door, json={}, headers={"x-pad": "a" * 8000, **bearer(WEATHER_KEY)})
            keyless = client.post(door, json={})
    assert (too_many.status_code, too_big.status_code, too_long.status_code) == (431, 431, 414)
    assert too_many.json()["error"]["code"] == too_big.json()["error"]["code"] == "request_header_fields_too_large"
    assert f"at most {MAX_HEADERS} fields and {MAX_HEADER_BYTES} bytes" in too_many.json()["error"]["message"]
    assert too_long.json()["error"]["code"] == "uri_too_long"
    assert (fine.status_code, keyless.status_code) == (422, 401)  # ordinary headers go on to the key check
    assert upstream.requests == []


def test_a_call_whose_client_left_is_counted_as_499_not_as_a_failure_of_the_gateway(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    # An operator's alert on 5xx paged for every caller that gave up waiting (seen in a trial: two "500"s in
    # /metrics during a Redis outage, none answered by the gateway).
    upstream.route("/", Reply(200, {"ok": True}, delay=30))
    yaml = SAFE_AGENTS_YAML + f"  ops: {{{{key: {OPS_KEY}, admin: true}}}}\n"
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=yaml) as (url, _):
        hang_up_during_a_call(url, upstream)
        with httpx.Client(base_url=url, timeout=30, headers=bearer(OPS_KEY)) as client:
            deadline = time.monotonic() + 10
            while _requests(scraped := client.get("/metrics").text, "499") == 0:
                assert time.monotonic() < deadline, "the abandoned call was never counted"
                time.sleep(0.05)
    assert _requests(scraped, "499") == 1
    assert _requests(scraped, "500") == 0
