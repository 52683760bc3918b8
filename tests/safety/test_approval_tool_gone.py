"""An approval whose tool a reload took away (a real server watching its agents.yaml, the SQLite store, a recording
upstream): approving it would run nothing, so the decider is told so and may deny it; before, the decider read
"resumed" and only the run's owner saw the call fail as an unknown tool."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from recording_server import RecordingServer
from server_support import AGENTS_YAML, LenientLLM

from .safety_support import bearer, safe_gateway

ASKER, REVIEWER = "ck-asker-7e6d5c4b3a29", "ck-reviewer-2b3c4d5e6f70"
CLIENTS = AGENTS_YAML + f"""\
clients:
  asker: {{{{key: {ASKER}, agents: [triage]}}}}
  reviewer: {{{{key: {REVIEWER}, agents: [triage], approver: true}}}}
"""
COMMENT = {"owner": "acme", "repo": "app", "issue_number": 7, "body": "ship it"}


def test_approving_a_call_whose_tool_a_reload_took_away_is_refused_and_it_can_be_denied(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=CLIENTS, watch=True, watch_interval=0.05) as (
            url, _), httpx.Client(base_url=url, timeout=30) as client:
        held = client.post("/agents/triage/tools/createIssueComment", json=COMMENT, headers=bearer(ASKER))
        assert held.status_code == 202
        approval = held.json()["approval_id"]

        agents = tmp_path / "agents.yaml"
        agents.write_text(agents.read_text().replace("      - api: github\n",
                                                     "      - {api: github, exclude: [createIssueComment]}\n"))
        deadline = time.monotonic() + 30
        while "createIssueComment" in client.get("/agents/triage/tools", headers=bearer(REVIEWER)).text:
            assert time.monotonic() < deadline, "the reload never took the tool away"
            time.sleep(0.05)

        approved = client.post(f"/approvals/{approval}", json={"decision": "approve"}, headers=bearer(REVIEWER))
        assert approved.status_code == 409
        assert approved.json()["error"]["code"] == "tool_gone"
        assert approved.json()["error"]["message"] == (
            "'createIssueComment' is no longer a tool of agent 'triage' (a reload of the specs or agents.yaml took it "
            f"away): approved, it would run nothing. Deny approval {approval}; its run then goes on without it.")
        assert client.get(f"/approvals/{approval}", headers=bearer(REVIEWER)).json()["approval"]["status"] == \
            "pending"

        denied = client.post(f"/approvals/{approval}", json={"decision": "deny", "reason": "gone"},
                             headers=bearer(REVIEWER))
        assert denied.status_code == 200
        assert client.get(f"/approvals/{approval}", headers=bearer(REVIEWER)).json()["approval"]["status"] == \
            "denied"
    assert upstream.requests == []
