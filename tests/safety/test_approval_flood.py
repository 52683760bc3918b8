"""One client's flood of calls waiting for approval (real uvicorn, the SQLite store, a recording upstream)."""

from __future__ import annotations

from pathlib import Path

import httpx
from recording_server import RecordingServer
from server_support import AGENTS_YAML, LenientLLM, running, write_project

from .safety_support import bearer, build_app

INTRUDER, LEGIT, REVIEWER = "ck-intruder-0f1e2d3c4b5a", "ck-legit-a9b8c7d6e5f4", "ck-reviewer-1a2b3c4d5e6f"
FLOODED = AGENTS_YAML + f"""\
clients:
  intruder: {{{{key: {INTRUDER}, agents: [triage]}}}}
  legit: {{{{key: {LEGIT}, agents: [triage]}}}}
  reviewer: {{{{key: {REVIEWER}, agents: [triage], approver: true}}}}
"""
COMMENT = {"owner": "acme", "repo": "app", "issue_number": 7, "body": "ship it"}


def test_one_clients_flood_of_waiting_calls_does_not_hide_anothers_from_its_approver(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    write_project(tmp_path, llm.url, upstream.url, FLOODED)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        path = "/agents/triage/tools/createIssueComment"
        for _ in range(1000):
            assert client.post(path, json=COMMENT, headers=bearer(INTRUDER)).status_code in (202, 429)
        waiting = client.post(path, json=COMMENT, headers=bearer(LEGIT))
        listed = client.get("/approvals?limit=1000", headers=bearer(REVIEWER)).json()["data"]
    safety.store.close()  # type: ignore[attr-defined]
    assert waiting.status_code == 202
    assert waiting.json()["approval_id"] in {a["id"] for a in listed}
    assert upstream.requests == []
