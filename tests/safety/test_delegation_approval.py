"""A delegation under `approval: always` waits for a human on every door, not only in the chat loop.

The lead agent `boss` may only act with a human's approval; its sub-agent `worker` has `approval: never` for its own
api. The pipeline's approval stage sees API calls only, so `ask_worker` on the direct and MCP doors ran the worker's
loop, and the worker's write, with nobody asked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import LenientLLM

from .safety_support import bearer, delegating_yaml, safe_gateway

BOSS_KEY = "ck-boss-00001111222233334444"
YAML = delegating_yaml("boss", f"  boss-bot: {{{{key: {BOSS_KEY}, agents: [boss]}}}}\n", approval="always")
COMMENT = Call("createIssueComment", {"owner": "acme", "repo": "app", "issue_number": 7, "body": "unapproved"})
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2025-06-18"}


@pytest.fixture
def gw(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Iterator[httpx.Client]:
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=YAML) as (url, _), \
            httpx.Client(base_url=url, timeout=30, headers=bearer(BOSS_KEY)) as client:
        yield client


def test_a_delegation_under_approval_always_does_not_run_unapproved_on_the_direct_door(
        gw: httpx.Client, llm: LenientLLM, upstream: RecordingServer) -> None:
    llm.script(Reply(calls=[COMMENT]), Reply(text="commented"))
    answer = gw.post("/agents/boss/tools/ask_worker", json={"task": "comment on issue 7"})
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "approval_denied", answer.text
    assert upstream.requests == [] and llm.requests == []  # neither the worker's model nor its api was reached
    (row,) = gw.get("/audit").json()["data"]  # the refusal is a call of the key's: its row, with its verdict
    assert (row["client"], row["agent"], row["tool"], row["status"]) == ("boss-bot", "boss", "ask_worker",
                                                                         "approval_denied")


def test_a_delegation_under_approval_always_does_not_run_unapproved_over_mcp(
        gw: httpx.Client, llm: LenientLLM, upstream: RecordingServer) -> None:
    llm.script(Reply(calls=[COMMENT]), Reply(text="commented"))
    init = gw.post("/mcp/boss", headers=MCP_HEADERS, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    session = {"Mcp-Session-Id": init.headers["mcp-session-id"]} if "mcp-session-id" in init.headers else {}
    gw.post("/mcp/boss", headers={**MCP_HEADERS, **session},
            json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    answer = gw.post("/mcp/boss", headers={**MCP_HEADERS, **session}, json={
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "ask_worker", "arguments": {"task": "comment on issue 7"}}})
    assert answer.status_code == 200 and "approval" in answer.text and '"isError":true' in answer.text, answer.text
    assert upstream.requests == [] and llm.requests == []


def test_in_the_chat_loop_the_delegation_waits_for_a_human(gw: httpx.Client, llm: LenientLLM,
                                                           upstream: RecordingServer) -> None:
    llm.script(Reply(calls=[Call("ask_worker", {"task": "comment on issue 7"})]))
    answer = gw.post("/v1/chat/completions", json={"model": "boss", "messages": [{"role": "user", "content": "go"}]})
    assert [p["tool"] for p in answer.json()["gateway"]["pending_approvals"]] == ["ask_worker"]
    assert upstream.requests == []
