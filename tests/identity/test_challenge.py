"""The 401's `WWW-Authenticate` names the protected-resource metadata of the path asked for (per MCP agent): that
path is the requester's text, and must stay inside the URL it is part of (redteam45)."""

from __future__ import annotations

import re

import httpx
from identity_support import Setup


def test_a_path_cannot_add_parameters_to_the_challenge_or_break_the_answer(setup: Setup) -> None:
    # A link to the gateway's own domain that names an agent `x", resource_metadata="https://evil.example/m`:
    # an MCP client that follows it was pointed at the attacker's metadata, so its sign-in at the attacker's
    # authorization server; a line break in the path made the header invalid and the connection was reset.
    evil = "https://evil.example/m"
    for path in (f'/mcp/x%22%2C%20resource_metadata%3D%22{evil}', "/mcp/coder%0D%0ASet-Cookie:%20a=b",
                 '/mcp/coder%5C%22'):
        answer = httpx.post(setup.url + path, json={}, timeout=10)
        assert answer.status_code == 401, (path, answer.status_code)
        challenge = answer.headers["www-authenticate"]
        assert challenge.count("=") == 1 and evil not in challenge, challenge  # one parameter: resource_metadata
        (metadata,) = re.findall(r'resource_metadata="([^"\\]*)"$', challenge)
        assert metadata.startswith(setup.url + "/.well-known/oauth-protected-resource/mcp/"), metadata
        assert "set-cookie" not in answer.headers
    # the real agent's challenge is as before
    plain = httpx.post(setup.url + "/mcp/coder", json={}, timeout=10).headers["www-authenticate"]
    assert plain == f'Bearer resource_metadata="{setup.url}/.well-known/oauth-protected-resource/mcp/coder"'
