"""OpenAI strict mode end to end: a real gateway sends strict tools and maps the model's arguments back.

A spec with the shapes strict mode cannot take as they are (a free-form object, a map, an `allOf` with an
annotation part, optional fields); the scripted LLM answers in strict form; the upstream must receive the
request the exact schema describes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from recording_server import RecordingServer
from recording_server import Reply as UpstreamReply
from scripted_llm import Call, Reply
from server_support import LenientLLM, running
from strict_rules import strict_violations

from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app
from gateway.server.supervision import Safety

pytestmark = pytest.mark.anyio

SPEC = {
    "openapi": "3.0.3", "info": {"title": "notes", "version": "1"},
    "components": {"schemas": {"Title": {"type": "string", "minLength": 1}}},
    "paths": {"/notes": {"post": {
        "operationId": "createNote",
        "requestBody": {"required": True, "content": {"application/json": {"schema": {
            "type": "object", "required": ["title"],
            "properties": {
                "title": {"allOf": [{"$ref": "#/components/schemas/Title"}, {"description": "The note's title."}]},
                "metadata": {"type": "object", "description": "Anything the caller wants kept."},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "pinned": {"type": "boolean"}}}}}},
        "responses": {"201": {"description": "created", "content": {"application/json": {
            "schema": {"type": "object", "properties": {"id": {"type": "integer"}}}}}}}}}},
}

AGENTS = """\
providers:
  openai: {{kind: openai, base_url: "{llm}/v1", api_key: test-key, strict: true}}
apis:
  notes: {{base_url: "{upstream}/api"}}
agents:
  scribe:
    model: openai/gpt-test
    tools: [{{api: notes}}]
  careful:
    model: openai/gpt-test
    tools: [{{api: notes}}]
    approval: writes
"""


@pytest.fixture
def served(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Any:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "notes.json").write_text(json.dumps(SPEC))
    (tmp_path / "agents.yaml").write_text(AGENTS.format(llm=llm.url, upstream=upstream.url))
    upstream.route("/api/notes", UpstreamReply(201, {"id": 5}))
    runtime = load_runtime(tmp_path / "specs", tmp_path / "agents.yaml", use_cache=False)
    safety = Safety.open(runtime, store="memory:").app_options()  # approvals need the safety layer
    with running(create_app(RuntimeHolder(runtime), watch=False, **safety)) as url:
        yield url


def _chat(url: str, agent: str = "scribe") -> Any:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    return client.chat.completions.create(model=agent, messages=[{"role": "user", "content": "Note it."}])


async def test_the_upstream_gets_what_the_exact_schema_describes(served: str, llm: LenientLLM,
                                                                 upstream: RecordingServer) -> None:
    strict_args = {"title": "Groceries", "metadata": '{"source": "chat", "tags": [1, 2]}',
                   "labels": [{"key": "color", "value": "green"}], "pinned": None}
    llm.script(Reply(calls=[Call("createNote", strict_args)]), Reply(text="Noted."))
    completion = _chat(served)
    assert completion.choices[0].message.content == "Noted."
    function = llm.bodies()[0]["tools"][0]["function"]
    assert function["strict"] is True and strict_violations(function["parameters"]) == []
    assert function["parameters"]["properties"]["title"] == {"type": "string", "description": "The note's title."}
    assert upstream.last.json() == {"title": "Groceries", "metadata": {"source": "chat", "tags": [1, 2]},
                                    "labels": {"color": "green"}}


async def test_json_text_that_does_not_parse_goes_back_to_the_model(served: str, llm: LenientLLM,
                                                                    upstream: RecordingServer) -> None:
    bad = {"title": "Groceries", "metadata": "{source: chat}", "labels": None, "pinned": True}
    llm.script(Reply(calls=[Call("createNote", bad)]), Reply(text="Sorry."))
    completion = _chat(served)
    step = completion.model_extra["gateway"]["steps"][0]
    assert step["ok"] is False
    tool_message = [m for m in llm.bodies()[1]["messages"] if m["role"] == "tool"][0]
    error = json.loads(tool_message["content"])
    assert "`metadata` must be a string holding JSON text" in json.dumps(error)
    assert upstream.requests == []


async def test_an_approval_shows_and_runs_the_mapped_back_arguments(served: str, llm: LenientLLM,
                                                                   upstream: RecordingServer) -> None:
    strict_args = {"title": "Groceries", "metadata": '{"source": "chat"}', "labels": None, "pinned": None}
    llm.script(Reply(calls=[Call("createNote", strict_args)]), Reply(text="Noted."))
    pending = _chat(served, "careful").model_extra["gateway"]["pending_approvals"]
    assert [p["arguments"] for p in pending] == [{"title": "Groceries", "metadata": {"source": "chat"}}]
    assert upstream.requests == []
    answer = httpx.post(f"{served}/approvals/{pending[0]['id']}", json={"decision": "approve"}, timeout=30)
    assert answer.status_code == 200, answer.text
    assert upstream.last.json() == {"title": "Groceries", "metadata": {"source": "chat"}}
