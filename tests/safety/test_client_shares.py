"""One client cannot hold every chat run or code-mode sandbox: past its share (`gateway.max_runs_per_client`,
`gateway.max_code_workers_per_client`) its next run is refused at once (429 with Retry-After, OpenAI-shaped; a
`rate_limited` tool error for a script), while another client's is served. Without the settings nothing changes.

Real parts: a uvicorn gateway, a scripted LLM whose streamed answers wait at a gate (a run in flight, holding its
share), a recording upstream that holds a script's call, the official `mcp` client for `run_code`. No timing: the
tests assert who was refused and who was served."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from recording_server import Recorded, RecordingServer, Reply
from scripted_llm import GATE_LIMIT, Call
from scripted_llm import Reply as LLMReply
from server_support import AGENTS_YAML, ISSUE, LenientLLM

from .safety_support import bearer, delegating_yaml, safe_gateway

A_KEY = "ck-a-bot-0000111122223333"
B_KEY = "ck-b-bot-4444555566667777"
CLIENTS = f"""\
clients:
  a-bot: {{{{key: {A_KEY}, agents: [weather, triage]}}}}
  b-bot: {{{{key: {B_KEY}, agents: [weather, triage]}}}}
"""
CHAT = {"model": "weather", "messages": [{"role": "user", "content": "Berlin?"}]}


@contextmanager
def held_stream(url: str, key: str) -> Iterator[list[Any]]:
    """A streamed chat of `key` in a thread, in flight once its first text arrived (the model's answer then waits at
    its gate); yields what it ended with ([status, the SSE lines]) once the gate opens and the block ends."""
    seen = threading.Event()
    ended: list[Any] = []

    def stream() -> None:
        text = []
        with httpx.stream("POST", f"{url}/v1/chat/completions", json={**CHAT, "stream": True}, headers=bearer(key),
                          timeout=GATE_LIMIT + 30) as answer:
            for line in answer.iter_lines():
                text.append(line)
                if '"content":"' in line and '"content":""' not in line:
                    seen.set()
            ended.extend([answer.status_code, "".join(text)])
        seen.set()

    thread = threading.Thread(target=stream, daemon=True)
    thread.start()
    assert seen.wait(GATE_LIMIT) and not ended, ended  # in flight: its text came, its end did not
    try:
        yield ended
    finally:
        thread.join(GATE_LIMIT + 30)


async def run_code(url: str, key: str, code: str) -> tuple[bool, str]:
    """A `run_code` call of `key` through the official MCP client: (whether it failed, its text)."""
    async with httpx2.AsyncClient(headers=bearer(key), timeout=GATE_LIMIT + 30) as http, \
            Client(streamable_http_client(f"{url}/mcp/triage", http_client=http)) as session:
        result = await session.call_tool("run_code", {"code": code})
        return bool(result.is_error), str(result.content[0].text)  # type: ignore[union-attr]


def _chat(url: str, key: str, path: str = "/v1/chat/completions") -> httpx.Response:
    body = CHAT if path.endswith("completions") else {"model": "weather", "input": "Berlin?"}
    return httpx.post(url + path, json=body, headers=bearer(key), timeout=60)


def test_a_client_past_its_share_of_runs_gets_429_and_another_client_is_served(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    gate = threading.Event()
    llm.script(LLMReply(text="first of a", gate=gate), LLMReply(text="second of a", gate=gate),
               LLMReply(text="b is served"), LLMReply(text="a again"))
    yaml = AGENTS_YAML + CLIENTS + "gateway: {{max_runs_per_client: 2}}\n"
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=yaml) as (url, _):
        with held_stream(url, A_KEY) as first, held_stream(url, A_KEY) as second:
            refused = [_chat(url, A_KEY), _chat(url, A_KEY, "/v1/responses")]
            served = _chat(url, B_KEY)
            gate.set()
        again = _chat(url, A_KEY)  # its runs ended: its share is back
    for answer in refused:
        assert answer.status_code == 429 and answer.headers["retry-after"] == "1", answer.text
        error = answer.json()["error"]
        assert error["code"] == "too_many_runs" and error["type"] == "rate_limit_error"
        assert "2 chat runs in flight" in error["message"] and "gateway.max_runs_per_client" in error["message"]
    assert served.status_code == 200 and served.json()["choices"][0]["message"]["content"] == "b is served"
    assert first[0] == second[0] == 200 and all('"finish_reason":"stop"' in held[1] for held in (first, second))
    assert again.status_code == 200 and again.json()["choices"][0]["message"]["content"] == "a again"
    assert len(llm.requests) == 4  # the refused runs never reached the model


def test_without_the_setting_one_client_runs_as_many_as_it_asks(tmp_path: Path, llm: LenientLLM,
                                                                upstream: RecordingServer) -> None:
    gate = threading.Event()
    llm.script(LLMReply(text="first", gate=gate), LLMReply(text="second", gate=gate), LLMReply(text="third"))
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=AGENTS_YAML + CLIENTS) as (url, _):
        with held_stream(url, A_KEY), held_stream(url, A_KEY):
            third = _chat(url, A_KEY)
            gate.set()
    assert third.status_code == 200, third.text


def test_a_client_past_its_share_of_sandboxes_is_refused_and_another_clients_script_runs(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    entered, release = threading.Event(), threading.Event()

    def held_issue(request: Recorded) -> Reply:
        entered.set()  # a's first script holds its sandbox while its call is here
        release.wait(GATE_LIMIT)
        return Reply(200, ISSUE)

    upstream.route("/github/repos/acme/app/issues/7", held_issue)
    yaml = AGENTS_YAML.replace("    approval: writes\n", "    approval: writes\n    code_mode: on\n") + CLIENTS + \
        "gateway: {{max_code_workers_per_client: 1}}\n"

    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=yaml) as (url, _):
        first: list[tuple[bool, str]] = []
        holder = threading.Thread(target=lambda: first.append(anyio.run(
            run_code, url, A_KEY, 'getIssue(owner="acme", repo="app", issue_number=7)["title"]')), daemon=True)
        holder.start()
        assert entered.wait(GATE_LIMIT)
        refused = anyio.run(run_code, url, A_KEY, "1 + 1")
        llm.script(LLMReply(calls=[Call("run_code", {"code": "5 + 5"})]), LLMReply(text="no sandbox for me"))
        in_chat = httpx.post(f"{url}/v1/chat/completions", headers=bearer(A_KEY), timeout=60, json={
            "model": "triage", "messages": [{"role": "user", "content": "add"}]})
        served = anyio.run(run_code, url, B_KEY, "2 + 2")
        release.set()
        holder.join(GATE_LIMIT + 30)
        again = anyio.run(run_code, url, A_KEY, "3 + 3")
        audit = httpx.get(f"{url}/audit", params={"tool": "run_code"}, headers=bearer(A_KEY), timeout=30)
    assert refused[0] and "gateway.max_code_workers_per_client" in refused[1] and "retry after 1 s" in refused[1]
    (step,) = in_chat.json()["gateway"]["steps"]  # inside a chat the model hears it, as any refused call
    assert (step["tool"], step["error_type"]) == ("run_code", "rate_limited"), step
    assert served == (False, "4")
    assert first == [(False, "Crash on start")]
    assert again == (False, "6")
    # Each script is a call of its own in the audit, the refused ones too (oldest first: the holder's row was
    # written when it started).
    scripts = [(r["client"], r["arguments"]["code"], r["status"]) for r in reversed(audit.json()["data"])]
    assert [(code, status) for _, code, status in scripts] == [
        ('getIssue(owner="acme", repo="app", issue_number=7)["title"]', "ok"), ("1 + 1", "rate_limited"),
        ("5 + 5", "rate_limited"), ("3 + 3", "ok")]
    assert {client for client, _, _ in scripts} == {"a-bot"}


BOSS_KEY = "ck-boss-8888999900001111"
COMMENT = Call("createIssueComment", {"owner": "acme", "repo": "app", "issue_number": 7, "body": "On it."})


def _decide(url: str, approval: str) -> httpx.Response:
    return httpx.post(f"{url}/approvals/{approval}", json={"decision": "approve"}, headers=bearer(BOSS_KEY),
                      timeout=GATE_LIMIT + 30)


def test_a_run_resumed_after_an_approval_counts_in_its_clients_share(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    """The resume goes on as its owner's run: refused (the decision taken back, nothing sent) while the owner holds
    its whole share, and, while it goes on, holding a place of that share like any run."""
    entered, release = threading.Event(), threading.Event()

    def held_comment(request: Recorded) -> Reply:
        entered.set()  # the resumed run is in flight while its approved call is here
        release.wait(GATE_LIMIT)
        return Reply(201, {"id": 99, "body": "On it.", "html_url": "https://github.com/acme/app/issues/7#c99"})

    upstream.route("/github/repos/acme/app/issues/7/comments", held_comment)
    gate = threading.Event()
    llm.script(LLMReply(calls=[COMMENT]), LLMReply(text="a holds its share", gate=gate))
    clients = CLIENTS + f"  boss: {{{{key: {BOSS_KEY}, agents: [triage], approver: true}}}}\n"
    yaml = AGENTS_YAML + clients + "gateway: {{max_runs_per_client: 1}}\n"
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=yaml) as (url, _):
        paused = httpx.post(f"{url}/v1/chat/completions", headers=bearer(A_KEY), timeout=60,
                            json={"model": "triage", "messages": [{"role": "user", "content": "triage #7"}]})
        (pending,) = paused.json()["gateway"]["pending_approvals"]
        with held_stream(url, A_KEY):
            refused = _decide(url, pending["id"])
            sent_meanwhile = [r.path for r in upstream.requests]
            gate.set()
        llm.script(LLMReply(text="Commented on #7."))
        resumed: list[httpx.Response] = []
        decider = threading.Thread(target=lambda: resumed.append(_decide(url, pending["id"])), daemon=True)
        decider.start()
        assert entered.wait(GATE_LIMIT)
        while_resumed = _chat(url, A_KEY)
        release.set()
        decider.join(GATE_LIMIT + 30)
        answer = httpx.get(f"{url}/approvals/{pending['id']}", headers=bearer(A_KEY), timeout=30).json()["answer"]
    assert refused.status_code == 503, refused.text
    error = refused.json()["error"]
    assert error["code"] == "approval_reopened" and "gateway.max_runs_per_client" in error["message"]
    assert sent_meanwhile == []  # the refused resume sent nothing
    assert while_resumed.status_code == 429 and while_resumed.json()["error"]["code"] == "too_many_runs"
    assert resumed[0].status_code == 200 and resumed[0].json()["status"] == "resumed", resumed[0].text
    assert answer["choices"][0]["message"]["content"] == "Commented on #7."  # the owner's, once it went on


def test_a_delegation_outside_a_chat_is_one_of_its_clients_runs(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    """On the direct door `ask_worker` runs the worker's loop, a run of its own: refused (`rate_limited`, the
    worker's model never asked) while its client holds its whole share of runs, served for another client, and
    given back when it ends (the client's chat runs after it)."""
    clients = "".join(f"  {name}: {{{{key: {key}, agents: [boss, weather]}}}}\n"
                      for name, key in (("a-bot", A_KEY), ("b-bot", B_KEY)))
    yaml = delegating_yaml("boss", clients) + "gateway: {{max_runs_per_client: 1}}\n"
    gate = threading.Event()
    llm.script(LLMReply(text="a's chat holds its share", gate=gate), LLMReply(text="worker for b"))
    task = {"task": "say hello"}
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=yaml) as (url, _):
        with held_stream(url, A_KEY):
            refused = httpx.post(f"{url}/agents/boss/tools/ask_worker", json=task, headers=bearer(A_KEY), timeout=60)
            asked = len(llm.requests)
            served = httpx.post(f"{url}/agents/boss/tools/ask_worker", json=task, headers=bearer(B_KEY), timeout=60)
            gate.set()
        llm.script(LLMReply(text="worker for a"), LLMReply(text="a chats again"))
        again = httpx.post(f"{url}/agents/boss/tools/ask_worker", json=task, headers=bearer(A_KEY), timeout=60)
        chat = _chat(url, A_KEY)
    assert refused.status_code == 429, refused.text
    assert "gateway.max_runs_per_client" in refused.text and "chat runs" in refused.text
    assert asked == 1  # a's chat alone: the refused delegation never reached the worker's model
    assert served.status_code == 200 and "worker for b" in served.text, served.text
    assert again.status_code == 200 and "worker for a" in again.text, again.text
    assert chat.status_code == 200 and chat.json()["choices"][0]["message"]["content"] == "a chats again"
