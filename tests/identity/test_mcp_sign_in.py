"""The official MCP client signs its user in on its own: a 401 names the protected-resource metadata, the SDK's OAuth
provider finds the issuer there, registers itself (RFC 7591), sends the user through the provider's login with PKCE
and a resource indicator, and calls the agent's tools with the token; the api receives that user's own token."""

from __future__ import annotations

import pytest
from identity_support import REPOS, Setup, bearer_of, claims_of
from mcp_sign_in_support import signed_in_mcp

pytestmark = pytest.mark.anyio


async def test_the_mcp_client_signs_in_and_calls_as_its_user(setup: Setup) -> None:
    async with signed_in_mcp(setup, "alice", "coder") as (client, storage):
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names == ["getRepo", "createIssue"]
        result = await client.call_tool("getRepo", {"name": "app"})
        assert result.is_error is False, result.content
    assert storage.tokens is not None and storage.client is not None  # signed in, registered
    sent = bearer_of(setup.upstream.requests[0])
    assert sent != storage.tokens.access_token
    assert claims_of(sent, setup.provider, REPOS)["sub"] == "alice"
