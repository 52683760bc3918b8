"""Two `gateway serve` processes on two ports, one PostgreSQL and one Redis: one system, not two.

An approval made through one instance is decided through the other and the run resumes there, once;
a rate limit of N a minute lets exactly N calls through across both; with one instance SIGKILLed in the
middle of 200 concurrent chats, every answered call has its audit row, no write reached the upstream
twice, and the survivor answers everything sent after the kill.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from recording_server import RecordingServer
from recording_server import Reply as UpstreamReply
from scripted_llm import Call, Recorded, Reply, ScriptedLLM
from server_support import AGENTS_YAML, ROOT, LenientLLM, write_project
from shared_servers import PostgresServer, RedisServer

from gateway.store.postgres_schema import LATEST

from .instances import GatewayProcess, instances

COMMENT = Call("createIssueComment", {"owner": "acme", "repo": "app", "issue_number": 7, "body": "On it."})
READ = {"owner": "acme", "repo": "app", "issue_number": 7}
pytestmark = pytest.mark.slow  # `gateway serve` processes, and waits for a store that is gone

WRITER_YAML = AGENTS_YAML + """\
  writer:
    model: openai/gpt-test
    tools: [{{api: github, operations: [createIssueComment]}}]
    approval: never
"""


def _project(folder: Path, llm_url: str, upstream_url: str, postgres_url: str, redis_url: str,
             extra: str = "") -> None:
    write_project(folder, llm_url, upstream_url, WRITER_YAML)
    with open(folder / "agents.yaml", "a") as agents:
        agents.write(f"gateway:\n  store: {postgres_url}\n  redis: {redis_url}\n{extra}")


def _writes(upstream: RecordingServer) -> list[Any]:
    return [r.json() for r in upstream.requests if r.method == "POST"]


def test_an_approval_made_on_one_instance_resumes_on_the_other_once(
    tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, postgres_url: str, redis_url: str
) -> None:
    _project(tmp_path, llm.url, upstream.url, postgres_url, redis_url)
    llm.script(Reply(calls=[COMMENT]), Reply(text="Commented on #7."))
    with instances(tmp_path) as (a, b):
        chat = {"model": "triage", "messages": [{"role": "user", "content": "triage #7"}]}
        paused = httpx.post(f"{a.url}/v1/chat/completions", json=chat, timeout=60).json()
        (pending,) = paused["gateway"]["pending_approvals"]
        assert _writes(upstream) == []
        listed = httpx.get(f"{b.url}/approvals", timeout=30).json()["data"]
        assert [x["id"] for x in listed] == [pending["id"]]
        done = httpx.post(f"{b.url}/approvals/{pending['id']}", json={"decision": "approve"}, timeout=60)
        assert done.status_code == 200, done.text
        assert done.json()["choices"][0]["message"]["content"] == "Commented on #7."
        again = httpx.post(f"{a.url}/approvals/{pending['id']}", json={"decision": "approve"}, timeout=60)
        assert again.status_code == 409 and again.json()["error"]["code"] == "approval_used"
        assert httpx.get(f"{a.url}/approvals", timeout=30).json()["data"] == []
        audit = httpx.get(f"{a.url}/audit?limit=50", timeout=30).json()["data"]
    assert _writes(upstream) == [{"body": "On it."}]
    (row,) = [r for r in audit if r["tool"] == "createIssueComment" and r["status"] == "ok"]
    assert row["approval"] == pending["id"]


def test_a_rate_limit_of_n_a_minute_holds_across_both_instances(
    tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, postgres_url: str, redis_url: str
) -> None:
    _project(tmp_path, llm.url, upstream.url, postgres_url, redis_url, "  rate_limits: {tool: 5/min}\n")
    with instances(tmp_path) as (a, b):

        async def calls() -> list[int]:
            async with httpx.AsyncClient(timeout=60) as client:
                answers = await asyncio.gather(*(
                    client.post(f"{(a, b)[i % 2].url}/agents/triage/tools/getIssue", json=READ) for i in range(16)))
            return [answer.status_code for answer in answers]

        statuses = asyncio.run(calls())
    assert Counter(statuses) == {200: 5, 429: 11}
    assert len([r for r in upstream.requests if r.method == "GET"]) == 5


class NumberedLLM(ScriptedLLM):
    """For the chat "comment N": first a comment on issue N, then, with its result, the text "done N"."""

    def _next(self, recorded: Recorded) -> Reply | None:
        with self._lock:
            self.requests.append(recorded)
        messages = recorded.body["messages"]
        user = next(m["content"] for m in messages if m["role"] == "user")
        number = int(re.findall(r"\d+", user)[0])
        if messages[-1]["role"] == "tool":
            return Reply(text=f"done {number}")
        return Reply(calls=[Call("createIssueComment",
                                 {"owner": "acme", "repo": "app", "issue_number": number, "body": f"c{number}"})])


def test_two_hundred_chats_over_two_instances_one_killed_halfway(
    tmp_path: Path, upstream: RecordingServer, postgres_url: str, redis_url: str
) -> None:
    upstream.route("/github/", UpstreamReply(201, {"id": 99, "body": "ack", "html_url": "https://github.com/a/b/1"},
                                     delay=0.02))
    with NumberedLLM() as llm:
        _project(tmp_path, llm.url, upstream.url, postgres_url, redis_url)
        with instances(tmp_path) as (a, b):
            answered, lost, after_kill = asyncio.run(_chats(a, b, total=200, concurrency=32))
    writes = Counter(int(w["body"][1:]) for w in _writes(upstream))
    assert max(writes.values()) == 1  # no write sent upstream twice
    assert set(answered) <= set(writes) and len(answered) + len(lost) == 200
    assert len(lost) <= 32 and len(after_kill) >= 50  # the survivor answered every chat sent after the kill
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute("SELECT (arguments->>'issue_number')::int FROM audit"
                            " WHERE kind = 'tool' AND status = 'ok'").fetchall()
    audited = Counter(number for (number,) in rows)
    assert all(audited[n] == 1 for n in answered)  # every answered call has its audit row
    assert set(audited) <= set(writes)


async def _chats(a: Any, b: Any, *, total: int, concurrency: int) -> tuple[list[int], list[int], list[int]]:
    answered: list[int] = []
    lost: list[int] = []
    after_kill: list[int] = []
    killed = asyncio.Event()
    gate = asyncio.Semaphore(concurrency)

    async def chat(client: httpx.AsyncClient, number: int) -> None:
        async with gate:
            if len(answered) >= total // 2 and not killed.is_set():
                killed.set()
                await asyncio.to_thread(a.kill)
            sent_after_kill = killed.is_set()
            target = b if killed.is_set() or number % 2 else a
            body = {"model": "writer", "messages": [{"role": "user", "content": f"comment {number}"}]}
            try:
                answer = await client.post(f"{target.url}/v1/chat/completions", json=body)
            except httpx.TransportError:
                # Only a chat in flight on the killed instance may go unanswered (its fate unknown: not retried).
                assert target is a and not sent_after_kill, f"chat {number} to the survivor failed"
                lost.append(number)
                return
            assert answer.status_code == 200, answer.text
            assert answer.json()["choices"][0]["message"]["content"] == f"done {number}"
            answered.append(number)
            if sent_after_kill:
                after_kill.append(number)

    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_keepalive_connections=0)) as client:
        await asyncio.gather(*(chat(client, number) for number in range(total)))
    return answered, lost, after_kill


def test_a_response_made_on_one_instance_is_continued_on_the_other(
    tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, postgres_url: str, redis_url: str
) -> None:
    _project(tmp_path, llm.url, upstream.url, postgres_url, redis_url)
    llm.script(Reply(text="Hello from A."), Reply(text="Still here, on B."))
    with instances(tmp_path) as (a, b):
        first = httpx.post(f"{a.url}/v1/responses", json={"model": "weather", "input": "hi"}, timeout=60)
        assert first.status_code == 200, first.text
        second = httpx.post(f"{b.url}/v1/responses", timeout=60, json={
            "model": "weather", "input": "and now?", "previous_response_id": first.json()["id"]})
        assert second.status_code == 200, second.text
        fetched = httpx.get(f"{a.url}/v1/responses/{second.json()['id']}", timeout=30)
    assert fetched.status_code == 200
    sent = [m.get("content") for m in llm.requests[-1].body["messages"]]
    assert "hi" in sent and "Hello from A." in sent and "and now?" in sent


def test_workers_of_one_serve_share_the_store_and_migrate_reports_the_version(
    tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, postgres_url: str, redis_url: str
) -> None:
    _project(tmp_path, llm.url, upstream.url, postgres_url, redis_url, "  rate_limits: {tool: 3/min}\n")
    served = GatewayProcess(tmp_path, "workers", workers=2)
    try:
        served.wait_ready()

        async def calls() -> list[int]:
            async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_keepalive_connections=0)) as client:
                answers = await asyncio.gather(*(
                    client.post(f"{served.url}/agents/triage/tools/getIssue", json=READ) for _ in range(10)))
            return [answer.status_code for answer in answers]

        assert Counter(asyncio.run(calls())) == {200: 3, 429: 7}
    finally:
        served.stop()
    log = served.log.read_text()
    assert "2 workers" in log
    # The fresh database's migrations, each said once in serve's log (by the parent, which applied them; the
    # workers found them applied): user46 found serve silent about them.
    applied = [line for line in log.splitlines() if "schema migration" in line]
    # each a line of the gateway's log: its UTC time, then the level
    assert len(applied) == LATEST and all(re.match(r"\S+Z INFO:", line) for line in applied), applied
    assert f"schema migration {LATEST} of {LATEST} applied" in applied[-1]
    migrate = subprocess.run([sys.executable, "-m", "gateway", "migrate", "--agents", str(tmp_path / "agents.yaml")],
                             capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert migrate.returncode == 0 and f"schema version {LATEST} (nothing to apply)" in migrate.stderr


def test_a_store_gone_while_serving_is_a_503_never_an_unrecorded_answer(
    tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, redis_url: str
) -> None:
    database = PostgresServer().start()
    try:
        _project(tmp_path, llm.url, upstream.url, database.url(), redis_url)
        with instances(tmp_path, count=1) as (served,):
            first = httpx.post(f"{served.url}/agents/triage/tools/getIssue", json=READ, timeout=60)
            assert first.status_code == 200, first.text
            assert httpx.get(f"{served.url}/readyz", timeout=30).json() == {"status": "ready", "store": "ok",
                                                                             "redis": "ok"}
            database.stop()
            ready = httpx.get(f"{served.url}/readyz", timeout=30)  # a balancer stops sending work here
            assert ready.status_code == 503 and ready.json()["status"] == "unavailable", ready.text
            assert "unreachable" in ready.json()["store"] or "no answer within" in ready.json()["store"]
            for answer in (httpx.post(f"{served.url}/agents/triage/tools/getIssue", json=READ, timeout=60),
                           httpx.get(f"{served.url}/approvals", timeout=60),
                           httpx.post(f"{served.url}/v1/chat/completions", timeout=60, json={
                               "model": "weather", "messages": [{"role": "user", "content": "hi"}]})):
                assert answer.status_code == 503, answer.text
                error = answer.json()["error"]
                assert error["code"] in ("store_unavailable", "audit_unavailable"), error
            assert httpx.get(f"{served.url}/healthz", timeout=30).status_code == 200
    finally:
        database.stop()


def test_readiness_names_a_redis_that_stopped_answering(
    tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, postgres_url: str
) -> None:
    redis = RedisServer().start()
    try:
        _project(tmp_path, llm.url, upstream.url, postgres_url, redis.url)
        with instances(tmp_path, count=1) as (served,):
            assert httpx.get(f"{served.url}/readyz", timeout=30).status_code == 200
            assert redis.process is not None
            redis.process.send_signal(signal.SIGSTOP)  # a hung Redis: connected, silent
            try:
                hung = httpx.get(f"{served.url}/readyz", timeout=30)
            finally:
                redis.process.send_signal(signal.SIGCONT)
            # named as Redis, not as the store (which answered): the operator looks at the right server
            assert hung.status_code == 503 and hung.json()["store"] == "ok", hung.text
            assert "answer within 2 s" in hung.json()["redis"], hung.text  # the setting's 2 s, by Redis's timeout
            redis.stop()
            ready = httpx.get(f"{served.url}/readyz", timeout=30)
            assert ready.status_code == 503 and "Redis at redis://127.0.0.1" in ready.json()["redis"], ready.text
            assert httpx.get(f"{served.url}/healthz", timeout=30).status_code == 200  # alive, not ready
    finally:
        redis.stop()
