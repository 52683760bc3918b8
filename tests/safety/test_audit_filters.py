"""`GET /audit` filters by agent, client, tool, status, kind and time range, within what the key may see."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from recording_server import RecordingServer
from server_support import LenientLLM

from .safety_support import TRIAGE_KEY, WEATHER_KEY, bearer, safe_gateway

ADMIN_KEY = "ck-admin-audit-0123456789"


def test_audit_filters(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    from .safety_support import SAFE_AGENTS_YAML

    agents_yaml = SAFE_AGENTS_YAML + f"  ops: {{{{key: {ADMIN_KEY}, admin: true}}}}\n"
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=agents_yaml) as (url, _), \
            httpx.Client(base_url=url, timeout=30) as client:
        forecast = {"latitude": 1, "longitude": 2}
        assert client.post("/agents/weather/tools/getForecast", json=forecast, headers=bearer(WEATHER_KEY)).is_success
        middle = time.time()
        time.sleep(0.01)
        issue = {"owner": "acme", "repo": "app", "issue_number": 7}
        assert client.post("/agents/triage/tools/getIssue", json=issue, headers=bearer(TRIAGE_KEY)).is_success
        assert client.post("/agents/triage/tools/getIssue", json={"owner": "acme"},
                           headers=bearer(TRIAGE_KEY)).status_code == 422
        admin = bearer(ADMIN_KEY)

        def tools(query: str, headers: dict[str, str] = admin) -> list[tuple[str, str]]:
            answer = client.get(f"/audit?{query}", headers=headers)
            assert answer.status_code == 200, answer.text
            return [(r["tool"], r["status"]) for r in answer.json()["data"]]

        assert tools("agent=weather") == [("getForecast", "ok")]  # ?agent= was ignored before
        assert tools("client=triage-bot") == [("getIssue", "invalid_arguments"), ("getIssue", "ok")]
        assert tools("tool=getIssue&status=ok") == [("getIssue", "ok")]
        assert tools(f"since={middle}") == [("getIssue", "invalid_arguments"), ("getIssue", "ok")]
        assert tools(f"until={middle}") == [("getForecast", "ok")]
        iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(middle - 3600)) + "Z"
        assert len(tools(f"since={iso}&kind=tool")) == 3
        assert tools("agent=triage", headers=bearer(WEATHER_KEY)) == []  # a filter never widens what a key sees
        bad = client.get("/audit?since=yesterday", headers=admin)
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "since"
