"""Every door an OAuth 2.1 resource server: a real provider's tokens against a real uvicorn gateway."""

from __future__ import annotations

import base64
import re
import time

import httpx
import httpx2
import pytest
from identity_support import FUTURE_APP, OTHER, REPOS, SHORT_APP, Setup, bearer_of, claims_of, new_provider
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from oidc import signing_key

from gateway.safety.wrong_keys import BURST


def _get(setup: Setup, path: str, token: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(setup.url + path, headers=headers, timeout=10)


def _metadata_url(response: httpx.Response) -> str:
    challenge = response.headers["www-authenticate"]
    found = re.search(r'resource_metadata="([^"]+)"', challenge)
    assert found, challenge
    return found.group(1)


def test_no_token_is_401_pointing_at_the_protected_resource_metadata(setup: Setup) -> None:
    answer = _get(setup, "/agents")
    assert answer.status_code == 401
    metadata = httpx.get(_metadata_url(answer), timeout=10)
    assert metadata.status_code == 200
    assert metadata.json() == {"resource": setup.audience, "authorization_servers": [setup.provider.issuer],
                               "bearer_methods_supported": ["header"], "resource_name": "gateway",
                               "scopes_supported": ["gateway"]}


def test_each_mcp_agent_has_its_own_metadata_path(setup: Setup) -> None:
    answer = httpx.post(setup.url + "/mcp/coder", json={}, timeout=10)
    assert answer.status_code == 401
    url = _metadata_url(answer)
    assert url == setup.url + "/.well-known/oauth-protected-resource/mcp/coder"
    assert httpx.get(url, timeout=10).json()["authorization_servers"] == [setup.provider.issuer]


def test_a_signed_in_user_reaches_their_clients_agents(setup: Setup) -> None:
    token = setup.token("alice")
    answer = _get(setup, "/agents", token)
    assert answer.status_code == 200, answer.text
    assert [agent["name"] for agent in answer.json()["data"]] == ["coder", "planner", "careful"]
    assert _get(setup, "/agents/coder/tools", token).status_code == 200


def test_a_token_of_another_clients_agent_is_403(setup: Setup) -> None:
    answer = httpx.post(setup.url + "/agents/seller/tools/getRepo", json={"name": "x"},
                        headers={"Authorization": f"Bearer {setup.token('alice')}"}, timeout=10)
    assert answer.status_code == 403
    assert setup.upstream.requests == []


def test_a_token_no_client_matches_is_403(setup: Setup) -> None:
    answer = _get(setup, "/agents", setup.token("carol"))
    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == "no_client"


def test_static_keys_keep_working_beside_tokens(setup: Setup) -> None:
    assert _get(setup, "/agents", "ops-key").status_code == 200
    assert _get(setup, "/agents", "not-a-key").status_code == 401


def _rejected(setup: Setup, token: str, reason: str) -> None:
    answer = _get(setup, "/agents", token)
    assert answer.status_code == 401, answer.text
    assert reason in answer.json()["error"]["message"]
    challenge = answer.headers["www-authenticate"]
    assert 'error="invalid_token"' in challenge and "resource_metadata=" in challenge
    assert token not in answer.text and token not in challenge


def test_an_expired_token_is_401(setup: Setup) -> None:
    tokens = setup.provider.sign_in("alice", resource=setup.audience, scope="gateway", client_id=SHORT_APP)
    assert _get(setup, "/agents", tokens["access_token"]).status_code == 200
    time.sleep(3.5)  # the token lives three seconds, and the gateway allows no leeway here
    _rejected(setup, tokens["access_token"], "expired")


def test_an_expired_token_is_no_guess_but_a_forged_one_is(setup: Setup) -> None:
    # A client whose token expired retries until it refreshes: that must not lock its address out as a guesser.
    tokens = setup.provider.sign_in("alice", resource=setup.audience, scope="gateway", client_id=SHORT_APP)
    time.sleep(3.5)
    transport = httpx.HTTPTransport(local_address="127.0.0.7")
    with httpx.Client(base_url=setup.url, transport=transport, timeout=10) as holder:
        answers = [holder.get("/agents", headers={"Authorization": f"Bearer {tokens['access_token']}"})
                   for _ in range(BURST + 3)]
        assert [answer.status_code for answer in answers] == [401] * (BURST + 3)
        assert "expired" in answers[-1].json()["error"]["message"]
    header, payload, signature = setup.token("alice").split(".")
    forged = f"{header}.{payload}.{signature[:-8]}AAAAAAAA"
    transport = httpx.HTTPTransport(local_address="127.0.0.8")
    with httpx.Client(base_url=setup.url, transport=transport, timeout=10) as guesser:
        codes = [guesser.get("/agents", headers={"Authorization": f"Bearer {forged}"}).status_code
                 for _ in range(BURST + 1)]
        assert codes == [401] * BURST + [429]


def test_a_token_not_valid_yet_is_401(setup: Setup) -> None:
    tokens = setup.provider.sign_in("alice", resource=setup.audience, scope="gateway", client_id=FUTURE_APP)
    _rejected(setup, tokens["access_token"], "not valid yet")


def test_a_token_for_another_audience_is_401(setup: Setup) -> None:
    token = setup.provider.token_for("alice", audience=OTHER, scope="other")
    _rejected(setup, token, "another audience")


def test_a_token_of_another_issuer_is_401_even_with_the_same_keys(setup: Setup) -> None:
    impostor = new_provider(setup.audience, keys=setup.provider.keys).start()
    try:
        token = impostor.token_for("alice", audience=setup.audience)
    finally:
        impostor.stop()
    _rejected(setup, token, "another issuer")


def test_a_token_with_a_bad_signature_is_401(setup: Setup) -> None:
    header, payload, signature = setup.token("alice").split(".")
    raw = bytearray(base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)))
    raw[10] ^= 0xFF
    forged = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
    _rejected(setup, f"{header}.{payload}.{forged}", "signature")


