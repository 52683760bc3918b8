"""Who may decide and who may read (issue #27), against a real gateway on a SQLite store: two plain keys share the
triage agent, an approver decides its calls, an admin sees everything. The attack's cases: a plain key reading
another's audit rows, editing and approving its pending call and receiving its answer; the requesting key approving
its own write."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import AGENTS_YAML, LenientLLM

from .safety_support import bearer, safe_gateway

ALICE = "ck-alice-6d1c0b9a8f7e6d5c"
BOB = "ck-bob-1a2b3c4d5e6f7a8b"
REVIEWER = "ck-reviewer-9e8d7c6b5a4f3e2d"
ADMIN = "ck-admin-0f1e2d3c4b5a6978"
RIGHTS_YAML = AGENTS_YAML + f"""\
clients:
  alice-bot: {{{{key: {ALICE}, agents: [triage]}}}}
  bob-bot: {{{{key: {BOB}, agents: [triage, weather]}}}}
  reviewer: {{{{key: {REVIEWER}, agents: [triage], approver: true}}}}
  ops: {{{{key: {ADMIN}, admin: true}}}}
"""
COMMENT = Call("createIssueComment", {"owner": "acme", "repo": "app", "issue_number": 7, "body": "On it."})


@pytest.fixture
def gw(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Iterator[httpx.Client]:
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=RIGHTS_YAML) as (url, _), \
            httpx.Client(base_url=url, timeout=30) as client:
        yield client


def _writes(upstream: RecordingServer) -> list[str]:
    return [r.path for r in upstream.requests if r.method == "POST"]


def _pause_alices_chat(gw: httpx.Client, llm: LenientLLM) -> tuple[str, str]:
    """Alice's chat, paused at its write: (run id, approval id)."""
    llm.script(Reply(calls=[COMMENT]), Reply(text="Commented for alice."))
    paused = gw.post("/v1/chat/completions", headers=bearer(ALICE),
                     json={"model": "triage", "messages": [{"role": "user", "content": "ack #7"}]}).json()
    (pending,) = paused["gateway"]["pending_approvals"]
    return paused["id"], pending["id"]


def test_a_plain_key_sees_and_decides_nothing_of_another_client(gw: httpx.Client, llm: LenientLLM,
                                                                 upstream: RecordingServer) -> None:
    run_id, approval = _pause_alices_chat(gw, llm)
    bob = bearer(BOB)
    assert gw.get("/approvals", headers=bob).json()["data"] == []
    assert gw.get(f"/approvals/{approval}", headers=bob).status_code == 404
    assert gw.get("/audit", headers=bob).json()["data"] == []
    assert gw.get(f"/audit?run_id={run_id}", headers=bob).json()["data"] == []
    assert gw.get("/audit?client=alice-bot", headers=bob).json()["data"] == []
    edited = {**COMMENT.args, "body": "bob was here"}
    refused = gw.post(f"/approvals/{approval}", headers=bob, json={"decision": "approve", "arguments": edited})
    assert refused.status_code == 403 and "approver" in refused.json()["error"]["message"]
    assert _writes(upstream) == []  # nothing ran
    # Alice sees her own, and only her own, rows and pending call.
    assert [a["id"] for a in gw.get("/approvals", headers=bearer(ALICE)).json()["data"]] == [approval]
    rows = gw.get("/audit", headers=bearer(ALICE)).json()["data"]
    assert rows and {r["client"] for r in rows} == {"alice-bot"}


def test_the_requesting_key_may_not_approve_its_own_write(gw: httpx.Client, llm: LenientLLM,
                                                          upstream: RecordingServer) -> None:
    _, approval = _pause_alices_chat(gw, llm)
    for decision in ("approve", "deny"):
        own = gw.post(f"/approvals/{approval}", headers=bearer(ALICE), json={"decision": decision})
        assert own.status_code == 403
    assert _writes(upstream) == []
    shown = gw.get(f"/approvals/{approval}", headers=bearer(ALICE)).json()
    assert shown["approval"]["status"] == "pending" and shown["answer"] is None  # still waiting, not used up


