"""Redis failing around a call (`gateway.redis`): a failure after the upstream call still writes the call's audit row
and answers its result; once Redis is back no call fails on the connections of before. Real Redis, stopped and
started on its port mid-test; a real upstream on loopback that counts the writes it received."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from recording_server import Recorded, RecordingServer, Reply
from server_support import LenientLLM, running
from shared_servers import RedisServer

from .counted_writes import audited, close_store, received, sent_without_a_row, write_counter_project
from .safety_support import build_app


def test_redis_lost_after_the_call_keeps_its_answer_and_its_row(tmp_path: Path, llm: LenientLLM,
                                                               upstream: RecordingServer,
                                                               redis_server: RedisServer) -> None:
    def stop_redis(request: Recorded) -> Reply:
        if request.json()["n"] == 2:
            redis_server.halt()  # the slot was taken; giving it back will fail
        return Reply(201, {"ok": True})

    upstream.route("/write", stop_redis)
    write_counter_project(tmp_path, llm.url, upstream.url, f"gateway:\n  redis: {redis_server.url}\n")
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    try:
        with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
            assert client.post("/agents/writer/tools/write", json={"n": 1}).status_code == 200
            try:
                ran = client.post("/agents/writer/tools/write", json={"n": 2})
                refused = client.post("/agents/writer/tools/write", json={"n": 3})  # no slot can be taken
            finally:
                redis_server.start()
            rows = client.get("/audit", params={"limit": 100}).json()["data"]
    finally:
        close_store(safety)
    assert ran.status_code == 200 and ran.json()["ok"] is True  # it ran: the caller is told so
    assert audited(rows)[2] == "ok"
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "store_unavailable"
    assert set(received(upstream)) == {1, 2}
    assert sent_without_a_row(upstream, rows) == []


def test_no_call_fails_once_redis_is_back(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer,
                                          redis_server: RedisServer) -> None:
    write_counter_project(tmp_path, llm.url, upstream.url, f"gateway:\n  redis: {redis_server.url}\n")
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")

    def writes(url: str, numbers: range) -> list[int]:
        with httpx.Client(base_url=url, timeout=30) as client, ThreadPoolExecutor(8) as pool:
            return list(pool.map(lambda n: client.post("/agents/writer/tools/write", json={"n": n}).status_code,
                                 numbers))

    try:
        with running(app) as url:
            assert set(writes(url, range(0, 40))) == {200}  # several pooled connections to Redis
            redis_server.halt()
            try:
                during = writes(url, range(100, 110))
            finally:
                redis_server.start()
            after = writes(url, range(200, 240))
            again = writes(url, range(300, 340))
    finally:
        close_store(safety)
    assert set(during) == {503}
    assert after == [200] * 40 and again == [200] * 40


def test_calls_during_a_redis_outage_are_refused_within_the_setting_not_the_apis_timeout(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, redis_server: RedisServer) -> None:
    """Once the process's subscription for hand-overs has seen Redis go, a call waited for it to be made again as
    long as the api's timeout (60 s here) before it was told Redis was down (user46's operator trial: every call
    of an outage waited for its end). Now at most `gateway.shared_state_timeout`; the client's 20 s is only a hang
    guard."""
    write_counter_project(tmp_path, llm.url, upstream.url,
                          f"gateway:\n  redis: {redis_server.url}\n  shared_state_timeout: 1\n")
    agents = tmp_path / "agents.yaml"
    agents.write_text(agents.read_text().replace("timeout: 5}", "timeout: 60}"))
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    try:
        with running(app) as url, httpx.Client(base_url=url, timeout=20) as client:
            assert client.post("/agents/writer/tools/write", json={"n": 1}).status_code == 200
            redis_server.halt()
            try:
                first = client.post("/agents/writer/tools/write", json={"n": 2})
                time.sleep(1.0)  # the subscription has heard its connection close and waits to be made again
                later = [client.post("/agents/writer/tools/write", json={"n": n}) for n in (3, 4)]
            finally:
                redis_server.start()
            back = client.post("/agents/writer/tools/write", json={"n": 5})
    finally:
        close_store(safety)
    for refused in (first, *later):
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "store_unavailable", refused.text
    assert back.status_code == 200, back.text
    assert set(received(upstream)) == {1, 5}
