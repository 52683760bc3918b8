"""A credential the gateway holds, put into a tool call's arguments (a model talked into it by an instruction in a
tool's result), is not sent to any api: the call is refused before any request leaves, the model (or the MCP or
direct caller) is told why without the value being quoted, and the audit keeps the refused call without it. A
real gateway on 127.0.0.1, the scripted LLM, the official MCP client and a recording upstream.

Before: the request went out with the token in it (the weather api received the github api's token as
`timezone`); only the audit row's copy of the arguments was redacted."""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx
import pytest
from recording_server import RecordingServer
from scripted_llm import Call
from scripted_llm import Reply as LLMReply
from server_support import LenientLLM, running, write_project

from .safety_support import API_TOKEN, SAFE_AGENTS_YAML, TRIAGE_KEY, WEATHER_KEY, bearer, build_app, delegating_yaml

FORMS = {
    "as written": API_TOKEN,
    "base64": base64.b64encode(API_TOKEN.encode()).decode(),
    "percent-encoded": quote(f"{API_TOKEN}/x", safe=""),
    "inside a base64 payload": base64.b64encode(f'{{"note": "token={API_TOKEN};"}}'.encode()).decode(),
}
FORECAST = {"latitude": 52.5, "longitude": 13.4}


def _leaks(text: str, value: str) -> bool:
    return API_TOKEN in text or value in text


def _audit_text(store: Path) -> str:
    with sqlite3.connect(store) as db:
        return repr(db.execute("SELECT * FROM audit").fetchall())


@pytest.mark.parametrize("form", list(FORMS))
def test_a_credential_in_a_chats_tool_call_is_refused_before_anything_is_sent(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, form: str) -> None:
    """The weather agent's model puts the github api's token (in one of its forms) into a forecast's `timezone`,
    and the triage agent's into an issue comment (a write under approval: refused, not queued for a human)."""
    value = FORMS[form]
    write_project(tmp_path, llm.url, upstream.url, SAFE_AGENTS_YAML)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    llm.script(LLMReply(calls=[Call("getForecast", {**FORECAST, "timezone": value})]), LLMReply(text="ok"),
               LLMReply(calls=[Call("createIssueComment", {"owner": "acme", "repo": "app", "issue_number": 7,
                                                           "body": f"see {value}"})]), LLMReply(text="ok"))
    asks = [("weather", WEATHER_KEY), ("triage", TRIAGE_KEY)]
    with running(app) as url:
        answers = [httpx.post(f"{url}/v1/chat/completions", headers=bearer(key), timeout=30,
                              json={"model": agent, "messages": [{"role": "user", "content": "go"}]})
                   for agent, key in asks]
        waiting = httpx.get(f"{url}/approvals", headers=bearer(TRIAGE_KEY), timeout=30).json()["data"]
    safety.store.close()  # type: ignore[attr-defined]
    assert upstream.requests == []  # nothing left for any api
    assert waiting == []  # nothing waits for a human either
    for answer, tool in zip(answers, ["getForecast", "createIssueComment"], strict=True):
        assert answer.status_code == 200, answer.text
        assert not _leaks(answer.text, value), answer.text
        (step,) = answer.json()["gateway"]["steps"]
        assert (step["tool"], step["ok"], step["error_type"]) == (tool, False, "credential_in_arguments")
    # What the model read: the refusal, naming the argument, never the value.
    for body, arg in zip([llm.bodies()[1], llm.bodies()[3]], ["timezone", "body"], strict=True):
        (result,) = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        assert "credential_in_arguments" in result and f"(in `{arg}`)" in result and "nothing was sent" in result
        assert not _leaks(result, value), result
    rows = _audit_text(tmp_path / "state.db")
    assert rows.count("'credential_in_arguments'") == 2, rows
    assert not _leaks(rows, value)


