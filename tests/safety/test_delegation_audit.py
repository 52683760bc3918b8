"""A delegation (an agent offered as a tool, `ask_<agent>`) is a call of its own in the audit, on every door.

The pipeline's audit stage saw API calls only: a delegation called through the direct door or over MCP left the
sub-agent's calls in the log (unlinked, with no run id) and nothing of the delegation itself: not who asked, not
the delegating agent, not the task, not how it ended. Inside a chat the chat's row and run id tied the sub-agent's
calls to the lead, but the delegation had no row there either. Real parts: a uvicorn gateway with a SQLite store, a
scripted LLM for both agents, a recording upstream, and the official `mcp` client for the MCP door."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from recording_server import RecordingServer
from scripted_llm import Call
from scripted_llm import Reply as LLMReply
from server_support import LenientLLM

from .safety_support import API_TOKEN, Served, bearer, chat_step_rows, delegating_yaml, safe_gateway, served_gateway
from .test_audit_fails_closed import fill, tiny_disk

LEAD_KEY = "ck-lead-00001111222233334444"
OPS_KEY = "ck-ops-55556666777788889999"
YAML = delegating_yaml("lead", f"  lead-bot: {{{{key: {LEAD_KEY}, agents: [lead]}}}}\n"
                             f"  ops: {{{{key: {OPS_KEY}, admin: true}}}}\n")
GET_ISSUE = Call("getIssue", {"owner": "acme", "repo": "app", "issue_number": 7})
TASK = "Read issue 7 of acme/app"
CARRYING = f"{TASK} (the token is {API_TOKEN})"
"""A task carrying a secret the gateway knows (the github api's token): refused before the sub-agent's model is
asked (`credential_in_arguments`: the sub-agent's model may be another provider's), and its row holds no secret."""


@pytest.fixture
def served(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Iterator[Served]:
    with served_gateway(tmp_path, llm.url, upstream, YAML, OPS_KEY) as found:
        yield found


def _delegation_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [row for row in rows if row["tool"] == "ask_worker"]


def _check_the_row(served: Served, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The delegation's one row: who asked, which agent delegated, the task redacted, the outcome, the time; the
    sub-agent's call under its run id; and the row there (`running`) while the sub-agent's call was upstream."""
    (row,) = _delegation_rows(rows)
    assert (row["kind"], row["client"], row["agent"], row["api"]) == ("tool", "lead-bot", "lead", None)
    assert row["status"] == "ok" and row["error"] is None
    assert row["arguments"] == {"task": TASK}
    assert row["time"].endswith("Z") and row["latency_ms"] > 0
    assert row["run_id"]  # the sub-agent's calls are linked to it by its run id, as a chat's are to the chat
    (sub,) = [r for r in rows if r["tool"] == "getIssue"]
    assert (sub["agent"], sub["client"], sub["run_id"], sub["status"]) == ("worker", "lead-bot", row["run_id"], "ok")
    (while_upstream,) = served.seen
    assert {"kind": "tool", "agent": "lead", "tool": "ask_worker", "status": "running"} in while_upstream
    return row


def test_a_delegation_on_the_direct_door_has_its_row(served: Served, llm: LenientLLM) -> None:
    llm.script(LLMReply(calls=[GET_ISSUE]), LLMReply(text="It crashes on start."))
    answer = httpx.post(f"{served.url}/agents/lead/tools/ask_worker", json={"task": TASK}, headers=bearer(LEAD_KEY),
                        timeout=30)
    assert answer.status_code == 200 and answer.json()["body"] == "It crashes on start.", answer.text
    row = _check_the_row(served, served.rows())
    assert row["run_id"].startswith("delegation-")
    assert answer.json()["duration_ms"] > 0  # the door's answer and the row tell the same time


def test_a_delegation_over_mcp_has_its_row(served: Served, llm: LenientLLM) -> None:
    llm.script(LLMReply(calls=[GET_ISSUE]), LLMReply(text="It crashes on start."))

    async def ask() -> str:
        async with httpx2.AsyncClient(headers=bearer(LEAD_KEY), timeout=30) as http, \
                Client(streamable_http_client(f"{served.url}/mcp/lead", http_client=http)) as session:
            result = await session.call_tool("ask_worker", {"task": TASK})
            assert not result.is_error
            return str(result.content[0].text)  # type: ignore[union-attr]

    assert anyio.run(ask) == "It crashes on start."
    _check_the_row(served, served.rows())


def test_in_a_chat_the_delegation_has_its_row_under_the_chats_run(served: Served, llm: LenientLLM) -> None:
    llm.script(LLMReply(calls=[Call("ask_worker", {"task": TASK})]), LLMReply(calls=[GET_ISSUE]),
               LLMReply(text="It crashes on start."), LLMReply(text="Issue 7: a crash on start."))
    body, step, rows = chat_step_rows(served, LEAD_KEY, "lead")
    assert step["tool"] == "ask_worker" and [s["tool"] for s in step["steps"]] == ["getIssue"]
    row = _check_the_row(served, rows)
    (chat,) = [r for r in rows if r["kind"] == "chat"]
    assert row["run_id"] == chat["run_id"] == body["id"]


def test_a_delegation_whose_task_carries_a_credential_is_refused_and_its_row_holds_none(
        served: Served, llm: LenientLLM) -> None:
    answer = httpx.post(f"{served.url}/agents/lead/tools/ask_worker", json={"task": CARRYING},
                        headers=bearer(LEAD_KEY), timeout=30)
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "credential_in_arguments", answer.text
    assert API_TOKEN not in answer.text
    (row,) = _delegation_rows(served.rows())
    assert (row["client"], row["agent"], row["status"]) == ("lead-bot", "lead", "credential_in_arguments")
    assert API_TOKEN not in json.dumps(row) and row["arguments"]["task"].startswith(TASK)
    assert llm.requests == []  # the sub-agent's model was never asked


def test_a_refused_delegation_has_its_row_too(served: Served, llm: LenientLLM) -> None:
    answer = httpx.post(f"{served.url}/agents/lead/tools/ask_worker", json={"task": "  "}, headers=bearer(LEAD_KEY),
                        timeout=30)
    assert answer.status_code == 422, answer.text
    (row,) = _delegation_rows(served.rows())
    assert (row["client"], row["agent"], row["status"]) == ("lead-bot", "lead", "invalid_arguments")
    assert llm.requests == []  # refused before the sub-agent started: one row, never `running`


@pytest.mark.slow
def test_a_delegation_whose_row_cannot_be_written_does_not_start(tmp_path: Path, llm: LenientLLM,
                                                                 upstream: RecordingServer) -> None:
    with tiny_disk(tmp_path / "disk") as disk:
        with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=YAML, store=disk / "state.db") as (url, _):
            llm.script(LLMReply(calls=[GET_ISSUE]), LLMReply(text="It crashes on start."))
            filler = fill(disk)
            answer = httpx.post(f"{url}/agents/lead/tools/ask_worker", json={"task": TASK},
                                headers=bearer(LEAD_KEY), timeout=30)
            filler.unlink()
    assert answer.status_code == 503 and answer.json()["error"]["code"] == "audit_unavailable", answer.text
    assert llm.requests == [] and upstream.requests == []  # neither the sub-agent's model nor its api was reached
