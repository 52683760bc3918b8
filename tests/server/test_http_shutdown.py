"""A chat, Responses or direct call cut by `gateway serve --graceful-timeout` (SIGTERM while its tool call runs): a
real process, a real slow upstream on 127.0.0.1, the scripted LLM, the official `openai` client. The caller is told
the instance stopped and whether the tool call was sent (before: uvicorn's bare plain-text 500), as the MCP door
tells it (tests/server/test_mcp_shutdown.py), and the call's audit row agrees."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import ResponseCreatedEvent, ResponseFailedEvent
from recording_server import RecordingServer
from scripted_llm import Call
from scripted_llm import Reply as LLMReply
from serve_process import CUTS, audit_rows, folder_of_a_killed_supervisor, stopped_while_held
from server_support import LenientLLM

from gateway.server.metrics_folder import PREFIX, MetricsFolder


def _client(port: int) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=60)


def _beside(error: openai.APIStatusError) -> dict[str, Any]:
    """The error object (the SDK's `body`) with the answer's `gateway` beside it, as the unstreamed doors send it."""
    return {**error.body, "gateway": error.response.json()["gateway"]}  # type: ignore[dict-item]


def _chat(port: int) -> dict[str, Any]:
    with pytest.raises(openai.APIStatusError) as raised:
        _client(port).chat.completions.create(model="ops", messages=[{"role": "user", "content": "go"}])
    assert raised.value.status_code == 503  # before: 500, a text body the SDK could not read
    return _beside(raised.value)


def _streamed_chat(port: int) -> dict[str, Any]:
    stream = _client(port).chat.completions.create(model="ops", messages=[{"role": "user", "content": "go"}],
                                                   stream=True)
    with pytest.raises(openai.APIError) as raised:  # from the stream: its 200 was sent before the cut
        for _ in stream:
            pass
    assert not isinstance(raised.value, openai.APIStatusError)
    return {"message": raised.value.message, **raised.value.body}  # type: ignore[dict-item]


def _responses(port: int) -> dict[str, Any]:
    with pytest.raises(openai.APIStatusError) as raised:
        _client(port).responses.create(model="ops", input="go")
    assert raised.value.status_code == 503
    return _beside(raised.value)


def _streamed_responses(port: int) -> dict[str, Any]:
    """The stream read with the `openai` SDK's own event types: it ends with the Responses API's `response.failed`
    (before: the connection closed with no terminal event, which the SDK's stream ends on silently)."""
    events = list(_client(port).responses.create(model="ops", input="go", stream=True))
    assert isinstance(events[0], ResponseCreatedEvent)
    assert [event.sequence_number for event in events] == list(range(len(events)))
    last = events[-1]
    assert isinstance(last, ResponseFailedEvent), [event.type for event in events]
    assert last.response.status == "failed" and last.response.error is not None
    assert last.response.error.code == "server_error"  # one of OpenAI's codes; the gateway's is in the message
    message = last.response.error.message
    assert message.endswith("(instance_stopped)")
    gateway = (last.response.model_extra or {})["gateway"]
    return {"code": gateway.pop("code"), "message": message, "gateway": gateway}


def _direct(port: int) -> dict[str, Any]:
    answer = httpx.post(f"http://127.0.0.1:{port}/agents/ops/tools/slow", json={}, timeout=60)
    assert answer.status_code == 503, answer.text
    error: dict[str, Any] = answer.json()["error"]
    return {**error, "gateway": answer.json()["gateway"]}


DOORS: dict[str, Callable[[int], dict[str, Any]]] = {
    "chat": _chat, "streamed chat": _streamed_chat, "responses": _responses,
    "streamed responses": _streamed_responses, "direct": _direct}
"""Each door's caller: the error it is given (the SDK's `body`: the error object, `gateway` beside or inside it)."""


@pytest.mark.parametrize("door", list(DOORS))
@pytest.mark.parametrize("sent", list(CUTS))
def test_a_call_cut_by_the_graceful_timeout_says_the_instance_stopped_and_whether_it_was_sent(
        tmp_path: Path, upstream: RecordingServer, llm: LenientLLM, door: str, sent: str) -> None:
    if door != "direct":
        llm.script(LLMReply(calls=[Call("slow")]), LLMReply(text="never asked: the instance stops first"))
    _, _, said, row = CUTS[sent]
    with stopped_while_held(tmp_path, upstream, llm.url, sent) as port:
        error = DOORS[door](port)
    assert error["code"] == "instance_stopped"
    assert "The gateway instance stopped" in error["message"] and said in error["message"]
    assert error["gateway"] == {"sent": sent, "may_have_run": sent == "sent"}
    assert audit_rows(tmp_path) == [("transport_error", row)]
    assert sum(request.path == "/slow" for request in upstream.requests) == (sent == "sent")
    if door != "direct":  # the chat's own row (before: none; the run never returned to write it)
        calls = "1 tool call was sent" if sent == "sent" else "no tool call was sent"
        assert audit_rows(tmp_path, "chat") == [
            ("stopped", f"The gateway instance stopped before the run ended: {calls}"
                        + (" (their rows, under this run's id, say how each ended)." if sent == "sent" else "."))]


def _decide_on_the_api(port: int, approval: str) -> httpx.Response:
    return httpx.post(f"http://127.0.0.1:{port}/approvals/{approval}", json={"decision": "approve"}, timeout=60)


def _decide_on_the_console(port: int, approval: str) -> httpx.Response:
    """The console's Approve button, as its script sends it: the page's CSRF token, the decision as JSON."""
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as browser:
        page = browser.get("/console/approvals")
        token = re.search(r'<meta name="csrf-token" content="([^"]+)"', page.text)
        assert page.status_code == 200 and token is not None and approval in page.text, page.text
        return browser.post(f"/console/approvals/{approval}", json={"decision": "approve"},
                            headers={"X-CSRF-Token": token.group(1)})


DECIDERS: dict[str, Callable[[int, str], httpx.Response]] = {
    "api": _decide_on_the_api, "console": _decide_on_the_console}


@pytest.mark.parametrize("decider", list(DECIDERS))
@pytest.mark.parametrize("sent", list(CUTS))
def test_an_approved_call_whose_resume_is_cut_by_the_graceful_timeout_says_so_and_its_run_has_its_row(
        tmp_path: Path, upstream: RecordingServer, llm: LenientLLM, sent: str, decider: str) -> None:
    """The decision's answer is the chat's (the resumed run's completion), so its cut is answered as a cut chat's:
    the 503 with the OpenAI-shaped error (before: uvicorn's plain-text 500; from the console's Approve button too,
    whose script shows the error's message), and the run gets its `stopped` row (before: none, the resumed loop
    never returned to write it)."""
    llm.script(LLMReply(calls=[Call("slow")]), LLMReply(text="never asked: the instance stops first"))
    _, _, said, row = CUTS[sent]
    with stopped_while_held(tmp_path, upstream, llm.url, sent, "    approval: always\n") as port:
        paused = _client(port).chat.completions.create(model="ops", messages=[{"role": "user", "content": "go"}])
        [pending] = paused.model_extra["gateway"]["pending_approvals"]  # type: ignore[index]
        answer = DECIDERS[decider](port, pending["id"])
    assert answer.status_code == 503, answer.text
    error = answer.json()["error"]
    assert error["code"] == "instance_stopped" and error["type"] == "server_error"
    assert "The gateway instance stopped" in error["message"] and said in error["message"]
    assert answer.json()["gateway"] == {"sent": sent, "may_have_run": sent == "sent"}
    assert ("transport_error", row) in audit_rows(tmp_path)
    calls = "1 tool call was sent (their rows, under this run's id, say how each ended)." if sent == "sent" \
        else "no tool call was sent."
    assert audit_rows(tmp_path, "chat") == [  # newest first
        ("stopped", f"The gateway instance stopped before the run ended: {calls}"), ("paused", None)]
    listed = subprocess.run([sys.executable, "-m", "gateway", "approvals", "list", "--json"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, check=True)
    # Nothing sent: the decision was taken back, to be made again (on another instance); sent: the approval is used.
    waiting = [approval["id"] for approval in json.loads(listed.stdout)]
    assert waiting == ([] if sent == "sent" else [pending["id"]]), listed.stdout


@pytest.mark.parametrize("sent", list(CUTS))
def test_workers_whose_supervisor_is_sigkilled_stop_as_on_sigterm_and_free_the_port(
        tmp_path: Path, upstream: RecordingServer, llm: LenientLLM, sent: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`gateway serve --workers 2`, its supervisor SIGKILLed while a chat's tool call is held (`kill -9 <pid>`, the
    OOM killer: the workers are not told). Each worker notices its parent is gone and stops as on SIGTERM: the chat is
    cut and told so, its rows say `stopped`, every worker ends and the port is free (before: both workers lived on,
    orphans holding the port, and the chat waited on them). The supervisor's metrics folder goes with the last worker
    (before: left in the temporary directory, one more a kill), and the start removed the one an earlier killed
    supervisor left, not a running one's nor one it cannot judge (before: both stayed)."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    running = MetricsFolder(str(temporary))  # this test process's: its lock is held
    older = temporary / f"{PREFIX}older"  # no lock file (an older version's, or someone's own): not judged
    older.mkdir()
    left = folder_of_a_killed_supervisor(temporary)
    llm.script(LLMReply(calls=[Call("slow")]), LLMReply(text="never asked: the instance stops first"))
    _, _, said, row = CUTS[sent]
    with stopped_while_held(tmp_path, upstream, llm.url, sent, workers=2) as port:
        assert not left.exists()  # removed at the start
        made = {path for path in temporary.iterdir() if path.name.startswith(PREFIX)} - {older}
        assert len(made) == 2 and any(path.glob("*.db") for path in made)  # the workers count there
        error = _chat(port)
    assert {path for path in temporary.iterdir() if path.name.startswith(PREFIX)} == {Path(running.path), older}
    running.close()
    assert error["code"] == "instance_stopped" and said in error["message"]
    assert error["gateway"] == {"sent": sent, "may_have_run": sent == "sent"}
    assert audit_rows(tmp_path) == [("transport_error", row)]
    calls = "1 tool call was sent (their rows, under this run's id, say how each ended)." if sent == "sent" \
        else "no tool call was sent."
    assert audit_rows(tmp_path, "chat") == [("stopped", f"The gateway instance stopped before the run ended: {calls}")]
    assert "the supervisor of this worker" in (tmp_path / "serve.log").read_text()
