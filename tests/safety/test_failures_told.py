"""Failures say what happened: an error answer after a tool ran carries the steps and says they may have run; the
approvals route answers the resumed run's failure (not 500); a chat whose audit row fails after its error answer
leaves the connection usable; SQLite's refusals (rate limits, approval holds) on a full disk are 503, not 500.
Real uvicorn, a scripted LLM and a recording upstream on loopback; the full disk is a 1 MiB tmpfs."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import LenientLLM, running

from .counted_writes import received, write_counter_project
from .safety_support import build_app
from .test_audit_fails_closed import fill, tiny_disk

CHAT = {"model": "writer", "messages": [{"role": "user", "content": "write 5"}]}


def test_a_chat_whose_model_fails_after_a_write_answers_the_steps(tmp_path: Path, llm: LenientLLM,
                                                                 upstream: RecordingServer) -> None:
    write_counter_project(tmp_path, llm.url, upstream.url)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    try:
        with running(app) as url:
            llm.script(Reply(calls=[Call("write", {"n": 5})]), Reply(status=400, error="context too long"))
            with httpx.Client(base_url=url, timeout=30) as client:
                answer = client.post("/v1/chat/completions", json=CHAT)
            llm.script(Reply(calls=[Call("write", {"n": 6})]), Reply(status=400, error="context too long"))
            sdk = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
            with pytest.raises(openai.APIStatusError) as raised:
                sdk.chat.completions.create(model="writer", messages=[{"role": "user", "content": "write 6"}])
    finally:
        safety.store.close()  # type: ignore[attr-defined]
    assert answer.status_code == 502
    body = answer.json()
    assert "may have run" in body["error"]["message"] and "write" in body["error"]["message"]
    assert body["gateway"]["may_have_run"] is True
    assert [(s["tool"], s["ok"]) for s in body["gateway"]["steps"]] == [("write", True)]
    # The SDK raises with the answer: the steps are there for a client to see before it retries.
    assert raised.value.status_code == 502 and "may have run" in raised.value.message
    assert raised.value.response.json()["gateway"]["steps"][0]["arguments"] == {"n": 6}
    assert set(received(upstream)) == {5, 6}


def test_an_approved_write_whose_run_then_fails_is_told_not_500(tmp_path: Path, llm: LenientLLM,
                                                                upstream: RecordingServer) -> None:
    agents = write_counter_project(tmp_path, llm.url, upstream.url)
    agents.write_text(agents.read_text().replace("tools: [{api: counter}]",
                                                 "tools: [{api: counter}]\n    approval: writes"))
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    try:
        with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
            llm.script(Reply(calls=[Call("write", {"n": 9})]), Reply(status=400, error="the model broke"))
            paused = client.post("/v1/chat/completions", json=CHAT).json()
            approval = paused["gateway"]["pending_approvals"][0]["id"]
            decided = client.post(f"/approvals/{approval}", json={"decision": "approve"})
            again = client.post(f"/approvals/{approval}", json={"decision": "approve"})
    finally:
        safety.store.close()  # type: ignore[attr-defined]
    assert decided.status_code == 502  # the provider's failure, not an internal error
    error = decided.json()["error"]
    assert "may have run" in error["message"] and f"Approval {approval} is used" in error["message"]
    assert [s["tool"] for s in decided.json()["gateway"]["steps"]] == ["write"]
    assert again.status_code == 409  # used once: the write ran
    assert received(upstream) == {9: 1}


@pytest.mark.slow
def test_a_failed_chat_whose_audit_row_fails_keeps_the_connection(tmp_path: Path, llm: LenientLLM,
                                                                  upstream: RecordingServer) -> None:
    with tiny_disk(tmp_path / "disk") as disk:
        write_counter_project(tmp_path, llm.url, upstream.url)
        app, safety = build_app(tmp_path, store=disk / "state.db")
        try:
            with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
                assert client.get("/healthz").status_code == 200
                filler = fill(disk)
                for _ in range(3):  # until the log refuses rows (a WAL with room takes a few)
                    llm.script(Reply(status=400, error="no"))
                    failed = client.post("/v1/chat/completions", json=CHAT)
                    assert failed.status_code == 502
                    assert client.get("/healthz").status_code == 200  # the same connection still answers
                filler.unlink()
        finally:
            safety.store.close()  # type: ignore[attr-defined]


@pytest.mark.slow
def test_sqlite_refusals_on_a_full_disk_are_503_not_500(tmp_path: Path, llm: LenientLLM,
                                                        upstream: RecordingServer) -> None:
    with tiny_disk(tmp_path / "disk") as disk:
        agents = write_counter_project(tmp_path, llm.url, upstream.url, "gateway:\n  rate_limits: {client: 1000/s}\n")
        agents.write_text(agents.read_text().replace("tools: [{api: counter}]",
                                                     "tools: [{api: counter}]\n    approval: writes"))
        app, safety = build_app(tmp_path, store=disk / "state.db")
        try:
            with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
                assert client.post("/agents/writer/tools/write", json={"n": 1}).status_code == 202  # held
                filler = fill(disk)
                answers = [client.post("/agents/writer/tools/write", json={"n": n}) for n in range(2, 60)]
                filler.unlink()
        finally:
            safety.store.close()  # type: ignore[attr-defined]
    statuses = {a.status_code for a in answers}
    assert 500 not in statuses and 503 in statuses
    codes = {a.json()["error"]["code"] for a in answers if a.status_code == 503}
    assert codes <= {"store_unavailable", "audit_unavailable"}
    assert not received(upstream)  # held calls: nothing was sent
