"""A decision either runs its call once or can be made again: when Redis fails before the approved call is sent, or
the decision's own audit row cannot be written (a real PostgreSQL refusing it), the approval is pending again and
a second decision runs the call once. Real uvicorn, Redis and PostgreSQL; a recording upstream counts the writes."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import psycopg
from recording_server import RecordingServer
from server_support import LenientLLM, running
from shared_servers import PostgresServer, RedisServer

from .counted_writes import close_store, received, write_counter_project
from .safety_support import build_app

APPROVED = "tools: [{api: counter}]\n    approval: writes"


def _project(folder: Path, llm: LenientLLM, upstream: RecordingServer, extra: str = "") -> None:
    agents = write_counter_project(folder, llm.url, upstream.url, extra)
    agents.write_text(agents.read_text().replace("tools: [{api: counter}]", APPROVED))


def test_a_resume_that_fails_before_sending_can_be_decided_again(tmp_path: Path, llm: LenientLLM,
                                                                 upstream: RecordingServer,
                                                                 redis_server: RedisServer) -> None:
    _project(tmp_path, llm, upstream, f"gateway:\n  redis: {redis_server.url}\n")
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    try:
        with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
            held = client.post("/agents/writer/tools/write", json={"n": 1})
            approval = held.json()["approval_id"]
            redis_server.halt()
            try:
                first = client.post(f"/approvals/{approval}", json={"decision": "approve"})
                waiting = [a["id"] for a in client.get("/approvals").json()["data"]]
            finally:
                redis_server.start()
            second = client.post(f"/approvals/{approval}", json={"decision": "approve"})
            third = client.post(f"/approvals/{approval}", json={"decision": "approve"})
            rows = client.get("/audit", params={"limit": 100}).json()["data"]
    finally:
        close_store(safety)
    assert held.status_code == 202
    assert first.status_code == 503 and first.json()["error"]["code"] == "approval_reopened"
    assert re.search("Nothing was sent|call was not sent", first.json()["error"]["message"])
    assert waiting == [approval]  # pending again, not used up
    assert second.status_code == 200 and second.json()["result"]["ok"] is True
    assert third.status_code == 409
    assert received(upstream) == {1: 1}  # ran once
    # the refused resume is audited as what it was: not sent, Redis unavailable
    assert sorted(r["status"] for r in rows if r["kind"] == "tool") == ["approval_pending", "ok", "store_unavailable"]
    assert [r["status"] for r in rows if r["kind"] == "decision"] == ["approved", "reopened", "approved"]


def test_a_decision_whose_row_cannot_be_written_can_be_made_again(tmp_path: Path, llm: LenientLLM,
                                                                  upstream: RecordingServer,
                                                                  postgres_server: PostgresServer) -> None:
    store = postgres_server.create_database()
    _project(tmp_path, llm, upstream)
    app, _ = build_app(tmp_path, store=store)  # type: ignore[arg-type]
    with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        approval = client.post("/agents/writer/tools/write", json={"n": 3}).json()["approval_id"]
        with psycopg.connect(store, autocommit=True) as conn:  # the database refuses decision rows for a while
            conn.execute("CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                         "$$ BEGIN RAISE EXCEPTION 'no decisions today'; END $$")
            conn.execute("CREATE TRIGGER refuse_decisions BEFORE INSERT ON audit FOR EACH ROW "
                         "WHEN (NEW.kind = 'decision') EXECUTE FUNCTION refuse()")
        refused = client.post(f"/approvals/{approval}", json={"decision": "approve"})
        waiting = [a["id"] for a in client.get("/approvals").json()["data"]]
        with psycopg.connect(store, autocommit=True) as conn:
            conn.execute("DROP TRIGGER refuse_decisions ON audit")
        decided = client.post(f"/approvals/{approval}", json={"decision": "approve"})
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "audit_unavailable"
    assert waiting == [approval]
    assert decided.status_code == 200 and decided.json()["result"]["ok"] is True
    assert received(upstream) == {3: 1}


OWNER = "ck-owner-5a4b3c2d1e0f9a8b"
REVIEWER = "ck-reviewer-1f2e3d4c5b6a7980"
CLIENTS = f"""\
clients:
  owner: {{key: {OWNER}, agents: [writer]}}
  reviewer: {{key: {REVIEWER}, agents: [writer], approver: true}}
"""


def test_a_decision_taken_back_tells_a_reviewer_not_the_owners_result(tmp_path: Path, llm: LenientLLM,
                                                                      upstream: RecordingServer) -> None:
    """The tool's rate limit refuses the second approved call: the reviewer learns the decision was taken back and
    must be made again, without the refused call's result (the owner's), and the owner is kept no answer (the
    approval is pending, not answered)."""
    limit = "gateway:\n  rate_limits: {tools: {write: {rate: 1/min, burst: 1}}}\n"
    _project(tmp_path, llm, upstream, limit + CLIENTS)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    owner = {"authorization": f"Bearer {OWNER}"}
    reviewer = {"authorization": f"Bearer {REVIEWER}"}
    try:
        with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
            held = [client.post("/agents/writer/tools/write", json={"n": n}, headers=owner).json()["approval_id"]
                    for n in (5, 6)]
            ran = client.post(f"/approvals/{held[0]}", json={"decision": "approve"}, headers=reviewer)
            refused = client.post(f"/approvals/{held[1]}", json={"decision": "approve"}, headers=reviewer)
            kept = client.get(f"/approvals/{held[1]}", headers=owner).json()
            pending = [a["id"] for a in client.get("/approvals", headers=reviewer).json()["data"]]
    finally:
        close_store(safety)
    assert ran.status_code == 200 and ran.json()["status"] == "resumed"  # the answer is the owner's
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "approval_reopened"
    assert "decide it again" in refused.json()["error"]["message"] and "result" not in refused.json()
    assert kept["answer"] is None and kept["run"]["status"] == "paused"
    assert pending == [held[1]]
    assert received(upstream) == {5: 1}
