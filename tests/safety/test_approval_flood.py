"""One client's flood of calls waiting for approval (real uvicorn, the SQLite store, a recording upstream)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from recording_server import Recorded, RecordingServer
from recording_server import Reply as RecordedReply
from scripted_llm import Call, Reply
from server_support import AGENTS_YAML, LenientLLM, running, write_project

from gateway.cli.commands import main
from gateway.store import open_store

from .safety_support import bearer, build_app, safe_gateway

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


def _capped(cap: int | None) -> str:
    return FLOODED + f"gateway: {{{{max_pending_approvals_per_client: {'null' if cap is None else cap}}}}}\n"


def test_past_its_cap_a_clients_call_is_refused_unsent_with_a_429_and_audited(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    write_project(tmp_path, llm.url, upstream.url, _capped(2))
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        path = "/agents/triage/tools/createIssueComment"
        held = [client.post(path, json=COMMENT, headers=bearer(INTRUDER)) for _ in range(2)]
        refused = client.post(path, json=COMMENT, headers=bearer(INTRUDER))
        other = client.post(path, json=COMMENT, headers=bearer(LEGIT))  # another client's room is its own
        rows = client.get("/audit?client=intruder&status=rate_limited", headers=bearer(REVIEWER)).json()["data"]
        denied = client.post(f"/approvals/{held[0].json()['approval_id']}", headers=bearer(REVIEWER),
                             json={"decision": "deny", "reason": "one at a time"})
        again = client.post(path, json=COMMENT, headers=bearer(INTRUDER))  # a decision made room for one
        waiting = client.get("/approvals?client=intruder", headers=bearer(REVIEWER)).json()["data"]
    safety.store.close()  # type: ignore[attr-defined]
    assert [a.status_code for a in held] == [202, 202] and other.status_code == 202
    assert refused.status_code == 429, refused.text
    error = refused.json()["error"]
    assert error["code"] == "rate_limited"
    assert "as many calls waiting for a human's approval as it may (2: gateway.max_pending_approvals_per_client)" \
        in error["message"]
    assert [(r["tool"], r["status"]) for r in rows] == [("createIssueComment", "rate_limited")]
    assert denied.status_code == 200 and again.status_code == 202
    assert {a["id"] for a in waiting} == {held[1].json()["approval_id"], again.json()["approval_id"]}
    assert upstream.requests == []


def test_an_approver_sees_every_clients_waiting_calls_and_can_ask_for_one_clients(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    write_project(tmp_path, llm.url, upstream.url, _capped(None))  # no cap: the listing alone must be fair
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        path = "/agents/triage/tools/createIssueComment"
        flood = [client.post(path, json=COMMENT, headers=bearer(INTRUDER)).json()["approval_id"] for _ in range(30)]
        legit = client.post(path, json=COMMENT, headers=bearer(LEGIT)).json()["approval_id"]
        first = client.get("/approvals?limit=5", headers=bearer(REVIEWER)).json()["data"]
        theirs = client.get("/approvals?client=legit", headers=bearer(REVIEWER)).json()["data"]
        oldest = client.get("/approvals?client=intruder&limit=3", headers=bearer(REVIEWER)).json()["data"]
        own = client.get("/approvals?client=intruder", headers=bearer(LEGIT)).json()["data"]  # not its to see
        nul = client.get("/approvals?client=a%00b", headers=bearer(REVIEWER))
        assert client.post("/console/signin", json={"key": REVIEWER}).status_code == 200  # the console's inbox
        inbox = client.get("/console/approvals?limit=5").text
        filtered = client.get("/console/approvals?client=legit").text
    safety.store.close()  # type: ignore[attr-defined]
    assert legit in inbox and 'href="/console/approvals?client=intruder"' in inbox  # one click to one client's
    assert legit in filtered and not any(f in filtered for f in flood)
    assert legit in {a["id"] for a in first} and len(first) == 5
    assert [a["created"] for a in first] == sorted(a["created"] for a in first)  # shown oldest first
    assert [a["id"] for a in theirs] == [legit]
    assert [a["id"] for a in oldest] == flood[:3]
    assert own == [] and nul.status_code == 400


def test_a_chat_past_its_clients_cap_gives_the_model_the_refusal_and_goes_on(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    write_project(tmp_path, llm.url, upstream.url, _capped(1))
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    llm.script(Reply(calls=[Call("createIssueComment", COMMENT)]),  # the first chat waits for a human
               Reply(calls=[Call("createIssueComment", COMMENT)]), Reply(text="I could not comment yet."))
    chat = {"model": "triage", "messages": [{"role": "user", "content": "comment on issue 7"}]}
    with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        paused = client.post("/v1/chat/completions", json=chat, headers=bearer(INTRUDER))
        refused = client.post("/v1/chat/completions", json=chat, headers=bearer(INTRUDER))
        rows = client.get("/audit?client=intruder&kind=tool", headers=bearer(REVIEWER)).json()["data"]
        waiting = client.get("/approvals", headers=bearer(REVIEWER)).json()["data"]
    safety.store.close()  # type: ignore[attr-defined]
    assert paused.status_code == 200 and len(paused.json()["gateway"]["pending_approvals"]) == 1
    assert refused.status_code == 200, refused.text
    body = refused.json()
    assert body["choices"][0]["message"]["content"] == "I could not comment yet."
    assert body["gateway"]["pending_approvals"] == []
    assert [(s["tool"], s["error_type"]) for s in body["gateway"]["steps"]] == [("createIssueComment", "rate_limited")]
    told = [m for m in llm.bodies()[-1]["messages"] if m["role"] == "tool"]
    assert "gateway.max_pending_approvals_per_client" in told[-1]["content"]  # the model read why
    assert [r["status"] for r in rows].count("rate_limited") == 1
    assert [a["id"] for a in waiting] == [paused.json()["gateway"]["pending_approvals"][0]["id"]]
    assert upstream.requests == []


def test_the_terminal_lists_whose_call_waits_and_one_clients_on_request(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, capsys: pytest.CaptureFixture[str]) -> None:
    write_project(tmp_path, llm.url, upstream.url, FLOODED)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        path = "/agents/triage/tools/createIssueComment"
        flood = [client.post(path, json=COMMENT, headers=bearer(INTRUDER)).json()["approval_id"] for _ in range(3)]
        legit = client.post(path, json=COMMENT, headers=bearer(LEGIT)).json()["approval_id"]
    safety.store.close()  # type: ignore[attr-defined]
    common = ["--specs", str(tmp_path / "specs"), "--agents", str(tmp_path / "agents.yaml"), "--no-cache",
              "--store", str(tmp_path / "state.db")]
    assert main(["approvals", *common]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [*flood, legit]  # every client's, oldest first
    assert [line.split()[2] for line in lines] == ["intruder"] * 3 + ["legit"]  # whose call each is (after its time)
    assert main(["approvals", *common, "--client", "legit", "--json"]) == 0
    assert [a["id"] for a in json.loads(capsys.readouterr().out)] == [legit]


SCRIPT = 'createIssueComment(owner="acme", repo="app", issue_number=7, body="ship it")'


def test_the_cap_holds_at_the_mcp_door_and_for_scripts(tmp_path: Path, llm: LenientLLM,
                                                        upstream: RecordingServer) -> None:
    """mend45's left item: the cap was tested on the direct door and in chats only. Over MCP (the official client,
    with the intruder's key) a call past it is the tool's error, unsent; a script whose call would pass it is not
    kept waiting (its call refused, on MCP and on the direct door alike); each refusal has its audit row."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    coded = _capped(1).replace("    approval: writes\n", "    approval: writes\n    code_mode: on\n")
    write_project(tmp_path, llm.url, upstream.url, coded)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")

    async def over_mcp(url: str) -> list[Any]:
        async with httpx.AsyncClient(headers=bearer(INTRUDER), timeout=30) as http, \
                Client(streamable_http_client(f"{url}/mcp/triage", http_client=http)) as session:
            return [await session.call_tool("createIssueComment", COMMENT),
                    await session.call_tool("createIssueComment", COMMENT),
                    await session.call_tool("run_code", {"code": SCRIPT})]

    with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        held, refused, script = anyio.run(over_mcp, url)
        llm.script(Reply(calls=[Call("run_code", {"code": SCRIPT})]), Reply(text="no room"))
        chat = client.post("/v1/chat/completions", headers=bearer(INTRUDER),
                           json={"model": "triage", "messages": [{"role": "user", "content": "comment"}]})
        waiting = client.get("/approvals?client=intruder", headers=bearer(REVIEWER)).json()["data"]
        rows = client.get("/audit?client=intruder&limit=50", headers=bearer(REVIEWER)).json()["data"]
    safety.store.close()  # type: ignore[attr-defined]
    assert held.is_error and "approval" in held.content[0].text
    assert refused.is_error and refused.content[0].text.startswith("Error (rate_limited)")
    assert "(1: gateway.max_pending_approvals_per_client)" in refused.content[0].text
    assert script.is_error and "max_pending_approvals_per_client" in script.content[0].text, script.content
    # In a chat the script's call is refused and the script goes on (it fails here, as it does not catch it): the
    # model reads that as run_code's result, and the chat answers; the run was not paused past the cap.
    assert chat.status_code == 200, chat.text
    (step,) = chat.json()["gateway"]["steps"]
    assert step["tool"] == "run_code" and "max_pending_approvals_per_client" in step["error"]
    assert [(s["tool"], s["error_type"]) for s in step["steps"]] == [("createIssueComment", "rate_limited")]
    assert len(waiting) == 1  # only the first call waits: no script was kept past the cap
    statuses = [(r["tool"], r["status"]) for r in reversed(rows) if r["kind"] == "tool"]
    assert statuses.count(("createIssueComment", "rate_limited")) == 2, statuses  # MCP's own, the chat script's
    assert ("run_code", "approval_pending") not in statuses  # no script recorded as waiting
    assert upstream.requests == []


