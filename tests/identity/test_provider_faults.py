"""The OpenID provider failing, as callers meet it: a real oidc-provider behind a front that fails on loopback
(tests/identity/provider_front.py, with tests/quiet_proxy.py: refused, hung), a real uvicorn gateway with
`gateway.auth_server_timeout: 1`, httpx, the OpenAI SDK and the official MCP client as callers.

What is asserted: the error and its words, that it came (60 s client timeouts are hang guards only, no timing
threshold), how many requests reached the provider, that callers who need no answer from it were answered while
others waited, and that calls work again once it answers, without a restart."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import openai
import pytest
from cryptography.fernet import Fernet
from identity_support import AGENTS, Setup, connect_account, new_provider, reserve, serving
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from oidc import require_provider, signing_key
from provider_front import INVALID_GRANT, ProviderFront, through_front
from recording_server import RecordingServer, Reply
from scripted_llm import Call
from scripted_llm import Reply as LLMReply
from server_support import LenientLLM

pytestmark = pytest.mark.anyio

GUARD = 60.0
"""Seconds any caller here waits at most: a hang guard, not a measure."""


class Faulty(Setup):
    front: ProviderFront


@pytest.fixture
def faulty(tmp_path: Path, repos: RecordingServer, model: LenientLLM,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[Faulty]:
    require_provider()
    monkeypatch.setenv("GATEWAY_CONNECTIONS_KEY", Fernet.generate_key().decode())
    sock, url = reserve()
    provider = new_provider(url + "/").start()
    front = ProviderFront(provider)
    try:
        with front.running(), serving(tmp_path, sock, llm=model.url, upstream=repos.url, issuer=provider.issuer,
                                      audience=url + "/", agents=through_front(AGENTS, front.url)
                                      + "  auth_server_timeout: 1\n") as (served, safety):
            setup = Faulty(served, provider, safety, repos, model)
            setup.front = front
            yield setup
    finally:
        provider.stop()


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _from(n: int) -> httpx.AsyncClient:
    """A caller from an address of its own: the gateway counts 401s per address (a guesser is refused), and one
    caller's refusals must not get the next refused."""
    return httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(local_address=f"127.0.4.{n}"), timeout=GUARD)


def _rotated(setup: Faulty) -> list[str]:
    """The gateway holds the provider's key; the provider rotates to a new one (the old one withdrawn): tokens of
    the new key, which the gateway has not fetched."""
    answer = httpx.get(f"{setup.url}/agents", headers=_bearer(setup.token("alice")), timeout=GUARD)
    assert answer.status_code == 200, answer.text
    setup.provider.restart(keys=[signing_key()])
    return [setup.token("alice") for _ in range(4)]


async def _unavailable(answer: httpx.Response, words: str) -> None:
    assert answer.status_code == 503, answer.text
    error = answer.json()["error"]
    assert error["code"] == "auth_unavailable" and words in error["message"], error


async def test_a_hung_key_set_is_one_fetch_a_short_503_for_every_caller_and_found_again(faulty: Faulty) -> None:
    tokens = _rotated(faulty)
    faulty.front.proxy.silence()
    clients = [_from(n) for n in range(1, 6)]
    try:
        waiting = [asyncio.ensure_future(client.post(f"{faulty.url}/agents/coder/tools/getRepo", json={"name": "x"},
                                                     headers=_bearer(token)))
                   for client, token in zip(clients, tokens, strict=False)]
        async with openai.AsyncOpenAI(base_url=faulty.url + "/v1", api_key=tokens[0], max_retries=0,
                                      timeout=GUARD) as script:
            chat = asyncio.ensure_future(script.chat.completions.create(
                model="coder", messages=[{"role": "user", "content": "hi"}]))
            # A static key needs no provider: answered meanwhile (how soon: bench/identity_faults.py).
            listing = await clients[4].get(f"{faulty.url}/agents/coder/tools", headers=_bearer("ops-key"))
            assert listing.status_code == 200
            for answer in await asyncio.gather(*waiting):
                await _unavailable(answer, "did not answer within 1 s")
            with pytest.raises(openai.InternalServerError) as refused:
                await chat
        assert refused.value.status_code == 503 and "did not answer within 1 s" in str(refused.value)
        # One request went to the silent provider for all of them: the callers that waited shared its failure.
        assert faulty.front.proxy.unheard.count(b"GET /jwks") == 1
        faulty.front.proxy.speak()
        assert await _eventually_200(clients[0], faulty, tokens[0])
    finally:
        for client in clients:
            await client.aclose()
    assert faulty.upstream.requests != []  # the recovered call reached the api


