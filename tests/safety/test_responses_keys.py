"""Stored responses belong to the key that made them (SQLite store); caller tools are steps, not audit rows."""

from __future__ import annotations

from pathlib import Path

import httpx
import jsonschema
import openai
import pytest
from openai.types.responses import Response
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


@pytest.mark.parametrize("stream", [False, True])
def test_a_write_under_approval_pauses_a_response_and_the_approval_finishes_it_as_a_response(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, stream: bool) -> None:
    """Approving answers the Response (not a chat completion), the stored one loses its waiting text, and
    `previous_response_id` goes on from the approved call and its result."""
    comment = Call("createIssueComment", {"owner": "acme", "repo": "app", "issue_number": 7, "body": "On it."},
                   id="call_comment")
    with safe_gateway(tmp_path, llm.url, upstream.url) as (url, _):
        client = _client(url, TRIAGE_KEY)
        llm.script(Reply(text="I will comment.", calls=[comment]), Reply(text="Commented."))
        if stream:
            with client.responses.stream(model="triage", input="Answer #7") as events:
                response = events.get_final_response()
        else:
            response = client.responses.create(model="triage", input="Answer #7")
        [pending] = response.model_extra["gateway"]["pending_approvals"]
        assert pending["tool"] == "createIssueComment"
        if not stream:  # a stream says it in its events (`gateway.pending_approvals`), its text is the model's
            assert "Waiting for a human's approval" in response.output_text
        assert not [r for r in upstream.requests if r.method == "POST"]
        with pytest.raises(openai.ConflictError):  # its call has no result yet: the decision finishes it first
            client.responses.create(model="triage", input="And?", previous_response_id=response.id)

        decided = httpx.post(f"{url}/approvals/{pending['id']}", json={"decision": "approve"},
                             headers=bearer(TRIAGE_KEY))
        assert decided.status_code == 200, decided.text
        body = decided.json()
        finished = Response.model_validate(body)  # the SDK's own model of a Response
        assert finished.id == response.id and finished.object == "response" and finished.status == "completed"
        assert finished.output_text == "I will comment.Commented."
        assert "Waiting" not in finished.output_text
        assert body["gateway"]["approval"]["id"] == pending["id"]
        document = httpx.get(f"{url}/openapi.json").json()  # the answer is one the gateway's document lists
        listed = document["paths"]["/approvals/{id}"]["post"]["responses"]["200"]["content"]["application/json"]
        jsonschema.validate(body, {**listed["schema"], "components": document["components"]})
        assert [(s["tool"], s["status"]) for s in body["gateway"]["steps"]] == [("createIssueComment", 201)]
        assert [r.path for r in upstream.requests if r.method == "POST"] == ["/github/repos/acme/app/issues/7/comments"]

        stored = client.responses.retrieve(response.id)
        assert stored.output_text == finished.output_text
        assert [item.id for item in stored.output] == [item["id"] for item in body["output"]]

        llm.script(Reply(text="Yes, I commented on #7."))
        following = client.responses.create(model="triage", input="Did you?", previous_response_id=response.id)
        assert following.output_text == "Yes, I commented on #7."
        sent = llm.bodies()[-1]["messages"]  # triage runs on Ollama: a tool result names its tool
        assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
        assert sent[1]["tool_calls"][0]["function"]["name"] == "createIssueComment"
        assert sent[2]["tool_name"] == "createIssueComment" and '"id": 99' in sent[2]["content"]  # with its result
        assert sent[3]["content"] == "Commented."
        assert not any("Waiting" in (m.get("content") or "") for m in sent)


def test_a_response_not_stored_is_still_answered_as_a_response_after_its_approval(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    comment = Call("createIssueComment", {"owner": "acme", "repo": "app", "issue_number": 7, "body": "On it."})
    with safe_gateway(tmp_path, llm.url, upstream.url) as (url, _):
        client = _client(url, TRIAGE_KEY)
        llm.script(Reply(calls=[comment]), Reply(text="Commented."))
        response = client.responses.create(model="triage", input="Answer #7", store=False)
        [pending] = response.model_extra["gateway"]["pending_approvals"]
        decided = httpx.post(f"{url}/approvals/{pending['id']}", json={"decision": "approve"},
                             headers=bearer(TRIAGE_KEY))
        finished = Response.model_validate(decided.json())
        assert finished.id == response.id and finished.output_text == "Commented." and finished.store is False
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(response.id)


def test_past_its_cap_a_clients_oldest_stored_response_goes_and_the_removal_is_audited(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    """redteam44's left item: stored Responses had no bound per client but the month of retention. With
    `max_stored_conversations_per_client: 2`, Ann's third stored answer removes her first (continuing from it is a
    404 that says why), not Bob's, and the removal is an audit row Ann can read."""
    capped = TWO_KEYS_YAML + "gateway:\n  max_stored_conversations_per_client: 2\n"
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=capped) as (url, _):
        ann, bob = _client(url, "ann-key"), _client(url, "bob-key")
        llm.script(*(Reply(text=f"answer {n}") for n in range(5)))
        kept_by_bob = bob.responses.create(model="weather", input="hi")
        first, second, third = (ann.responses.create(model="weather", input=f"hi {n}") for n in range(3))
        assert ann.responses.create(model="weather", input="and?", previous_response_id=third.id).output_text \
            == "answer 4"  # the fourth answer removed the second in turn
        with pytest.raises(openai.NotFoundError) as gone:
            ann.responses.retrieve(first.id)
        assert "max_stored_conversations_per_client" in gone.value.message
        with pytest.raises(openai.NotFoundError):
            ann.responses.create(model="weather", input="and?", previous_response_id=second.id)
        assert ann.responses.retrieve(third.id).output_text == "answer 3"
        assert bob.responses.retrieve(kept_by_bob.id).output_text == "answer 0"  # another client's room is its own
        rows = httpx.get(f"{url}/audit", params={"kind": "conversation"}, headers=bearer("ann-key")).json()["data"]
        assert [(r["client"], r["status"], r["arguments"]["removed"]) for r in reversed(rows)] == [
            ("ann", "evicted", [first.id]), ("ann", "evicted", [second.id])]
        assert all("max_stored_conversations_per_client (2)" in r["error"] for r in rows)
