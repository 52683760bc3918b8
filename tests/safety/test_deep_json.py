"""JSON nested past what the gateway's Python walks (redaction, the audit's copy, a Response's shape) can follow
(real uvicorn, the scripted LLM, a recording upstream): redteam44 found that orjson reads 1,024 levels and the
walks recursed past Python's limit well before that. A caller's body that deep was a 500 (on the direct door with
no audit row), an upstream's answer that deep lost the whole chat run (a 500 after its call was sent). Each is now
refused where it is read, with a reason, and the run goes on."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from recording_server import RecordingServer
from recording_server import Reply as Answer
from scripted_llm import Call, Reply
from server_support import LenientLLM, running, write_project

from gateway.jsondepth import MAX_DEPTH

from .safety_support import SAFE_AGENTS_YAML, TRIAGE_KEY, WEATHER_KEY, bearer, build_app

DEEP = 500
"""Levels: under orjson's 1,024, past what a recursive walk of Python's can follow."""


def _lists(levels: int) -> str:
    return "[" * levels + "]" * levels


def _schema(levels: int) -> str:
    return '{"type": "object", "properties": {"a": ' * levels + '{"type": "string"}' + "}}" * levels


BODIES = {
    "/v1/chat/completions": '{"model": "triage", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": '
                            '"function", "function": {"name": "mine", "parameters": ' + _schema(DEEP) + "}}]}",
    "/v1/responses": '{"model": "triage", "input": "hi", "tools": [{"type": "function", "name": "mine", '
                     '"parameters": ' + _schema(DEEP) + "}]}",
    "/agents/triage/tools/listIssues": '{"owner": "acme", "repo": "app", "labels": ' + _lists(DEEP) + "}",
    "/approvals/apr_none": '{"decision": "approve", "arguments": {"labels": ' + _lists(DEEP) + "}}",
}


def test_a_body_nested_past_the_limit_is_a_400_on_every_door(tmp_path: Path, llm: LenientLLM,
                                                             upstream: RecordingServer) -> None:
    write_project(tmp_path, llm.url, upstream.url, SAFE_AGENTS_YAML)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    answers = {}
    with running(app) as url:
        for path, body in BODIES.items():
            # One connection each: an unhandled error closes its connection, and the next request would fail on it.
            with httpx.Client(base_url=url, headers=bearer(TRIAGE_KEY), timeout=30) as client:
                answers[path] = client.post(path, content=body, headers={"content-type": "application/json"})
        with httpx.Client(base_url=url, headers=bearer(TRIAGE_KEY), timeout=30) as client:
            llm.script(Reply(text="read"))
            within = client.post("/v1/responses", content=BODIES["/v1/responses"].replace(_schema(DEEP), _schema(30)),
                                 headers={"content-type": "application/json"})
            audit = client.get("/audit?limit=10&kind=tool").json()["data"]
    safety.store.close()  # type: ignore[attr-defined]
    for path, answer in answers.items():
        assert answer.status_code == 400, (path, answer.text)
        assert f"more than {MAX_DEPTH} levels deep" in answer.json()["error"]["message"], path
    assert upstream.requests == [] and len(llm.requests) == 1  # nothing ran but the shallow request's model call
    assert within.status_code == 200, within.text  # a schema 30 levels deep (60 of JSON) is read as before
    # The direct call is recorded as any call whose arguments could not be read (before, it had no row at all).
    assert [(row["tool"], row["status"]) for row in audit] == [("listIssues", "invalid_arguments")]


def test_an_upstream_answer_nested_past_the_limit_is_a_tool_error_and_the_chat_goes_on(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    write_project(tmp_path, llm.url, upstream.url, SAFE_AGENTS_YAML)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    upstream.route("/github/repos/acme/app/issues", Answer(200, _lists(1000), {"content-type": "application/json"}))
    llm.script(Reply(calls=[Call("listIssues", {"owner": "acme", "repo": "app"})]), Reply(text="That list was odd."))
    with running(app) as url, httpx.Client(base_url=url, headers=bearer(TRIAGE_KEY), timeout=30) as client:
        chat = client.post("/v1/chat/completions", json={"model": "triage",
                                                         "messages": [{"role": "user", "content": "list them"}]})
        direct = client.post("/agents/triage/tools/listIssues", json={"owner": "acme", "repo": "app"})
        audit = client.get("/audit?limit=10&kind=tool").json()["data"]
    safety.store.close()  # type: ignore[attr-defined]
    assert chat.status_code == 200, chat.text
    assert chat.json()["choices"][0]["message"]["content"] == "That list was odd."
    [step] = chat.json()["gateway"]["steps"]
    assert step["error_type"] == "invalid_output" and "not JSON" in step["error"]
    assert direct.status_code == 502 and direct.json()["error"]["code"] == "invalid_output"
    assert [row["status"] for row in audit] == ["invalid_output", "invalid_output"]


def test_a_models_arguments_nested_past_the_limit_are_refused_unsent(tmp_path: Path, llm: LenientLLM,
                                                                      upstream: RecordingServer) -> None:
    write_project(tmp_path, llm.url, upstream.url, SAFE_AGENTS_YAML)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    raw = '{"latitude": 52.5, "longitude": 13.4, "daily": ' + _lists(DEEP) + "}"
    llm.script(Reply(calls=[Call("getForecast", raw=raw)]), Reply(text="I could not ask for that."))
    with running(app) as url, httpx.Client(base_url=url, headers=bearer(WEATHER_KEY), timeout=30) as client:
        chat = client.post("/v1/chat/completions", json={"model": "weather",
                                                         "messages": [{"role": "user", "content": "weather?"}]})
        audit = client.get("/audit?limit=10&kind=tool").json()["data"]
    safety.store.close()  # type: ignore[attr-defined]
    assert chat.status_code == 200, chat.text
    [step] = chat.json()["gateway"]["steps"]
    assert step["error_type"] == "invalid_arguments" and f"more than {MAX_DEPTH} levels" in step["error"]
    assert upstream.requests == []
    assert [(row["tool"], row["status"]) for row in audit] == [("getForecast", "invalid_arguments")]
    told = [json.loads(m["content"]) for m in llm.requests[-1].body["messages"] if m["role"] == "tool"]
    assert told[0]["error_type"] == "invalid_arguments"


MODERN = "2026-07-28"


def test_an_mcp_call_whose_arguments_nest_past_the_limit_is_refused_and_audited(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    """The MCP SDK reads the request itself (up to Python's parser's 1,000 levels): the door refuses the call as
    invalid arguments, recorded; before, the JSON-RPC answer was an internal error and no row was written."""
    write_project(tmp_path, llm.url, upstream.url,
                  SAFE_AGENTS_YAML.replace("    approval: writes\n", "    approval: writes\n    code_mode: on\n"))
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    envelope = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    answers = {}
    with running(app) as url:
        for name, arguments in (("listIssues", '{"owner": "acme", "repo": "app", "labels": ' + _lists(DEEP) + "}"),
                                ("run_code", '{"code": "1", "data": ' + _lists(DEEP) + "}")):
            body = ('{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "' + name
                    + '", "arguments": ' + arguments + ', "_meta": ' + json.dumps(envelope) + "}}")
            headers = {**bearer(TRIAGE_KEY), "content-type": "application/json", "mcp-protocol-version": MODERN,
                       "accept": "application/json, text/event-stream", "mcp-method": "tools/call", "mcp-name": name}
            answers[name] = httpx.post(f"{url}/mcp/triage", content=body, headers=headers, timeout=30).json()
        audit = httpx.get(f"{url}/audit?limit=10", headers=bearer(TRIAGE_KEY)).json()["data"]
    safety.store.close()  # type: ignore[attr-defined]
    for name, answer in answers.items():
        assert answer["result"]["isError"], (name, answer)
        assert f"more than {MAX_DEPTH} levels deep" in answer["result"]["content"][0]["text"], name
    assert upstream.requests == []
    assert sorted((row["tool"], row["status"]) for row in audit) == [("listIssues", "invalid_arguments"),
                                                                     ("run_code", "invalid_arguments")]
