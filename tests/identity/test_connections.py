"""Each user's own connection to an api (`auth: {type: user_oauth}`): a call without one is a tool error with the
link; the user signs in at the api's provider (authorization code with PKCE), comes back to the gateway's callback,
and from then on the api receives that user's own token, refreshed when it expires, stored encrypted."""

from __future__ import annotations

import re
import time
from typing import Any

import anyio
import httpx
import httpx2
import openai
import pytest
from identity_support import TRACKER, Setup, bearer_of, claims_of, connect_account, follow_link
from mcp import Client, MCPError, UrlElicitationRequiredError
from mcp.client.streamable_http import streamable_http_client
from mcp_types import URL_ELICITATION_REQUIRED
from scripted_llm import Call, Reply


def _list(setup: Setup, token: str) -> httpx.Response:
    return httpx.post(f"{setup.url}/agents/planner/tools/listTickets", json={},
                      headers={"Authorization": f"Bearer {token}"}, timeout=20)


def _connect(setup: Setup, user: str, link: str) -> httpx.Response:
    return connect_account(setup.provider, setup.url, user, link)


def test_a_user_connects_once_and_the_api_gets_their_own_token_refreshed(setup: Setup) -> None:
    alice = setup.token("alice")
    refused = _list(setup, alice)
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "not_connected"
    link = error["message"].split("open ", 1)[1].split(" ", 1)[0]
    assert setup.upstream.requests == []

    page = _connect(setup, "alice", link)
    assert page.status_code == 200 and "connected to tracker" in page.text
    assert _connect(setup, "alice", link).status_code == 400  # a link works once

    assert _list(setup, alice).status_code == 200
    first = bearer_of(setup.upstream.requests[0])
    assert claims_of(first, setup.provider, TRACKER)["sub"] == "alice" and first != alice

    listed = httpx.get(f"{setup.url}/connections", headers={"Authorization": f"Bearer {alice}"}, timeout=10).json()
    assert [c["api"] for c in listed["data"]] == ["tracker"]
    assert listed["data"][0]["scopes"] == ["tickets"]

    time.sleep(2.5)  # the tracker's tokens live four seconds: renewed at half-life with the refresh token
    assert _list(setup, alice).status_code == 200
    second = bearer_of(setup.upstream.requests[1])
    assert second != first and claims_of(second, setup.provider, TRACKER)["sub"] == "alice"


def test_connections_are_each_users_own_and_stored_encrypted(setup: Setup) -> None:
    alice, bob = setup.token("alice"), setup.token("bob")
    link = _list(setup, alice).json()["error"]["message"].split("open ", 1)[1].split(" ", 1)[0]
    assert _connect(setup, "alice", link).status_code == 200
    assert _list(setup, alice).status_code == 200
    sent = bearer_of(setup.upstream.requests[0])
    assert _list(setup, bob).json()["error"]["code"] == "not_connected"  # bob has connected nothing
    assert len(setup.upstream.requests) == 1

    async def stored() -> str:
        record = await setup.safety.store.get_connection("alice", "tracker")
        assert record is not None
        return str(record.secret)

    secret = anyio.run(stored)
    assert sent not in secret and "refresh" not in secret

    answer = httpx.delete(f"{setup.url}/connections/tracker", headers={"Authorization": f"Bearer {alice}"},
                          timeout=10)
    assert answer.status_code == 204
    assert _list(setup, alice).json()["error"]["code"] == "not_connected"


def test_a_client_key_has_no_connections(setup: Setup) -> None:
    answer = httpx.get(f"{setup.url}/connections", headers={"Authorization": "Bearer ops-key"}, timeout=10)
    assert answer.status_code == 403
    assert _list(setup, "ops-key").json()["error"]["code"] == "user_required"