async def _eventually_200(client: httpx.AsyncClient, setup: Setup, token: str) -> bool:
    """The call answered 200 within the hang guard (asked every 0.2 s: the failure is remembered 2 s)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GUARD
    while loop.time() < deadline:
        answer = await client.post(f"{setup.url}/agents/coder/tools/getRepo", json={"name": "x"},
                                   headers=_bearer(token))
        if answer.status_code == 200:
            return True
        await _unavailable(answer, "authorization server")
        await asyncio.sleep(0.2)
    return False


def _made_up_kid(token: str) -> str:
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    claims["kid"] = uuid.uuid4().hex[:12]
    made = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{made}.{payload}.{signature}"


async def test_made_up_kids_while_the_provider_is_down_ask_it_once(faulty: Faulty) -> None:
    token = faulty.token("alice")
    assert httpx.get(f"{faulty.url}/agents", headers=_bearer(token), timeout=GUARD).status_code == 200
    faulty.front.proxy.silence()
    clients = [_from(n) for n in range(10, 40)]
    try:
        answers = await asyncio.gather(*(client.get(f"{faulty.url}/agents", headers=_bearer(_made_up_kid(token)))
                                         for client in clients))
        # Whether a key is the issuer's cannot be known while it does not answer: 503, not 401.
        for answer in answers:
            await _unavailable(answer, "authorization server")
        again = await asyncio.gather(*(client.get(f"{faulty.url}/agents", headers=_bearer(_made_up_kid(token)))
                                       for client in clients))
        for answer in again:
            await _unavailable(answer, "again in")
        # A token of the key the gateway holds is checked meanwhile as before.
        assert (await clients[0].get(f"{faulty.url}/agents", headers=_bearer(faulty.token("erin")))).status_code \
            == 200
    finally:
        for client in clients:
            await client.aclose()
    assert faulty.front.proxy.unheard.count(b"GET /jwks") == 1


@pytest.mark.parametrize(("fault", "words"), [
    (Reply(500, "Internal Server Error"), "HTTP 500"),
    (Reply(200, "<html>maintenance</html>", {"Content-Type": "text/html"}), "is not JSON"),
    (Reply(200, {"keys": "none"}), "without a list of `keys`"),
], ids=["500", "html", "no-keys"])
def test_a_failing_key_set_is_a_503_saying_how(faulty: Faulty, fault: Reply, words: str) -> None:
    tokens = _rotated(faulty)
    faulty.front.fail("/jwks", fault)
    answer = httpx.get(f"{faulty.url}/agents", headers=_bearer(tokens[0]), timeout=GUARD)
    assert answer.status_code == 503 and answer.json()["error"]["code"] == "auth_unavailable"
    assert words in answer.json()["error"]["message"], answer.text


async def test_a_hung_token_exchange_is_the_models_tool_error_and_nothing_is_sent(faulty: Faulty) -> None:
    erin = faulty.token("erin")
    async with httpx.AsyncClient(timeout=GUARD) as client:
        warm = await client.post(f"{faulty.url}/agents/coder/tools/getRepo", json={"name": "x"},
                                 headers=_bearer(erin))
        assert warm.status_code == 200, warm.text
        faulty.upstream.clear()
        faulty.front.proxy.silence()
        alice = faulty.token("alice")  # her first call: an exchange the silent provider never answers
        direct = await client.post(f"{faulty.url}/agents/coder/tools/getRepo", json={"name": "x"},
                                   headers=_bearer(alice))
        await _unavailable(direct, "did not answer within 1 s (token exchange")
        faulty.llm.script(LLMReply(calls=[Call("getRepo", {"name": "x"})]), LLMReply(text="done"))
        chat = await client.post(f"{faulty.url}/v1/chat/completions", headers=_bearer(alice),
                                 json={"model": "coder", "messages": [{"role": "user", "content": "go"}]})
        assert chat.status_code == 200, chat.text
        tool_message = faulty.llm.requests[-1].body["messages"][-1]
        assert tool_message["role"] == "tool" and "did not answer within 1 s" in tool_message["content"]
        async with httpx2.AsyncClient(headers=_bearer(alice), timeout=GUARD) as http, \
                Client(streamable_http_client(f"{faulty.url}/mcp/coder", http_client=http)) as mcp:
            result = await mcp.call_tool("getRepo", {"name": "x"})
        assert result.is_error and "did not answer within 1 s" in str(result.content)
        assert faulty.upstream.requests == []  # nothing went to the api without alice's own token
        # a caller needing no exchange is answered meanwhile
        assert (await client.get(f"{faulty.url}/agents/coder/tools", headers=_bearer(erin))).status_code == 200
        faulty.front.proxy.speak()
        assert await _eventually_200(client, faulty, alice)


def _connected_and_due(setup: Faulty, user: str) -> str:
    """`user` connects their tracker account; returns their token once the connection's access token is due for a
    refresh (the tracker's tokens live 4 s: refreshed past half their life)."""
    token = setup.token(user)
    link = httpx.post(f"{setup.url}/connections/tracker", headers=_bearer(token), timeout=GUARD).json()["connect_url"]
    assert connect_account(setup.provider, setup.url, user, link).status_code == 200
    first = httpx.post(f"{setup.url}/agents/planner/tools/listTickets", json={}, headers=_bearer(token),
                       timeout=GUARD)
    assert first.status_code == 200, first.text
    time.sleep(2.5)
    return token


async def test_a_users_hung_refresh_is_asked_once_for_all_their_calls(faulty: Faulty) -> None:
    token = _connected_and_due(faulty, "alice")
    faulty.upstream.clear()
    faulty.front.proxy.silence()
    async with httpx.AsyncClient(timeout=GUARD) as client:
        answers = await asyncio.gather(*(client.post(f"{faulty.url}/agents/planner/tools/listTickets", json={},
                                                     headers=_bearer(token)) for _ in range(4)))
    for answer in answers:
        await _unavailable(answer, "did not answer within 1 s (token refresh")
    assert faulty.front.proxy.unheard.count(b"grant_type=refresh_token") == 1
    assert faulty.upstream.requests == []


def test_a_refresh_the_provider_refuses_asks_the_user_to_connect_again(faulty: Faulty) -> None:
    token = _connected_and_due(faulty, "alice")
    faulty.upstream.clear()
    faulty.front.fail("/token", INVALID_GRANT)
    answer = httpx.post(f"{faulty.url}/agents/planner/tools/listTickets", json={}, headers=_bearer(token),
                        timeout=GUARD)
    assert answer.status_code == 403, answer.text
    error = answer.json()["error"]
    assert error["code"] == "not_connected" and "ended" in error["message"]
    assert "/console/connect?state=" in error["message"]
    assert faulty.upstream.requests == []


async def test_a_key_set_slower_than_the_setting_still_arrives_for_the_next_callers(faulty: Faulty) -> None:
    tokens = _rotated(faulty)
    before = faulty.front.asked("/jwks")
    faulty.front.slow("/jwks", 2.5)  # the provider answers, past the gateway's 1 s
    async with _from(41) as client:
        first = await client.get(f"{faulty.url}/agents", headers=_bearer(tokens[0]))
        await _unavailable(first, "did not answer within 1 s")
        # The one fetch went on after its caller gave up: its keys serve the next callers, asked of nobody again.
        assert await _eventually_200(client, faulty, tokens[1])
    assert faulty.front.asked("/jwks") == before + 1


async def test_retry_after_is_what_is_left_of_the_remembered_failure(faulty: Faulty) -> None:
    tokens = _rotated(faulty)
    faulty.front.fail("/jwks", Reply(500, "down"))
    async with _from(42) as client:
        asked = await client.get(f"{faulty.url}/agents", headers=_bearer(tokens[0]))
        await _unavailable(asked, "HTTP 500")
        assert asked.headers["Retry-After"] == "2"  # the whole window: the provider is asked again in 2 s
        told = await client.get(f"{faulty.url}/agents", headers=_bearer(tokens[1]))
        await _unavailable(told, "again in")
    said = re.search(r"again in (\d+\.\d) s", told.json()["error"]["message"])
    assert said is not None and float(said.group(1)) <= int(told.headers["Retry-After"]) <= 2


async def test_calls_queued_behind_a_refused_refresh_are_each_told_the_connection_ended(faulty: Faulty) -> None:
    token = _connected_and_due(faulty, "alice")
    faulty.upstream.clear()
    faulty.front.fail("/token", Reply(INVALID_GRANT.status, INVALID_GRANT.body, delay=0.5))  # the calls overlap it
    async with httpx.AsyncClient(timeout=GUARD) as client:
        answers = await asyncio.gather(*(client.post(f"{faulty.url}/agents/planner/tools/listTickets", json={},
                                                     headers=_bearer(token)) for _ in range(4)))
    for answer in answers:  # (a tool error in a chat carries the same words to the model)
        assert answer.status_code == 403, answer.text
        error = answer.json()["error"]
        assert error["code"] == "not_connected" and "connection to your account ended" in error["message"]
        assert "/console/connect?state=" in error["message"]
    assert faulty.front.asked("/token") == 2  # the sign-in's code exchange and the one refused refresh
    assert faulty.upstream.requests == []


async def test_a_refresh_slower_than_the_setting_still_keeps_the_providers_new_tokens(faulty: Faulty) -> None:
    token = _connected_and_due(faulty, "alice")
    refreshes = faulty.front.asked("/token")
    faulty.front.slow("/token", 2.5)
    async with httpx.AsyncClient(timeout=GUARD) as client:
        late = await client.post(f"{faulty.url}/agents/planner/tools/listTickets", json={}, headers=_bearer(token))
        await _unavailable(late, "did not answer within 1 s (token refresh")
        faulty.front.heal()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + GUARD
        while loop.time() < deadline:  # the refresh still under way is waited for, not asked again
            answer = await client.post(f"{faulty.url}/agents/planner/tools/listTickets", json={},
                                       headers=_bearer(token))
            if answer.status_code == 200:
                break
            await _unavailable(answer, "did not answer within 1 s (token refresh")
    assert answer.status_code == 200, answer.text
    assert faulty.front.asked("/token") == refreshes + 1
