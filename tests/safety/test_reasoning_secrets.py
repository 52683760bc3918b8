"""A model's reasoning (Anthropic's thinking blocks, `reasoning_content`, Gemini's thought parts, Responses' reasoning
items, Ollama's thinking) that names one of the gateway's secrets is kept redacted, as the reply's text is: the
store never holds it (a run paused for approval, a stored Response), and a run resumed from the store echoes the
redacted reasoning. Within a run the reasoning goes back verbatim to the provider that wrote it (Anthropic refuses a
thinking block whose text no longer matches its signature). Each wire format that has reasoning, streamed and not:
a real gateway on 127.0.0.1, the scripted LLM, a recording upstream.

Before: the reasoning was stored as the provider sent it (the token in the approvals' run state and in a stored
Response's conversation), and a resumed run sent it back so."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import httpx
import pytest
from recording_server import RecordingServer
from scripted_llm import Call
from scripted_llm import Reply as LLMReply
from server_support import LenientLLM, running, write_project

from gateway.kernel.redaction import MARKER

from .safety_support import API_TOKEN, build_app

KINDS = ["openai", "anthropic", "gemini", "ollama", "openai-responses"]
THINKING = f"The token is {API_TOKEN}; the user wants a comment."
AGENTS = """\
providers:
  p: {{{{kind: {kind}, base_url: "{{llm}}{suffix}", api_key: test-key}}}}
apis:
  github: {{{{base_url: "{{upstream}}/github", auth: {{{{type: bearer, token: {token}}}}}}}}}
agents:
  triage: {{{{model: p/model-x, tools: [{{{{api: github}}}}], approval: writes}}}}
"""
COMMENT = {"owner": "acme", "repo": "app", "issue_number": 7, "body": "On it."}
REPO = {"owner": "acme", "repo": "app"}


def _project(folder: Path, llm: LenientLLM, upstream: RecordingServer, kind: str) -> None:
    suffix = "/v1" if kind.startswith("openai") else ""
    write_project(folder, llm.url, upstream.url, AGENTS.format(kind=kind, suffix=suffix, token=API_TOKEN))


def _stored(store: Path) -> str:
    with sqlite3.connect(store) as db:
        tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return repr([db.execute(f'SELECT * FROM "{table}"').fetchall() for table in tables])


@pytest.mark.parametrize("stream", [False, True], ids=["answer", "streamed"])
@pytest.mark.parametrize("kind", KINDS)
def test_reasoning_with_a_secret_is_stored_redacted_and_resumed_so(tmp_path: Path, llm: LenientLLM,
                                                                   upstream: RecordingServer, kind: str,
                                                                   stream: bool) -> None:
    _project(tmp_path, llm, upstream, kind)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    llm.script(LLMReply(thinking=THINKING, calls=[Call("createIssueComment", COMMENT)]), LLMReply(text="Commented."))
    with running(app) as url:
        paused = httpx.post(f"{url}/v1/chat/completions", timeout=30, json={
            "model": "triage", "stream": stream, "messages": [{"role": "user", "content": "comment on 7"}]})
        assert paused.status_code == 200, paused.text
        waiting = httpx.get(f"{url}/approvals", timeout=30).json()["data"]
        stored = _stored(tmp_path / "state.db")
        decided = httpx.post(f"{url}/approvals/{waiting[0]['id']}", json={"decision": "approve"}, timeout=30)
    safety.store.close()  # type: ignore[attr-defined]
    assert decided.status_code == 200, decided.text
    assert [r.method for r in upstream.requests] == ["POST"]  # the approved comment ran
    assert API_TOKEN not in paused.text and API_TOKEN not in decided.text
    assert "The token is" in stored  # the paused run's state holds the reasoning ...
    assert API_TOKEN not in stored, stored  # ... redacted
    # The resumed run sent the model its reasoning from the store: redacted.
    resumed = json.dumps(llm.bodies()[1])
    assert f"The token is {MARKER}" in resumed and API_TOKEN not in resumed, resumed
    assert API_TOKEN not in _stored(tmp_path / "state.db")


@pytest.mark.parametrize("stream", [False, True], ids=["answer", "streamed"])
@pytest.mark.parametrize("kind", KINDS)
def test_reasoning_goes_back_verbatim_within_a_run_and_a_stored_response_keeps_it_redacted(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, kind: str, stream: bool) -> None:
    _project(tmp_path, llm, upstream, kind)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    llm.script(LLMReply(thinking=THINKING, calls=[Call("getRepo", REPO)]), LLMReply(text="It is acme/app."))
    with running(app) as url:
        answer = httpx.post(f"{url}/v1/responses", timeout=30, json={
            "model": "triage", "stream": stream, "input": "which repo?"})
    safety.store.close()  # type: ignore[attr-defined]
    assert answer.status_code == 200, answer.text
    assert API_TOKEN not in answer.text
    # Within the run: the provider's own reasoning, as it wrote it (a signature must still match it).
    assert THINKING in json.dumps(llm.bodies()[1])
    stored = _stored(tmp_path / "state.db")
    assert "The token is" in stored and API_TOKEN not in stored, stored
