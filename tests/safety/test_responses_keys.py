"""Stored responses belong to the key that made them (SQLite store); caller tools are steps, not audit rows."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import AGENTS_YAML, LenientLLM

from .safety_support import TRIAGE_KEY, bearer, safe_gateway

TWO_KEYS_YAML = AGENTS_YAML + """\
clients:
  ann: {{key: ann-key, agents: [weather]}}
  bob: {{key: bob-key, agents: [weather]}}
"""
SMS_TOOL = {"type": "function", "name": "send_sms", "parameters": {"type": "object", "properties": {}}}
FORECAST_CALL = Call("getForecast", {"latitude": 52.52, "longitude": 13.41, "current": ["temperature_2m"]})


def _client(url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)


def test_previous_response_id_of_another_key_is_404_and_of_the_same_key_goes_on(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=TWO_KEYS_YAML) as (url, _):
        ann, bob = _client(url, "ann-key"), _client(url, "bob-key")
        llm.script(Reply(text="Hello Ann."), Reply(text="You said hi."))
        first = ann.responses.create(model="weather", input="hi")
        with pytest.raises(openai.NotFoundError):
            bob.responses.create(model="weather", input="what did I say?", previous_response_id=first.id)
        with pytest.raises(openai.NotFoundError):
            bob.responses.retrieve(first.id)
        assert len(llm.requests) == 1
        second = ann.responses.create(model="weather", input="what did I say?", previous_response_id=first.id)
        assert second.output_text == "You said hi."
        assert [(m["role"], m["content"]) for m in llm.bodies()[1]["messages"][1:]] == [
            ("user", "hi"), ("assistant", "Hello Ann."), ("user", "what did I say?")]
        assert ann.responses.retrieve(first.id).output_text == "Hello Ann."


def test_a_callers_tool_is_a_step_and_not_an_audited_upstream_call(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=TWO_KEYS_YAML) as (url, _):
        llm.script(Reply(calls=[FORECAST_CALL, Call("send_sms", {}, id="call_1")]))
        response = _client(url, "ann-key").responses.create(model="weather", input="hi", tools=[SMS_TOOL])
        steps = response.model_extra["gateway"]["steps"]
        assert [(s["tool"], s.get("handed_back", False)) for s in steps] == [("getForecast", False),
                                                                              ("send_sms", True)]
        rows = httpx.get(f"{url}/audit", headers=bearer("ann-key")).json()["data"]
        assert [r["tool"] for r in rows if r["kind"] == "tool"] == ["getForecast"]
        assert [r["client"] for r in rows if r["kind"] == "chat"] == ["ann"]


def test_a_write_under_approval_pauses_a_response_and_the_approval_resumes_it(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    comment = Call("createIssueComment", {"owner": "acme", "repo": "app", "issue_number": 7, "body": "On it."})
    with safe_gateway(tmp_path, llm.url, upstream.url) as (url, _):
        llm.script(Reply(calls=[comment]), Reply(text="Commented."))
        response = _client(url, TRIAGE_KEY).responses.create(model="triage", input="Answer #7")
        [pending] = response.model_extra["gateway"]["pending_approvals"]
        assert pending["tool"] == "createIssueComment"
        assert "Waiting for a human's approval" in response.output_text
        assert not [r for r in upstream.requests if r.method == "POST"]
        decided = httpx.post(f"{url}/approvals/{pending['id']}", json={"decision": "approve"},
                             headers=bearer(TRIAGE_KEY))
        assert decided.status_code == 200, decided.text
        assert decided.json()["choices"][0]["message"]["content"] == "Commented."
        assert [r.path for r in upstream.requests if r.method == "POST"] == ["/github/repos/acme/app/issues/7/comments"]