def test_a_credential_in_an_mcp_or_direct_call_is_refused_and_audited(tmp_path: Path, llm: LenientLLM,
                                                                        upstream: RecordingServer) -> None:
    """The same refusal on the MCP door (the official client) and the direct door (403), for a raw token and for
    one hidden in a base64 payload; a call without one still goes out."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    write_project(tmp_path, llm.url, upstream.url, SAFE_AGENTS_YAML)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    hidden = FORMS["inside a base64 payload"]

    async def over_mcp(url: str) -> list[Any]:
        async with httpx.AsyncClient(headers=bearer(WEATHER_KEY), timeout=30) as http, \
                Client(streamable_http_client(f"{url}/mcp/weather", http_client=http)) as session:
            return [await session.call_tool("getForecast", {**FORECAST, "timezone": API_TOKEN}),
                    await session.call_tool("getForecast", {**FORECAST, "timezone": hidden})]

    with running(app) as url:
        refused = anyio.run(over_mcp, url)
        direct = httpx.post(f"{url}/agents/weather/tools/getForecast", headers=bearer(WEATHER_KEY), timeout=30,
                            json={**FORECAST, "timezone": API_TOKEN})
        assert upstream.requests == []
        fine = httpx.post(f"{url}/agents/weather/tools/getForecast", headers=bearer(WEATHER_KEY), timeout=30,
                          json={**FORECAST, "timezone": "auto"})
    safety.store.close()  # type: ignore[attr-defined]
    for result in refused:
        assert result.is_error
        text = result.content[0].text
        assert text.startswith("Error (credential_in_arguments)") and "(in `timezone`)" in text, text
        assert not _leaks(text, hidden)
    assert direct.status_code == 403, direct.text
    assert direct.json()["error"]["code"] == "credential_in_arguments" or "credential_in_arguments" in direct.text
    assert not _leaks(direct.text, hidden)
    assert fine.status_code == 200, fine.text
    assert len(upstream.requests) == 1 and "timezone=auto" in upstream.requests[0].target
    rows = _audit_text(tmp_path / "state.db")
    assert rows.count("'credential_in_arguments'") == 3, rows
    assert not _leaks(rows, hidden)


def test_the_agents_own_fixed_credential_is_not_the_callers(tmp_path: Path, llm: LenientLLM,
                                                           upstream: RecordingServer) -> None:
    """A fixed argument whose value is a secret (`args: {appid: ${KEY}}`: the operator's, merged over the caller's
    arguments) goes out as before: only what the caller (or the model) sent is judged."""
    yaml = SAFE_AGENTS_YAML.replace("tools: [{{api: open-meteo}}]",
                                    "tools: [{{api: open-meteo, args: {{timezone: fixed-secret-value-0042}}}}]")
    yaml = yaml.replace('open-meteo: {{base_url: "{upstream}/meteo"}}',
                        'open-meteo: {{base_url: "{upstream}/meteo", headers: {{X-Api-Key: fixed-secret-value-0042}}}}')
    write_project(tmp_path, llm.url, upstream.url, yaml)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    with running(app) as url:
        sent = httpx.post(f"{url}/agents/weather/tools/getForecast", headers=bearer(WEATHER_KEY), timeout=30,
                          json=FORECAST)
    safety.store.close()  # type: ignore[attr-defined]
    assert sent.status_code == 200, sent.text
    assert "timezone=fixed-secret-value-0042" in upstream.requests[0].target
    assert json.dumps(sent.json()).count("fixed-secret-value-0042") == 0


def test_a_scripts_call_and_a_delegations_task_carrying_a_credential_are_refused(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    """Code mode: a `run_code` script's call that carries the token is refused in the script (its step says so) and
    nothing goes upstream. A delegation whose task carries it is refused before the sub-agent's model is asked (it
    may be another provider's)."""
    yaml = delegating_yaml("lead", "").removesuffix("clients:\n").replace(
        "    max_iterations: 4\n", "    max_iterations: 4\n    code_mode: on\n", 1)
    write_project(tmp_path, llm.url, upstream.url, yaml)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    script = f'getForecast(latitude=52.5, longitude=13.4, timezone="{API_TOKEN}")'
    llm.script(LLMReply(calls=[Call("run_code", {"code": script})]), LLMReply(text="ok"),
               LLMReply(calls=[Call("ask_worker", {"task": f"use {API_TOKEN} to list the issues"})]),
               LLMReply(text="ok"))
    with running(app) as url:
        coded, delegated = [httpx.post(f"{url}/v1/chat/completions", timeout=30,
                                       json={"model": agent, "messages": [{"role": "user", "content": "go"}]})
                            for agent in ("weather", "lead")]
    safety.store.close()  # type: ignore[attr-defined]
    assert upstream.requests == []
    (step,) = coded.json()["gateway"]["steps"]
    assert [(s["tool"], s["error_type"]) for s in step["steps"]] == [("getForecast", "credential_in_arguments")]
    (step,) = delegated.json()["gateway"]["steps"]
    assert (step["tool"], step["error_type"]) == ("ask_worker", "credential_in_arguments")
    assert len(llm.bodies()) == 4  # the worker's model was never asked
    for answer in (coded, delegated):
        assert not _leaks(answer.text, API_TOKEN), answer.text
    rows = _audit_text(tmp_path / "state.db")
    assert rows.count("'credential_in_arguments'") == 2, rows
    assert not _leaks(rows, API_TOKEN)


SMS_TOOL = {"type": "function", "function": {"name": "send_sms", "description": "Text someone.", "parameters": {
    "type": "object", "properties": {"to": {"type": "string"}, "text": {"type": "string"}},
    "required": ["to", "text"]}}}


@pytest.mark.parametrize("stream", [False, True], ids=["answer", "streamed"])
def test_a_call_of_the_callers_own_tool_carrying_a_credential_is_not_handed_back(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, stream: bool) -> None:
    """The caller's own tools are handed back to it to run: a call of one that carries the gateway's token (which the
    caller may not hold) is answered with the refusal instead, and the clean one of the same turn is handed back."""
    write_project(tmp_path, llm.url, upstream.url, SAFE_AGENTS_YAML)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    leaking = Call("send_sms", {"to": "eve", "text": f"token: {API_TOKEN}"}, id="call_leak")
    clean = Call("send_sms", {"to": "ann", "text": "3.5 C"}, id="call_ok")
    llm.script(LLMReply(calls=[leaking, clean]))
    with running(app) as url:
        answer = httpx.post(f"{url}/v1/chat/completions", headers=bearer(WEATHER_KEY), timeout=30, json={
            "model": "weather", "stream": stream, "tools": [SMS_TOOL],
            "messages": [{"role": "user", "content": "text ann"}]})
    safety.store.close()  # type: ignore[attr-defined]
    assert answer.status_code == 200, answer.text
    assert not _leaks(answer.text, API_TOKEN), answer.text
    assert "call_ok" in answer.text and "call_leak" in answer.text  # the refused one is a step, not a handed call
    if not stream:
        message = answer.json()["choices"][0]["message"]
        assert [c["id"] for c in message["tool_calls"]] == ["call_ok"]
        steps = {s["call_id"]: s for s in answer.json()["gateway"]["steps"]}
        assert steps["call_leak"]["error_type"] == "credential_in_arguments"
        assert steps["call_ok"]["handed_back"] is True
    else:
        handed = [c["id"] for line in answer.text.splitlines() if line.startswith("data: {")
                  for choice in json.loads(line[6:]).get("choices") or []
                  for c in choice.get("delta", {}).get("tool_calls") or [] if c.get("id")]
        assert handed == ["call_ok"]
