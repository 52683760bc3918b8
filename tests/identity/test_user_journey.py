"""The issue's "done when", as one user lives it: alice signs in at the real provider; her MCP client (the official
one, signing her in by itself) and her OpenAI-SDK script reach exactly her client's agents; the api receives a
token the provider issued to alice for that api; the audit names her for every call."""

from __future__ import annotations

import httpx
import httpx2
import openai
import pytest
from identity_support import REPOS, Setup, bearer_of, claims_of
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_sign_in_support import signed_in_mcp
from scripted_llm import Call, Reply

pytestmark = pytest.mark.anyio

ALICES_AGENTS = ["coder", "planner", "careful"]
"""Her client's (`engineers`, by her `groups` claim); `seller` is the sales client's."""


async def test_alice_reaches_exactly_her_agents_and_acts_as_herself_upstream(setup: Setup) -> None:
    # Her MCP client signs her in at the provider and calls a tool of her agent.
    async with signed_in_mcp(setup, "alice", "coder") as (client, storage):
        assert (await client.call_tool("getRepo", {"name": "app"})).is_error is False
    assert storage.tokens is not None
    mcp_token = storage.tokens.access_token
    # Another client's agent refuses her, on MCP as on every door: the session is never opened.
    statuses: list[int] = []

    async def seen(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {mcp_token}"}, timeout=30,
                                  event_hooks={"response": [seen]}) as http:
        with pytest.raises(ExceptionGroup):  # the SDK's task group carries the refused initialize
            async with Client(streamable_http_client(f"{setup.url}/mcp/seller", http_client=http)) as other:
                await other.list_tools()
    assert statuses and set(statuses) == {403}  # its initialize (and whatever the SDK sends after)
    assert len(setup.upstream.requests) == 1

    # Her script, with the access token she got signing in at the provider's login form.
    # Closed before the test's loop ends: a client left to the garbage collector schedules its own closing on
    # whichever loop runs then (a later test's), where its connections' loop is gone.
    async with openai.AsyncOpenAI(base_url=setup.url + "/v1", api_key=setup.token("alice")) as script:
        assert [model.id async for model in script.models.list()] == ALICES_AGENTS
        with pytest.raises(openai.PermissionDeniedError):
            await script.chat.completions.create(model="seller", messages=[{"role": "user", "content": "hi"}])
        setup.llm.script(Reply(calls=[Call("createIssue", {"name": "app", "title": "crash"})]), Reply(text="Filed."))
        answer = await script.chat.completions.create(model="coder",
                                                      messages=[{"role": "user", "content": "file it"}])
    assert answer.choices[0].message.content == "Filed."

    # Each call reached the api with a token issued to alice for the api (never one of her own tokens), scoped to
    # what the operation's `security` asks.
    assert len(setup.upstream.requests) == 2
    sent = [bearer_of(request) for request in setup.upstream.requests]
    assert mcp_token not in sent
    claims = [claims_of(token, setup.provider, REPOS) for token in sent]
    assert [(c["sub"], c["aud"], c["scope"]) for c in claims] == [("alice", REPOS, "repo:read"),
                                                                  ("alice", REPOS, "repo:write")]

    # The audit (read by an admin's key) names her client and her for each call and the chat.
    audit = httpx.get(setup.url + "/audit", headers={"Authorization": "Bearer ops-key"}, timeout=10).json()["data"]
    calls = sorted((row["tool"], row["client"], row["subject"], row["agent"]) for row in audit if row["kind"] == "tool")
    assert calls == [("createIssue", "engineers", "alice", "coder"), ("getRepo", "engineers", "alice", "coder")]
    assert [row["subject"] for row in audit if row["kind"] == "chat"] == ["alice"]
