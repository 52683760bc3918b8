"""A `run_code` script (code mode) is a call of its own in the audit, on every door it is served (MCP, chat).

Only the tool calls a script made had rows: the script itself (who asked, the agent, the code it ran, how it
ended) left none, and over MCP its calls carried no run id that tied them together. Real parts: a uvicorn gateway
with a SQLite store, a recording upstream, the official `mcp` client, and the scripted LLM for the chat door."""

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
from mcp.shared.exceptions import MCPError
from recording_server import RecordingServer
from scripted_llm import Call
from scripted_llm import Reply as LLMReply
from server_support import AGENTS_YAML, LenientLLM

from .safety_support import API_TOKEN, Served, bearer, chat_step_rows, safe_gateway, served_gateway
from .test_audit_fails_closed import fill, tiny_disk

TRIAGE_KEY = "ck-triage-00001111222233334444"
OPS_KEY = "ck-ops-55556666777788889999"
YAML = AGENTS_YAML.replace("    approval: writes\n", "    approval: writes\n    code_mode: on\n") + f"""\
clients:
  triage-bot: {{{{key: {TRIAGE_KEY}, agents: [triage]}}}}
  ops: {{{{key: {OPS_KEY}, admin: true}}}}
"""
CODE = f'token = "{API_TOKEN}"\ngetIssue(owner="acme", repo="app", issue_number=7)["title"]'
"""The script carries a secret the gateway knows (the github api's token): its row must not."""


@pytest.fixture
def served(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Iterator[Served]:
    with served_gateway(tmp_path, llm.url, upstream, YAML, OPS_KEY) as found:
        yield found


async def _run_code(url: str, code: str) -> tuple[bool, str]:
    async with httpx2.AsyncClient(headers=bearer(TRIAGE_KEY), timeout=30) as http, \
            Client(streamable_http_client(f"{url}/mcp/triage", http_client=http)) as session:
        result = await session.call_tool("run_code", {"code": code})
        return bool(result.is_error), str(result.content[0].text)  # type: ignore[union-attr]


async def _refused(url: str, code: str) -> str:
    """The door's error for a `run_code` call that gets no result (an MCP error, not a tool error)."""
    async with httpx2.AsyncClient(headers=bearer(TRIAGE_KEY), timeout=30) as http, \
            Client(streamable_http_client(f"{url}/mcp/triage", http_client=http)) as session:
        try:
            result = await session.call_tool("run_code", {"code": code})
        except MCPError as error:
            return str(error)
        raise AssertionError(f"answered: {result}")


def _script_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [row for row in rows if row["tool"] == "run_code"]


def _check_the_row(served: Served, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The script's one row: who asked, the agent, the code redacted, the outcome, the time; its tool call under
    its run id; and the row there (`running`) while the script's call was upstream."""
    (row,) = _script_rows(rows)
    assert (row["kind"], row["client"], row["agent"], row["api"]) == ("tool", "triage-bot", "triage", None)
    assert row["status"] == "ok" and row["error"] is None
    assert API_TOKEN not in json.dumps(row) and 'getIssue(owner="acme"' in row["arguments"]["code"]
    assert row["time"].endswith("Z") and row["latency_ms"] > 0
    assert row["run_id"]  # the script's calls are linked to it by its run id, as a chat's are to the chat
    (sub,) = [r for r in rows if r["tool"] == "getIssue"]
    assert (sub["agent"], sub["client"], sub["run_id"], sub["status"]) == ("triage", "triage-bot", row["run_id"], "ok")
    (while_upstream,) = served.seen
    assert {"kind": "tool", "agent": "triage", "tool": "run_code", "status": "running"} in while_upstream
    return row


def test_a_script_over_mcp_has_its_row(served: Served) -> None:
    assert anyio.run(_run_code, served.url, CODE) == (False, "Crash on start")
    row = _check_the_row(served, served.rows())
    assert row["run_id"].startswith("script-")


def test_a_script_that_waits_over_mcp_goes_on_under_its_run_id(served: Served, upstream: RecordingServer) -> None:
    code = CODE + '\ncreateIssueComment(owner="acme", repo="app", issue_number=7, body="On it.")["id"]'
    failed, text = anyio.run(_run_code, served.url, code)
    assert failed and "approval apr_" in text, text
    approval = text.split("approval ", 1)[1].split(" ", 1)[0]
    decided = httpx.post(f"{served.url}/approvals/{approval}", json={"decision": "approve"},
                         headers=bearer(OPS_KEY), timeout=30)
    assert decided.status_code == 200, decided.text
    rows = served.rows()
    (row,) = _script_rows(rows)
    assert (row["client"], row["status"]) == ("triage-bot", "approval_pending")
    calls = [(r["tool"], r["status"], r["run_id"]) for r in rows if r["kind"] == "tool" and r["tool"] != "run_code"]
    run = row["run_id"]  # the calls before the pause and after the decision: one run, the script's
    assert [(tool, run_id) for tool, _, run_id in calls] == [
        ("getIssue", run), ("createIssueComment", run), ("createIssueComment", run)]
    assert [status for _, status, _ in calls[:2]] == ["ok", "approval_pending"]
    assert ("POST", "/github/repos/acme/app/issues/7/comments") in [(r.method, r.path) for r in upstream.requests]


def test_in_a_chat_the_script_has_its_row_under_the_chats_run(served: Served, llm: LenientLLM) -> None:
    llm.script(LLMReply(calls=[Call("run_code", {"code": CODE})]), LLMReply(text="Issue 7: a crash on start."))
    body, step, rows = chat_step_rows(served, TRIAGE_KEY, "triage")
    assert step["tool"] == "run_code" and [s["tool"] for s in step["steps"]] == ["getIssue"]
    row = _check_the_row(served, rows)
    (chat,) = [r for r in rows if r["kind"] == "chat"]
    assert row["run_id"] == chat["run_id"] == body["id"]


def test_a_script_with_a_syntax_error_has_its_row(served: Served, upstream: RecordingServer) -> None:
    failed, text = anyio.run(_run_code, served.url, "getIssue(owner=")
    assert failed and "SyntaxError" in text, text
    (row,) = _script_rows(served.rows())
    assert (row["client"], row["agent"], row["status"]) == ("triage-bot", "triage", "code_error")
    assert row["arguments"] == {"code": "getIssue(owner="} and upstream.requests == []


def test_a_script_without_code_is_refused_with_its_row(served: Served) -> None:
    failed, text = anyio.run(_run_code, served.url, "  ")
    assert failed and "needs `code`" in text, text
    (row,) = _script_rows(served.rows())
    assert (row["client"], row["agent"], row["status"]) == ("triage-bot", "triage", "invalid_arguments")


@pytest.mark.slow
def test_a_script_whose_row_cannot_be_written_does_not_start(tmp_path: Path, llm: LenientLLM,
                                                             upstream: RecordingServer) -> None:
    with tiny_disk(tmp_path / "disk") as disk:
        with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=YAML, store=disk / "state.db") as (url, _):
            filler = fill(disk)
            refused = anyio.run(_refused, url, 'print("started")\n1')  # the door's error, never an answer
            filler.unlink()
    assert "audit log cannot record this tool call 'run_code'" in refused, refused
    assert upstream.requests == []