READ = 'getIssue(owner="acme", repo="app", issue_number=8)["number"]'


def test_two_scripts_in_one_turn_the_second_told_to_wait_for_the_firsts_approval_not_the_chat_refused(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    """A turn with two scripts, each with a call under approval, and room for one waiting call: the first script
    waits, the second's call is refused unsent with a message that says what to do (call it again in a new script:
    the first's approval is decided by the time the model reads it), and the chat pauses for the first. Each script
    looked for room for itself alone, so the run paused with two, which the cap could not keep: the whole chat was
    refused with 429. The scripts of a turn run in order, each with its own audit row."""
    coded = _capped(1).replace("    approval: writes\n", "    approval: writes\n    code_mode: on\n")
    llm.script(Reply(calls=[Call("run_code", {"code": SCRIPT}, id="s1"), Call("run_code", {"code": SCRIPT}, id="s2")]),
               Reply(text="commented once; asking again"))
    chat = {"model": "triage", "messages": [{"role": "user", "content": "comment on issue 7 twice"}]}
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=coded) as (url, _), \
            httpx.Client(base_url=url, timeout=30) as client:
        paused = client.post("/v1/chat/completions", json=chat, headers=bearer(INTRUDER))
        (pending,) = paused.json()["gateway"]["pending_approvals"]
        decided = client.post(f"/approvals/{pending['id']}", json={"decision": "approve"}, headers=bearer(REVIEWER))
        rows = client.get("/audit?client=intruder&limit=50", headers=bearer(REVIEWER)).json()["data"]
    assert paused.status_code == 200, paused.text
    assert pending["tool"] == "createIssueComment"
    assert decided.status_code == 200, decided.text
    first, second = (json.loads(m["content"]) for m in llm.requests[1].body["messages"] if m["role"] == "tool")
    assert first["id"] == 99  # the first script's comment, made once approved
    assert second["error_type"] == "code_error"  # the script did not catch its call's refusal
    assert "An earlier run_code script of this turn took that place" in second["error"], second
    assert "call createIssueComment again, in a new run_code script" in second["error"]
    scripts = [(r["tool"], r["status"]) for r in reversed(rows) if r["tool"] == "run_code"]
    assert scripts == [("run_code", "approval_pending"), ("run_code", "code_error"), ("run_code", "ok")], scripts
    assert [r.path for r in upstream.requests] == ["/github/repos/acme/app/issues/7/comments"]  # once, approved


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_a_resumed_run_whose_pause_its_cap_cannot_keep_has_a_chat_row_saying_so(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, request: pytest.FixtureRequest,
        store: str) -> None:
    """mend46's left item: a resumed run that paused again where its client's cap could not keep the pause ended
    failed, but its chat row, written before the pause was kept, said `paused`. Here the approved call runs, then
    the model starts two scripts in one turn: the first waits at a call (it looked: room for one, the cap is 1),
    and while the second reads an issue another request of the same client fills the cap (the upstream's answer
    makes it), so the pause cannot be kept: the run's second chat row says it ended in an error, and why."""
    coded = _capped(1).replace("    approval: writes\n", "    approval: writes\n    code_mode: on\n")
    location = str(tmp_path / "state.db") if store == "sqlite" else request.getfixturevalue("postgres_url")
    llm.script(Reply(calls=[Call("createIssueComment", COMMENT)]),
               Reply(calls=[Call("run_code", {"code": SCRIPT}, id="s1"), Call("run_code", {"code": READ}, id="s2")]))
    chat = {"model": "triage", "messages": [{"role": "user", "content": "comment on issue 7"}]}
    gateway: list[str] = []

    def fill_the_cap(_: Recorded) -> RecordedReply:  # another request of the client, while the run is between
        httpx.post(f"{gateway[0]}/agents/triage/tools/createIssueComment", json=COMMENT, headers=bearer(INTRUDER),
                   timeout=30)
        return RecordedReply(200, {"number": 8, "title": "t", "state": "open"})

    upstream.route("/github/repos/acme/app/issues/8", fill_the_cap)
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=coded, store=location) as (url, _), \
            httpx.Client(base_url=url, timeout=30) as client:
        gateway.append(url)
        paused = client.post("/v1/chat/completions", json=chat, headers=bearer(INTRUDER)).json()
        (pending,) = paused["gateway"]["pending_approvals"]
        decided = client.post(f"/approvals/{pending['id']}", json={"decision": "approve"}, headers=bearer(REVIEWER))
        rows = client.get(f"/audit?kind=chat&run_id={paused['id']}", headers=bearer(REVIEWER)).json()["data"]
        waiting = client.get("/approvals?client=intruder", headers=bearer(REVIEWER)).json()["data"]

    async def run_status() -> str | None:
        read = open_store(location)
        try:
            run = await read.get_run(paused["id"])
            return None if run is None else run.status
        finally:
            await read.aclose()

    assert decided.status_code == 429, decided.text
    assert "may have run" in decided.json()["error"]["message"]
    assert [r["status"] for r in reversed(rows)] == ["paused", "error"], rows
    assert rows[0]["error"].startswith("rate_limited: ") and "max_pending_approvals_per_client" in rows[0]["error"]
    assert anyio.run(run_status) == "failed"
    assert [w["tool"] for w in waiting] == ["createIssueComment"]  # the other request's, which filled the cap
    assert [r.path for r in upstream.requests] == ["/github/repos/acme/app/issues/7/comments",  # the approved call
                                                   "/github/repos/acme/app/issues/8"]


