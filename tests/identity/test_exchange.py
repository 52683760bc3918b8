"""Per-user upstream credentials by RFC 8693 token exchange: each call goes out with a token the provider issued to
that user for that api, never with the caller's own token."""

from __future__ import annotations

import json
import logging
import time

import httpx
import openai
import pytest
from identity_support import EXCHANGER, REPOS, Setup, bearer_of, claims_of
from scripted_llm import Call, Reply


def _call(setup: Setup, tool: str, arguments: dict[str, object], token: str, agent: str = "coder") -> httpx.Response:
    return httpx.post(f"{setup.url}/agents/{agent}/tools/{tool}", json=arguments,
                      headers={"Authorization": f"Bearer {token}"}, timeout=20)


def test_two_users_calling_one_tool_each_send_their_own_exchanged_token(setup: Setup) -> None:
    alice, bob = setup.token("alice"), setup.token("bob")
    assert _call(setup, "getRepo", {"name": "app"}, alice).status_code == 200
    assert _call(setup, "getRepo", {"name": "app"}, bob, agent="seller").status_code == 200
    first, second = setup.upstream.requests
    sent = [bearer_of(first), bearer_of(second)]
    assert alice not in sent and bob not in sent  # the callers' own tokens never go upstream
    claims = [claims_of(token, setup.provider, REPOS) for token in sent]
    assert [c["sub"] for c in claims] == ["alice", "bob"]
    assert all(c["aud"] == REPOS and c["client_id"] == EXCHANGER[0] for c in claims)
    assert claims[0]["scope"] == "repo:read"  # what the operation's `security` asks for


def test_an_exchanged_token_is_reused_until_it_expires(setup: Setup) -> None:
    alice = setup.token("alice")
    for _ in range(2):
        assert _call(setup, "getRepo", {"name": "app"}, alice).status_code == 200
    first, second = (bearer_of(r) for r in setup.upstream.requests)
    assert first == second
    time.sleep(2.5)  # the exchanger's tokens live four seconds: reused for two, then exchanged anew
    assert _call(setup, "getRepo", {"name": "app"}, alice).status_code == 200
    third = bearer_of(setup.upstream.requests[-1])
    assert third != first and claims_of(third, setup.provider, REPOS)["sub"] == "alice"


def test_a_scope_the_user_lacks_is_403_insufficient_scope_and_nothing_is_sent(setup: Setup) -> None:
    answer = _call(setup, "createIssue", {"name": "app", "title": "x"}, setup.token("bob"), agent="seller")
    assert answer.status_code == 403, answer.text
    error = answer.json()["error"]
    assert error["code"] == "insufficient_scope" and "repo:write" in error["message"]
    assert setup.upstream.requests == []
    # the same call for a user who has the scope goes through, with a write-scoped token
    done = _call(setup, "createIssue", {"name": "app", "title": "x"}, setup.token("alice"))
    assert done.status_code == 200 and done.json()["status"] == 201
    assert claims_of(bearer_of(setup.upstream.requests[0]), setup.provider, REPOS)["scope"] == "repo:write"


def test_a_client_key_cannot_call_an_api_that_acts_as_the_user(setup: Setup) -> None:
    answer = _call(setup, "getRepo", {"name": "app"}, "ops-key")
    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == "user_required"
    assert setup.upstream.requests == []


def test_the_provider_down_is_503_and_nothing_is_sent(setup: Setup) -> None:
    alice = setup.token("alice")
    assert _call(setup, "getRepo", {"name": "app"}, alice).status_code == 200  # keys cached, one token exchanged
    setup.provider.stop()
    answer = _call(setup, "createIssue", {"name": "app", "title": "x"}, alice)  # another scope: a new exchange
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "auth_unavailable"
    assert len(setup.upstream.requests) == 1


def test_in_the_loop_a_missing_scope_is_a_tool_error_naming_it(setup: Setup) -> None:
    setup.llm.script(Reply(calls=[Call("createIssue", {"name": "app", "title": "x"})]), Reply(text="I cannot."))
    client = openai.OpenAI(base_url=setup.url + "/v1", api_key=setup.token("bob"))
    answer = client.chat.completions.create(model="seller", messages=[{"role": "user", "content": "file it"}])
    assert answer.choices[0].message.content == "I cannot."
    tool_message = setup.llm.bodies()[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "repo:write" in tool_message["content"]
    assert setup.upstream.requests == []


def test_the_openai_sdk_with_a_bearer_token_acts_as_its_user(setup: Setup,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    alice = setup.token("alice")
    setup.llm.script(Reply(calls=[Call("getRepo", {"name": "app"})]), Reply(text="app exists."))
    client = openai.OpenAI(base_url=setup.url + "/v1", api_key=alice)
    answer = client.chat.completions.create(model="coder", messages=[{"role": "user", "content": "app?"}])
    assert answer.choices[0].message.content == "app exists."
    sent = bearer_of(setup.upstream.requests[0])
    assert claims_of(sent, setup.provider, REPOS)["sub"] == "alice"
    audit = httpx.get(setup.url + "/audit", headers={"Authorization": "Bearer ops-key"}, timeout=10).json()["data"]
    tool_rows = [row for row in audit if row["kind"] == "tool"]
    assert [(row["client"], row["subject"], row["tool"]) for row in tool_rows] == [("engineers", "alice", "getRepo")]
    chat_rows = [row for row in audit if row["kind"] == "chat"]
    assert chat_rows and chat_rows[0]["subject"] == "alice"
    # neither the caller's token nor the exchanged one shows in the audit, the model's context or a log line
    seen = json.dumps(audit) + json.dumps(setup.llm.bodies()) + "\n".join(r.getMessage() for r in caplog.records)
    assert alice not in seen and sent not in seen
