"""A client's key rotated on a serving gateway (`clients.<name>.previous_key`): both keys are the same client while
its callers move, a caller still on the old key does not lock its address out, and removing the old key is a
reload like any other edit. A real server, a real upstream, agents.yaml edited on disk."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import httpx
import pytest
from recording_server import RecordingServer
from server_support import AGENTS_YAML, LenientLLM

from gateway.safety.wrong_keys import BURST

from .safety_support import bearer, safe_gateway

OLD_KEY = "ck-weather-old-0a1b2c3d4e5f"
NEW_KEY = "ck-weather-new-9f8e7d6c5b4a"
ROTATING = AGENTS_YAML + f"""\
clients:
  weather-bot: {{{{key: {NEW_KEY}, previous_key: {OLD_KEY}, agents: [weather]}}}}
"""
CALL = "/agents/weather/tools/getForecast"
ARGS = {"latitude": 52.5, "longitude": 13.4}


def test_both_keys_are_the_client_until_the_old_one_is_removed(tmp_path: Path, llm: LenientLLM,
                                                               upstream: RecordingServer,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="gateway.auth")
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=ROTATING, watch=True,
                      watch_interval=0.05) as (url, safety):
        with httpx.Client(base_url=url, timeout=30) as client:
            # Callers still on the old key, more of them than wrong keys an address may send: none is refused.
            for _ in range(BURST + 3):
                assert client.post(CALL, json=ARGS, headers=bearer(OLD_KEY)).status_code == 200
            assert client.post(CALL, json=ARGS, headers=bearer(NEW_KEY)).status_code == 200
            said = [r.getMessage() for r in caplog.records if "previous_key" in r.getMessage()]
            assert said == ["client 'weather-bot' still sends its previous_key (once a minute at most)"]

            # Every caller moved: the operator removes the old key, and the reload retires it.
            agents = tmp_path / "agents.yaml"
            agents.write_text(agents.read_text().replace(f", previous_key: {OLD_KEY}", ""))
            deadline, answered = time.monotonic() + 30, BURST + 4
            while (old := client.post(CALL, json=ARGS, headers=bearer(OLD_KEY))).status_code == 200:
                answered += 1
                assert time.monotonic() < deadline, "the reload never retired the old key"
                time.sleep(0.05)
            assert old.status_code == 401
            refused = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused a request")]
            assert refused[-1] == f"refused a request from 127.0.0.1 to {CALL}: bad key"  # who, where, why
            assert client.post(CALL, json=ARGS, headers=bearer(NEW_KEY)).status_code == 200
            rows = client.get("/audit", params={"limit": 100}, headers=bearer(NEW_KEY)).json()["data"]
    assert {row["client"] for row in rows} == {"weather-bot"}  # one client whichever key it sent
    assert len(rows) == answered + 1  # every call answered 200, and the last one with the new key