def test_in_the_loop_the_model_is_told_the_connect_link(setup: Setup) -> None:
    setup.llm.script(Reply(calls=[Call("listTickets", {})]), Reply(text="Please connect your tracker account."))
    client = openai.OpenAI(base_url=setup.url + "/v1", api_key=setup.token("alice"))
    answer = client.chat.completions.create(model="planner", messages=[{"role": "user", "content": "my tickets?"}])
    assert answer.choices[0].message.content == "Please connect your tracker account."
    tool_message = setup.llm.bodies()[1]["messages"][-1]
    assert tool_message["role"] == "tool" and f"{setup.url}/console/connect?state=" in tool_message["content"]
    assert setup.provider.issuer not in tool_message["content"]  # the gateway's start page, not the provider's
    assert setup.upstream.requests == []


def test_an_approved_call_runs_as_the_user_who_asked_not_the_approver(setup: Setup) -> None:
    alice = setup.token("alice")
    link = _list(setup, alice).json()["error"]["message"].split("open ", 1)[1].split(" ", 1)[0]
    assert _connect(setup, "alice", link).status_code == 200
    ops = {"Authorization": "Bearer ops-key"}

    def held(tool: str, arguments: dict[str, object]) -> str:
        answer = httpx.post(f"{setup.url}/agents/careful/tools/{tool}", json=arguments,
                            headers={"Authorization": f"Bearer {alice}"}, timeout=20)
        assert answer.status_code == 202, answer.text
        return str(answer.json()["approval_id"])

    def approve(approval: str) -> dict[str, Any]:
        """ops decides; the answer is alice's (the run's owner), read by her."""
        decided = httpx.post(f"{setup.url}/approvals/{approval}", json={"decision": "approve"}, headers=ops,
                             timeout=20)
        assert decided.status_code == 200 and decided.json()["status"] == "resumed", decided.text
        shown = httpx.get(f"{setup.url}/approvals/{approval}", headers={"Authorization": f"Bearer {alice}"},
                          timeout=20)
        assert shown.status_code == 200, shown.text
        answer: dict[str, Any] = shown.json()["answer"]
        return answer

    # her own connection serves the resumed call: the api gets alice's token though ops approved
    first = held("listTickets", {})
    assert approve(first)["result"]["ok"] is True
    # the approval and its answer are hers, not her client's: erin (a user of the same client, engineers) is told
    # of neither (her client's static key, an approver or an admin would see the approval)
    seen_by_erin = httpx.get(f"{setup.url}/approvals/{first}",
                             headers={"Authorization": f"Bearer {setup.token('erin')}"}, timeout=20)
    assert seen_by_erin.status_code == 404, seen_by_erin.text
    assert claims_of(bearer_of(setup.upstream.requests[0]), setup.provider, TRACKER)["sub"] == "alice"
    # an exchange needs her token, which the approver does not have: refused, not sent as ops
    refused = approve(held("createIssue", {"name": "app", "title": "x"}))
    assert refused["result"]["error_type"] == "user_required", refused
    assert len(setup.upstream.requests) == 1


async def _mcp_list_tickets(setup: Setup, token: str, *, elicitation: bool) -> Any:
    async def accept(context: Any, params: Any) -> Any:  # pragma: no cover - the gateway asks by error, not request
        raise AssertionError("no elicitation request expected")

    options = {"elicitation_callback": accept} if elicitation else {}
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        async with Client(streamable_http_client(f"{setup.url}/mcp/planner", http_client=http), **options) as client:
            try:
                return await client.call_tool("listTickets", {})
            except MCPError as error:  # the answer to the call, not a failure of the test
                return error


@pytest.mark.anyio
async def test_an_mcp_client_without_url_elicitation_gets_the_link_as_a_tool_error(setup: Setup) -> None:
    result = await _mcp_list_tickets(setup, setup.token("alice"), elicitation=False)
    assert result.is_error is True
    assert "not_connected" in result.content[0].text and f"{setup.url}/console/connect?state=" in result.content[0].text
    assert setup.upstream.requests == []