def test_an_approver_decides_and_the_answer_goes_to_the_runs_owner(gw: httpx.Client, llm: LenientLLM,
                                                                   upstream: RecordingServer) -> None:
    run_id, approval = _pause_alices_chat(gw, llm)
    assert [a["id"] for a in gw.get("/approvals", headers=bearer(REVIEWER)).json()["data"]] == [approval]
    decided = gw.post(f"/approvals/{approval}", headers=bearer(REVIEWER), json={"decision": "approve"})
    assert decided.status_code == 200
    body = decided.json()
    assert "choices" not in body and "Commented for alice." not in decided.text  # not the reviewer's to read
    assert body["status"] == "resumed" and body["run"] == {"id": run_id, "agent": "triage", "state": "done",
                                                            "owner": "alice-bot"}
    assert _writes(upstream) == ["/github/repos/acme/app/issues/7/comments"]
    # The owner reads the answer; the reviewer and another plain key do not.
    mine = gw.get(f"/approvals/{approval}", headers=bearer(ALICE)).json()
    assert mine["approval"]["status"] == "approved" and mine["approval"]["decided_by"] == "reviewer"
    assert mine["answer"]["choices"][0]["message"]["content"] == "Commented for alice."
    assert "answer" not in gw.get(f"/approvals/{approval}", headers=bearer(REVIEWER)).json()
    assert gw.get(f"/approvals/{approval}", headers=bearer(BOB)).status_code == 404
    # The run went on as alice: its calls and chat are hers in the log; the decision is the reviewer's.
    rows = gw.get(f"/audit?run_id={run_id}", headers=bearer(ADMIN)).json()["data"]
    assert {(r["kind"], r["client"]) for r in rows} == {("tool", "alice-bot"), ("chat", "alice-bot"),
                                                        ("decision", "reviewer")}
    assert {r["kind"] for r in gw.get(f"/audit?run_id={run_id}", headers=bearer(ALICE)).json()["data"]} == {
        "tool", "chat"}
    # The answer cannot be read as a stored Response either.
    assert gw.get(f"/v1/responses/answer_{run_id}", headers=bearer(ALICE)).status_code == 404


def test_a_direct_calls_result_goes_to_its_owner(gw: httpx.Client, upstream: RecordingServer) -> None:
    held = gw.post("/agents/triage/tools/createIssueComment", headers=bearer(ALICE), json=COMMENT.args).json()
    approval = held["approval_id"]
    decided = gw.post(f"/approvals/{approval}", headers=bearer(ADMIN), json={"decision": "approve"}).json()
    assert "result" not in decided and decided["run"]["owner"] == "alice-bot"
    assert _writes(upstream) == ["/github/repos/acme/app/issues/7/comments"]
    answer = gw.get(f"/approvals/{approval}", headers=bearer(ALICE)).json()["answer"]
    assert answer["result"]["ok"] is True and answer["result"]["status"] == 201


def test_an_approver_decides_only_for_its_agents_and_admin_sees_all(gw: httpx.Client, llm: LenientLLM) -> None:
    llm.script(Reply(calls=[Call("getForecast", {"latitude": 1, "longitude": 2})]), Reply(text="fine"))
    gw.post("/v1/chat/completions", headers=bearer(BOB),
            json={"model": "weather", "messages": [{"role": "user", "content": "weather?"}]})
    _, approval = _pause_alices_chat(gw, llm)
    reviewer_rows = gw.get("/audit", headers=bearer(REVIEWER)).json()["data"]
    assert {r["agent"] for r in reviewer_rows} == {"triage"}  # its agents' rows, whoever asked
    admin_rows = gw.get("/audit", headers=bearer(ADMIN)).json()["data"]
    assert {r["agent"] for r in admin_rows} == {"triage", "weather"}
    assert [a["id"] for a in gw.get("/approvals", headers=bearer(ADMIN)).json()["data"]] == [approval]


def test_without_clients_nothing_changes(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=AGENTS_YAML) as (url, _), \
            httpx.Client(base_url=url, timeout=30) as client:
        llm.script(Reply(calls=[COMMENT]), Reply(text="Commented."))
        paused = client.post("/v1/chat/completions",
                             json={"model": "triage", "messages": [{"role": "user", "content": "ack #7"}]}).json()
        (pending,) = paused["gateway"]["pending_approvals"]
        assert [a["id"] for a in client.get("/approvals").json()["data"]] == [pending["id"]]
        done = client.post(f"/approvals/{pending['id']}", json={"decision": "approve"})
        assert done.status_code == 200 and done.json()["choices"][0]["message"]["content"] == "Commented."
        assert client.get("/audit").json()["data"]
        assert _writes(upstream) == ["/github/repos/acme/app/issues/7/comments"]