def test_a_token_whose_claims_were_changed_is_401(setup: Setup) -> None:
    header, payload, signature = setup.token("carol").split(".")
    claims = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).replace(b"visitors", b"eng")
    changed = base64.urlsafe_b64encode(claims).rstrip(b"=").decode()
    _rejected(setup, f"{header}.{changed}.{signature}", "signature")


def test_a_key_rotated_at_the_issuer_is_fetched(setup: Setup) -> None:
    old = setup.token("alice")
    assert _get(setup, "/agents", old).status_code == 200  # the gateway holds the first key set now
    setup.provider.restart(keys=[signing_key(), *setup.provider.keys])  # a new key signs; the old one is published
    new = setup.token("alice")
    assert new.split(".")[0] != old.split(".")[0]  # another kid
    assert _get(setup, "/agents", new).status_code == 200
    assert _get(setup, "/agents", old).status_code == 200


def test_the_provider_down_with_an_unknown_key_is_503(setup: Setup) -> None:
    assert _get(setup, "/agents", setup.token("alice")).status_code == 200
    setup.provider.restart(keys=[signing_key()])
    token = setup.token("alice")
    setup.provider.stop()
    answer = _get(setup, "/agents", token)
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "auth_unavailable"


DOORS = [
    ("GET", "/v1/models", None),
    ("POST", "/v1/chat/completions", {"model": "coder", "messages": [{"role": "user", "content": "hi"}]}),
    ("POST", "/v1/responses", {"model": "coder", "input": "hi"}),
    ("POST", "/agents/coder/tools/getRepo", {"name": "app"}),
    ("GET", "/agents/coder/tools", None),
    ("GET", "/approvals", None),
    ("GET", "/audit", None),
]


@pytest.mark.parametrize(("method", "path", "body"), DOORS, ids=[f"{m} {p}" for m, p, _ in DOORS])
def test_every_door_wants_a_token_and_takes_a_users(setup: Setup, method: str, path: str,
                                                   body: dict[str, object] | None) -> None:
    refused = httpx.request(method, setup.url + path, json=body, timeout=20)
    assert refused.status_code == 401 and "resource_metadata=" in refused.headers["www-authenticate"]
    answer = httpx.request(method, setup.url + path, json=body, timeout=20,
                           headers={"Authorization": f"Bearer {setup.token('alice')}"})
    assert answer.status_code == 200, answer.text