@pytest.mark.anyio
async def test_an_mcp_client_with_url_elicitation_is_sent_to_connect_and_retries(setup: Setup) -> None:
    alice = setup.token("alice")
    error = await _mcp_list_tickets(setup, alice, elicitation=True)
    assert isinstance(error, MCPError) and error.code == URL_ELICITATION_REQUIRED
    (elicitation,) = UrlElicitationRequiredError.from_error(error.error).elicitations
    assert setup.upstream.requests == []
    assert elicitation.url.startswith(f"{setup.url}/console/connect?state=")  # possessing it proves nothing
    page = await anyio.to_thread.run_sync(lambda: _connect(setup, "alice", elicitation.url))
    assert page.status_code == 200
    result = await _mcp_list_tickets(setup, alice, elicitation=True)
    assert result.is_error is False
    assert claims_of(bearer_of(setup.upstream.requests[0]), setup.provider, TRACKER)["sub"] == "alice"


def test_the_console_signs_a_user_in_with_their_token_and_lists_their_connections(setup: Setup) -> None:
    with httpx.Client(base_url=setup.url, timeout=20) as browser:
        signed = browser.post("/console/signin", json={"key": setup.token("alice")})
        assert signed.status_code == 200, signed.text
        page = browser.get("/console/connections")
        assert page.status_code == 200
        assert "No account is connected yet." in page.text and "Connect tracker" in page.text
        csrf = re.search(r'name="csrf-token" content="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
        started = browser.post("/console/connections/tracker/connect", json={}, headers={"X-CSRF-Token": csrf})
        assert started.status_code == 200, started.text
        assert started.json()["next"].startswith(f"{setup.url}/console/connect?state=")
        assert follow_link(setup.provider, browser, "alice", started.json()["next"]).status_code == 200
        page = browser.get("/console/connections")
        assert 'data-api="tracker"' in page.text and "tickets" in page.text and "alice" in page.text
        assert browser.post("/console/connections/tracker/disconnect", json={}).status_code == 403  # no CSRF token

    with httpx.Client(base_url=setup.url, timeout=20) as browser:
        assert browser.post("/console/signin", json={"key": "ops-key"}).status_code == 200
        assert browser.get("/console/connections").status_code == 403  # a key has no connections


def test_a_chat_held_twice_resumes_as_its_user_both_times(setup: Setup) -> None:
    # The second pause is kept inside the approver's request: kept as the approver's (ops, a static key: no user),
    # the second approved call ran with no user and alice's own connection did not serve it.
    alice = setup.token("alice")
    link = _list(setup, alice).json()["error"]["message"].split("open ", 1)[1].split(" ", 1)[0]
    assert _connect(setup, "alice", link).status_code == 200
    setup.llm.script(Reply(calls=[Call("listTickets", {})]), Reply(calls=[Call("listTickets", {})]),
                     Reply(text="Two lists."))
    chat = httpx.post(f"{setup.url}/v1/chat/completions", headers={"Authorization": f"Bearer {alice}"}, timeout=30,
                      json={"model": "careful", "messages": [{"role": "user", "content": "my tickets, twice"}]})
    ops = {"Authorization": "Bearer ops-key"}
    for _ in range(2):
        (pending,) = chat.json()["gateway"]["pending_approvals"]
        chat = httpx.post(f"{setup.url}/approvals/{pending['id']}", json={"decision": "approve"}, headers=ops,
                          timeout=30)
        assert chat.status_code == 200, chat.text
        assert chat.json()["status"] == "resumed"  # ops is not the run's owner: alice reads the answer
        shown = httpx.get(f"{setup.url}/approvals/{pending['id']}", headers={"Authorization": f"Bearer {alice}"},
                          timeout=30).json()
        assert shown.get("answer") is not None, shown  # the answer is alice's, the second time too
        chat = httpx.Response(200, json=shown["answer"])
    sent = [claims_of(bearer_of(r), setup.provider, TRACKER)["sub"] for r in setup.upstream.requests]
    assert sent == ["alice", "alice"]
    assert chat.json()["choices"][0]["message"]["content"] == "Two lists."
