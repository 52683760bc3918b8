"""A credential an operator fixes as an argument (`tools: [{api: ..., args: {api_key: ${KEY}}}]`, for the many
specs that declare their key as a plain parameter rather than a security scheme) is a secret like one under
`auth`: hidden from the model when an upstream echoes it, and absent from the chat answer and the audit log."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from recording_server import RecordingServer, Reply
from scripted_llm import Call
from scripted_llm import Reply as LLMReply
from server_support import LenientLLM, running

from .safety_support import build_app

KEY = "fixed-key-7f3a9c1e5b"
SPEC = {
    "openapi": "3.0.3", "info": {"title": "keyed", "version": "1"},
    "paths": {"/lookup": {"get": {
        "operationId": "lookup",
        "parameters": [{"name": "api_key", "in": "query", "required": True, "schema": {"type": "string"}},
                       {"name": "sort_key", "in": "query", "schema": {"type": "string"}},
                       {"name": "q", "in": "query", "schema": {"type": "string"}}],
        "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}},
    }}},
}


def _agents(llm: str, upstream: str, store: Path) -> dict[str, Any]:
    """agents.yaml (as JSON, which YAML reads): the key fixed as an argument from the environment."""
    return {"providers": {"openai": {"kind": "openai", "base_url": f"{llm}/v1", "api_key": "test-key"}},
            "apis": {"keyed": {"base_url": upstream}},
            "agents": {"clerk": {"model": "openai/gpt-test", "tools": [{"api": "keyed",
                                                                         "args": {"api_key": "${KEYED_KEY}",
                                                                                  "sort_key": "created"}}]}},
            "gateway": {"store": str(store)}}


@pytest.fixture
def served(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("KEYED_KEY", KEY)
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "keyed.json").write_text(json.dumps(SPEC))
    store = tmp_path / "state.db"
    (tmp_path / "agents.yaml").write_text(json.dumps(_agents(llm.url, upstream.url, store)))
    app, _ = build_app(tmp_path, store=store)
    with running(app) as url:
        yield url


def test_a_fixed_credential_an_upstream_echoes_reaches_neither_the_model_nor_the_audit(
        served: str, llm: LenientLLM, upstream: RecordingServer) -> None:
    upstream.route("/lookup", lambda request: Reply(200, {"you_sent": request.target, "error": f"bad key {KEY}"}))
    llm.script(LLMReply(calls=[Call("lookup", {"q": "x"})]), LLMReply(text="done"))
    answer = httpx.post(f"{served}/v1/chat/completions", timeout=30,
                        json={"model": "clerk", "messages": [{"role": "user", "content": "look x up"}]})
    assert answer.status_code == 200, answer.text
    assert dict(upstream.last.query)["api_key"] == KEY  # it was sent
    given = json.dumps(llm.requests[1].body)  # what the model was given
    assert KEY not in given
    assert "sort_key=created" in given  # a fixed value whose name is no credential's is not blanked
    assert KEY not in answer.text  # the chat answer and its steps
    audit = httpx.get(f"{served}/audit", timeout=10)
    assert audit.status_code == 200 and KEY not in audit.text
    tool_rows = [row for row in audit.json()["data"] if row["tool"] == "lookup"]
    assert tool_rows and tool_rows[0]["arguments"]["api_key"] == "[REDACTED]"