@pytest.mark.anyio
async def test_the_mcp_door_takes_a_bearer_token(setup: Setup) -> None:
    token = setup.token("alice")
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        async with Client(streamable_http_client(f"{setup.url}/mcp/coder", http_client=http)) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == ["getRepo", "createIssue"]
    async with httpx2.AsyncClient(headers={"Authorization": "Bearer not-a-token"}, timeout=30) as http:
        answer = await http.post(f"{setup.url}/mcp/coder", json={})
        assert answer.status_code == 401


def _mcp_post(url: str, token: str, body: dict[str, object], session: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-06-18"}
    if session is not None:
        headers["Mcp-Session-Id"] = session
    return httpx.post(url, json=body, headers=headers, timeout=20)


def test_an_mcp_session_is_its_users_alone(setup: Setup) -> None:
    """Two users of one client (engineers): erin cannot drive alice's MCP session (2025 protocol), and a call in
    alice's session acts as alice."""
    url = f"{setup.url}/mcp/coder"
    alice, erin = setup.token("alice"), setup.token("erin")
    opened = _mcp_post(url, alice, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    _mcp_post(url, alice, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "getRepo", "arguments": {"name": "x"}}}
    hijack = _mcp_post(url, erin, call, session)
    assert hijack.status_code in (403, 404), hijack.text
    assert setup.upstream.requests == []
    assert _mcp_post(url, alice, call, session).status_code == 200
    assert claims_of(bearer_of(setup.upstream.requests[-1]), setup.provider, REPOS)["sub"] == "alice"


def test_a_stored_response_is_its_users_alone(setup: Setup) -> None:
    alice, erin = setup.token("alice"), setup.token("erin")
    answer = httpx.post(f"{setup.url}/v1/responses", json={"model": "coder", "input": "hi"},
                        headers={"Authorization": f"Bearer {alice}"}, timeout=20)
    assert answer.status_code == 200, answer.text
    response_id = answer.json()["id"]
    mine = httpx.get(f"{setup.url}/v1/responses/{response_id}", headers={"Authorization": f"Bearer {alice}"},
                     timeout=20)
    assert mine.status_code == 200
    theirs = httpx.get(f"{setup.url}/v1/responses/{response_id}", headers={"Authorization": f"Bearer {erin}"},
                       timeout=20)
    assert theirs.status_code == 404  # erin is of the same client, not the same user
    follow = httpx.post(f"{setup.url}/v1/responses", headers={"Authorization": f"Bearer {erin}"}, timeout=20,
                        json={"model": "coder", "input": "and?", "previous_response_id": response_id})
    assert follow.status_code == 404


def test_a_tokens_client_brings_its_roles(setup: Setup) -> None:
    """dave's `sub` maps him to `leads` (approver); erin's group to `engineers` (not): of the two, only dave may
    decide alice's held call."""
    held = httpx.post(f"{setup.url}/agents/careful/tools/getRepo", json={"name": "app"}, timeout=20,
                      headers={"Authorization": f"Bearer {setup.token('alice')}"})
    assert held.status_code == 202, held.text
    url = f"{setup.url}/approvals/{held.json()['approval_id']}"
    refused = httpx.post(url, json={"decision": "approve"}, timeout=20,
                         headers={"Authorization": f"Bearer {setup.token('erin')}"})
    assert refused.status_code == 403, refused.text
    assert setup.upstream.requests == []
    decided = httpx.post(url, json={"decision": "approve"}, timeout=20,
                         headers={"Authorization": f"Bearer {setup.token('dave')}"})
    assert decided.status_code == 200 and decided.json()["status"] == "resumed", decided.text
    # the call went on as alice, not as dave: its exchange needs her token, so nothing was sent as anyone
    assert setup.upstream.requests == []
    audit = httpx.get(setup.url + "/audit", headers={"Authorization": "Bearer ops-key"}, timeout=10).json()["data"]
    assert {(row["client"], row["subject"]) for row in audit if row["kind"] == "tool"} == {("engineers", "alice")}
