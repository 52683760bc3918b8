"""Two gateway instances on one PostgreSQL behind one audience: a user connected through one is connected on both,
and either renews the connection for both (the tokens live in the store, encrypted with the shared key)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet
from identity_support import TRACKER, bearer_of, claims_of, connect_account, new_provider, reserve, serving
from oidc import require_provider
from recording_server import RecordingServer
from server_support import LenientLLM


def test_a_connection_made_on_one_instance_serves_the_other(tmp_path: Path, repos: RecordingServer,
                                                            model: LenientLLM, postgres_url: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    require_provider()
    monkeypatch.setenv("GATEWAY_CONNECTIONS_KEY", Fernet.generate_key().decode())
    first_sock, first_url = reserve()
    second_sock, _ = reserve()
    audience = first_url + "/"  # one resource identifier for both (as behind one load balancer)
    provider = new_provider(audience).start()
    project = {"llm": model.url, "upstream": repos.url, "issuer": provider.issuer, "audience": audience,
               "store": postgres_url}
    try:
        with serving(tmp_path / "a", first_sock, **project) as (a, _), \
                serving(tmp_path / "b", second_sock, **project) as (b, _):
            alice = provider.token_for("alice", audience=audience)
            headers = {"Authorization": f"Bearer {alice}"}
            refused = httpx.post(f"{b}/agents/planner/tools/listTickets", json={}, headers=headers, timeout=20)
            link = refused.json()["error"]["message"].split("open ", 1)[1].split(" ", 1)[0]

            assert connect_account(provider, a, "alice", link).status_code == 200  # made by b, finished on a

            for url in (b, a):
                assert httpx.post(f"{url}/agents/planner/tools/listTickets", json={}, headers=headers,
                                  timeout=20).status_code == 200
            first = {bearer_of(r) for r in repos.requests}
            assert len(first) == 1  # both sent the one stored token
            time.sleep(2.5)
            assert httpx.post(f"{b}/agents/planner/tools/listTickets", json={}, headers=headers,
                              timeout=20).status_code == 200  # b renews
            assert httpx.post(f"{a}/agents/planner/tools/listTickets", json={}, headers=headers,
                              timeout=20).status_code == 200  # a uses b's renewal
            renewed_by_b, used_by_a = bearer_of(repos.requests[-2]), bearer_of(repos.requests[-1])
            assert renewed_by_b == used_by_a and renewed_by_b not in first
            assert claims_of(used_by_a, provider, TRACKER)["sub"] == "alice"
    finally:
        provider.stop()
