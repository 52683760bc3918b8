"""A shared part that hangs (accepts the connection, never answers): each door tells its caller within
`gateway.shared_state_timeout` that the part did not answer, nothing is sent upstream, callers who do not need the
part are served meanwhile, and once the part answers again calls succeed without a restart.

Real parts: Debian's redis-server and PostgreSQL (SIGSTOPped, or Redis behind a TCP proxy that falls silent:
tests/quiet_proxy.py), the gateway on uvicorn, a recording upstream on 127.0.0.1, httpx, the official MCP client and
the scripted LLM as callers. No timing threshold: each caller's own timeout is only a hang guard (60 s, far past
the 1 s setting); before this change, a direct call met a hung Redis for 15 s and a chat or MCP call until Redis
answered again, a hung PostgreSQL until it answered again.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import redis
from mcp import Client
from quiet_proxy import QuietProxy
from recording_server import RecordingServer
from recording_server import Reply as UpstreamReply
from scripted_llm import Call, Reply
from server_support import LenientLLM, running
from shared_servers import PostgresServer, RedisServer

from .counted_writes import received, write_counter_project
from .safety_support import build_app

HANG_GUARD = 60.0
"""Seconds a caller waits at most (only a broken run reaches it: the setting is 1 s)."""


@contextmanager
def gateway(folder: Path, llm: LenientLLM, upstream: RecordingServer, extra: str, store: str | Path,
            timeout: float = 1) -> Iterator[httpx.Client]:
    upstream.route("/write", lambda request: UpstreamReply(201, {"ok": True}))
    write_counter_project(folder, llm.url, upstream.url, f"gateway:\n  shared_state_timeout: {timeout:g}\n{extra}")
    app, safety = build_app(folder, store=store)
    try:
        with running(app) as url, httpx.Client(base_url=url, timeout=HANG_GUARD) as client:
            yield client
    finally:
        close = getattr(getattr(safety.store, "inner", safety.store), "close", None)
        if close is not None:
            close()


def mcp_call(url: str, n: int) -> Any:
    async def call() -> Any:
        async with Client(f"{url}/mcp/writer") as client:
            return await client.call_tool("write", {"n": n})

    return anyio.run(call)


def every_door(client: httpx.Client, llm: LenientLLM, n: int) -> dict[str, Any]:
    """One write on each door: the direct call's answer, the text the model was given as the tool's result (and
    the chat's status), the MCP result."""
    direct = client.post("/agents/writer/tools/write", json={"n": n})
    llm.replies.clear()
    llm.script(Reply(calls=[Call("write", {"n": n + 1})]), Reply(text="done"))
    chat = client.post("/v1/chat/completions", json={"model": "writer",
                                                    "messages": [{"role": "user", "content": "write"}]})
    tool_message = next(m for m in llm.requests[-1].body["messages"] if m.get("role") == "tool")
    mcp = mcp_call(str(client.base_url).rstrip("/"), n + 2)
    return {"direct": direct, "chat": chat, "model read": str(tool_message["content"]),
            "mcp": mcp, "mcp text": mcp.content[0].text if mcp.content else ""}


def assert_refused_naming(doors: dict[str, Any], words: str) -> None:
    direct = doors["direct"]
    assert direct.status_code == 503, direct.text
    error = direct.json()["error"]
    assert error["code"] == "store_unavailable" and words in error["message"], error
    assert doors["chat"].status_code == 200  # the run goes on: the model reads its tool's error
    assert words in doors["model read"] and "store_unavailable" in doors["model read"]
    assert doors["mcp"].is_error is True and words in doors["mcp text"]


def assert_served(doors: dict[str, Any]) -> None:
    assert doors["direct"].status_code == 200, doors["direct"].text
    assert doors["chat"].status_code == 200 and '"ok": true' in doors["model read"].replace("'", '"').lower()
    assert doors["mcp"].is_error is False, doors["mcp text"]


def write_while_stopped(client: httpx.Client, server: PostgresServer | RedisServer) -> httpx.Response:
    """Write 1 (served), then write 2 while `server` is stopped (SIGSTOP) and answer nothing; its answer."""
    assert client.post("/agents/writer/tools/write", json={"n": 1}).status_code == 200
    server.pause()
    try:
        return client.post("/agents/writer/tools/write", json={"n": 2})
    finally:
        server.resume()


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A Redis of this test's own: it is paused (the session's is shared with the other tests of this worker)."""
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.stop()


def test_a_stopped_redis_is_told_on_every_door_in_the_set_time_and_served_again_once_back(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, own_redis: RedisServer) -> None:
    with gateway(tmp_path, llm, upstream, f"  redis: {own_redis.url}\n", tmp_path / "state.db") as client:
        assert_served(every_door(client, llm, 1))
        own_redis.pause()
        try:
            during = every_door(client, llm, 10)
        finally:
            own_redis.resume()
        after = every_door(client, llm, 20)
    assert_refused_naming(during, f"Redis at {own_redis.url} did not answer within 1 s")
    assert not {10, 11, 12} & set(received(upstream))  # nothing was sent while Redis could not count it
    assert_served(after)


def test_a_redis_that_accepts_and_never_answers_is_told_in_the_set_time(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, redis_server: RedisServer) -> None:
    redis_server.flush()
    proxy = QuietProxy(redis_server.port)
    with proxy.running():
        url = f"redis://127.0.0.1:{proxy.port}/0"
        with gateway(tmp_path, llm, upstream, f"  redis: {url}\n", tmp_path / "state.db") as client:
            assert_served(every_door(client, llm, 1))
            proxy.silence()
            try:
                alone = client.post("/agents/writer/tools/write", json={"n": 5})
                asked = (proxy.unheard.count(b"EVALSHA"), proxy.unheard_connections)
                during = every_door(client, llm, 10)
            finally:
                proxy.speak()
            after = every_door(client, llm, 20)
    assert alone.status_code == 503
    # its slot's script, sent once on the connection it had: a Redis that did not answer is not asked again (before:
    # twice more, each on a new connection whose greeting went unanswered, 3 x the timeout in all). One new connection
    # may be the timed-out entry's release, sent in a task of its own (whether it has opened yet is a race).
    assert asked[0] == 1 and asked[1] <= 1, asked
    assert_refused_naming(during, f"Redis at {url} did not answer within 1 s")
    assert not {5, 10, 11, 12} & set(received(upstream))
    assert_served(after)


def test_a_stopped_postgresql_refuses_the_call_unsent_in_the_set_time_and_serves_again(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, postgres_server: PostgresServer) -> None:
    store = postgres_server.create_database()
    with gateway(tmp_path, llm, upstream, "", store) as client:
        refused = write_while_stopped(client, postgres_server)
        again = client.post("/agents/writer/tools/write", json={"n": 3})

        def refused_row() -> dict[str, Any] | None:
            rows = client.get("/audit", params={"limit": 100}).json()["data"]
            return next((r for r in rows if r.get("tool") == "write" and r["arguments"] == {"n": 2}), None)

        # Its row's insert was on its way when the caller was told: it lands once PostgreSQL answers, and then says
        # the call was not sent (not `running`, which would say it may have run).
        _wait_for(lambda: (refused_row() or {}).get("status", "running") != "running")
        row = refused_row()
    assert row is not None and row["status"] == "store_unavailable" and "not sent" in row["error"], row
    assert refused.status_code == 503
    error = refused.json()["error"]
    assert error["code"] == "audit_unavailable", error  # its row could not be written, so it was not sent
    assert "did not answer within 1 s" in error["message"] and "did not send it" in error["message"]
    assert 2 not in received(upstream)
    assert again.status_code == 200 and 3 in received(upstream)


def test_callers_that_need_no_hung_part_are_served_while_a_call_waits_on_it(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, redis_server: RedisServer) -> None:
    """A write waits on Redis (its slot's script ran, the reply is held back) for as long as the test holds it
    (the setting is the hang guard here): the tool listing and the liveness probe, which need no Redis, are answered
    meanwhile, and the write is served once the reply comes."""
    redis_server.flush()
    proxy = QuietProxy(redis_server.port)
    with proxy.running():
        extra = f"  redis: redis://127.0.0.1:{proxy.port}/0\n"
        with gateway(tmp_path, llm, upstream, extra, tmp_path / "state.db", timeout=HANG_GUARD) as client:
            assert client.post("/agents/writer/tools/write", json={"n": 1}).status_code == 200
            answers: list[int] = []
            hung = threading.Thread(target=lambda: answers.append(
                client.post("/agents/writer/tools/write", json={"n": 2}).status_code))
            proxy.hold()
            try:
                hung.start()
                waiting = _wait_for(lambda: _slots(redis_server) == 1)  # its script ran; its reply is held
                seen = [(client.get("/agents/writer/tools").status_code, client.get("/healthz").status_code)
                        for _ in range(3)]
                still_waiting = hung.is_alive()
            finally:
                proxy.speak()
            hung.join(HANG_GUARD)
    assert waiting and still_waiting
    assert seen == [(200, 200)] * 3
    assert answers == [200] and 2 in received(upstream)


def _slots(server: RedisServer) -> int:
    with redis.Redis(port=server.port) as direct:
        return int(direct.zcard("gateway:{guards}:slots:counter"))


def _wait_for(check: Callable[[], bool], seconds: float = 10.0) -> bool:
    """True once `check` holds (polled), False after `seconds`: a bound below the slot's 30 s lease, so a slot
    left taken (the lease gives it back, not the gateway) fails the test."""
    import time

    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_call_whose_client_left_before_its_slots_reply_gives_the_slot_back_at_once(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, redis_server: RedisServer) -> None:
    """The entry script runs on Redis and takes the slot, its reply is held back (the proxy), the client hangs up
    meanwhile (0.3 s, before the gateway's own 1 s): the door cancels the call, and the slot is given back at once
    (before: at the end of its 30 s lease, nothing renewing it)."""
    redis_server.flush()
    proxy = QuietProxy(redis_server.port)
    with proxy.running():
        url = f"redis://127.0.0.1:{proxy.port}/0"
        extra = f"  redis: {url}\n  max_concurrency: 1\n"
        with gateway(tmp_path, llm, upstream, extra, tmp_path / "state.db") as client:
            assert client.post("/agents/writer/tools/write", json={"n": 1}).status_code == 200
            proxy.hold()
            hung_up: list[str] = []

            def leave_early() -> None:
                try:
                    client.post("/agents/writer/tools/write", json={"n": 2}, timeout=0.3)
                except httpx.ReadTimeout:
                    hung_up.append("read timeout")

            caller = threading.Thread(target=leave_early)
            try:
                caller.start()
                taken = _wait_for(lambda: _slots(redis_server) == 1)  # the script ran: the slot is the call's
                caller.join(HANG_GUARD)
                given_back = _wait_for(lambda: _slots(redis_server) == 0)
            finally:
                proxy.speak()
            after = client.post("/agents/writer/tools/write", json={"n": 3})
    assert hung_up == ["read timeout"] and taken and given_back
    assert after.status_code == 200 and 2 not in received(upstream)


def test_a_slot_taken_by_an_entry_that_timed_out_on_a_hung_redis_is_given_back_when_redis_answers(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, own_redis: RedisServer) -> None:
    """Told 503 after 1 s, the call's entry script still runs when Redis answers again, and takes the one slot:
    the gateway's leave script (sent after it) gives it back, so the next call is served at once, not refused as
    busy until the slot's lease ends."""
    extra = f"  redis: {own_redis.url}\n  max_concurrency: 1\n"
    with gateway(tmp_path, llm, upstream, extra, tmp_path / "state.db") as client:
        refused = write_while_stopped(client, own_redis)
        freed = _wait_for(lambda: _slots(own_redis) == 0)
        after = client.post("/agents/writer/tools/write", json={"n": 3})
    assert refused.status_code == 503 and "did not answer within 1 s" in refused.json()["error"]["message"]
    assert freed
    assert after.status_code == 200, after.text
    assert json.loads(upstream.requests[-1].body)["n"] == 3


def test_readiness_waits_as_long_as_the_setting_for_each_hung_part(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, postgres_server: PostgresServer,
        own_redis: RedisServer) -> None:
    """mend44's left item: `/readyz` waited its own fixed 2 s, whatever `gateway.shared_state_timeout` said: with
    3 s it called a PostgreSQL unavailable a call would still have waited for (and with 1 s said "2 s" of a Redis
    whose own timeout had ended the wait). It waits as long as a call does, and says so, for each part."""
    store = postgres_server.create_database()
    with gateway(tmp_path, llm, upstream, f"  redis: {own_redis.url}\n", store, timeout=3) as client:
        assert client.get("/readyz").json() == {"status": "ready", "store": "ok", "redis": "ok"}
        postgres_server.pause()
        own_redis.pause()
        try:
            hung = client.get("/readyz")
        finally:
            own_redis.resume()
            postgres_server.resume()
        again = client.get("/readyz")
    assert hung.status_code == 503, hung.text
    assert "within 3 s" in hung.json()["store"] and "within 3 s" in hung.json()["redis"], hung.text
    assert again.status_code == 200, again.text