def test_two_scripts_in_one_turn_run_in_order_within_a_clients_one_sandbox(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    """The scripts of a turn run one after another: a client allowed one sandbox at a time
    (`max_code_workers_per_client: 1`) has both of its model's scripts run, each with its own audit row, where the
    second was refused (`rate_limited`) while the first held the sandbox."""
    coded = (FLOODED + "gateway: {{max_code_workers_per_client: 1}}\n").replace(
        "    approval: writes\n", "    approval: writes\n    code_mode: on\n")
    llm.script(Reply(calls=[Call("run_code", {"code": READ}, id="s1"), Call("run_code", {"code": READ}, id="s2")]),
               Reply(text="read twice"))
    chat = {"model": "triage", "messages": [{"role": "user", "content": "read issue 8 twice"}]}
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=coded) as (url, _), \
            httpx.Client(base_url=url, timeout=30) as client:
        answer = client.post("/v1/chat/completions", json=chat, headers=bearer(INTRUDER))
        rows = client.get("/audit?client=intruder&limit=50", headers=bearer(REVIEWER)).json()["data"]
    assert answer.status_code == 200, answer.text
    assert [(s["tool"], s["ok"]) for s in answer.json()["gateway"]["steps"]] == [("run_code", True)] * 2
    tools = [(r["tool"], r["status"]) for r in reversed(rows) if r["kind"] == "tool"]
    assert tools == [("run_code", "ok"), ("getIssue", "ok")] * 2, tools
