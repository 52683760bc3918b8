"""A signing key the provider withdraws stops working within `gateway.auth.keys_max_age`: the real oidc-provider
rotates its keys (restarted with a new one, the old one gone from its key set) under a real uvicorn gateway whose
key set lives 1 s. Asked every 0.2 s within a 60 s hang guard: no timing threshold."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from identity_support import AGENTS, Setup, new_provider, reserve, serving
from oidc import require_provider, signing_key
from recording_server import RecordingServer
from server_support import LenientLLM

GUARD = 60.0


@pytest.fixture
def short_lived_keys(tmp_path: Path, repos: RecordingServer, model: LenientLLM) -> Iterator[Setup]:
    require_provider()
    sock, url = reserve()
    provider = new_provider(url + "/").start()
    try:
        with serving(tmp_path, sock, llm=model.url, upstream=repos.url, issuer=provider.issuer, audience=url + "/",
                     agents=AGENTS.replace("leeway: 0,", "leeway: 0, keys_max_age: 1,")) as (served, safety):
            yield Setup(served, provider, safety, repos, model)
    finally:
        provider.stop()


def _agents(setup: Setup, token: str) -> httpx.Response:
    return httpx.get(f"{setup.url}/agents", headers={"Authorization": f"Bearer {token}"}, timeout=GUARD)


def test_a_withdrawn_key_and_the_tokens_it_signed_stop_working_once_the_keys_are_old(
        short_lived_keys: Setup) -> None:
    before = short_lived_keys.token("alice")
    assert _agents(short_lived_keys, before).status_code == 200  # its key fetched, the token checked and kept
    short_lived_keys.provider.restart(keys=[signing_key()])  # the old key withdrawn
    deadline = time.monotonic() + GUARD
    answer = _agents(short_lived_keys, before)
    while answer.status_code == 200 and time.monotonic() < deadline:
        time.sleep(0.2)
        answer = _agents(short_lived_keys, before)
    assert answer.status_code == 401, answer.text
    assert "signed with a key the issuer does not publish" in answer.json()["error"]["message"]
    assert _agents(short_lived_keys, short_lived_keys.token("alice")).status_code == 200  # the new key works


def test_old_keys_are_kept_while_the_provider_is_down(short_lived_keys: Setup) -> None:
    token = short_lived_keys.token("alice")
    assert _agents(short_lived_keys, token).status_code == 200
    short_lived_keys.provider.stop()  # refused connections: every refetch of the old keys fails
    time.sleep(1.5)  # past the key set's 1 s, so each request below starts (or is told of) a refetch
    for _ in range(3):
        assert _agents(short_lived_keys, token).status_code == 200
