"""Two users of one client (alice and erin, both `engineers` by their group) do not read each other's audit rows or
pending calls over HTTP; the client-wide readers (an admin key here) still read both."""

from __future__ import annotations

import httpx
from identity_support import Setup


def _get(setup: Setup, path: str, token: str) -> httpx.Response:
    return httpx.get(f"{setup.url}{path}", headers={"Authorization": f"Bearer {token}"}, timeout=20)


def test_a_user_reads_only_their_own_rows_and_pending_calls(setup: Setup) -> None:
    alice, erin = setup.token("alice"), setup.token("erin")
    held = httpx.post(f"{setup.url}/agents/careful/tools/getRepo", json={"name": "alices-secret-project"},
                      headers={"Authorization": f"Bearer {alice}"}, timeout=20)
    assert held.status_code == 202, held.text
    approval = held.json()["approval_id"]
    assert [a["id"] for a in _get(setup, "/approvals", alice).json()["data"]] == [approval]
    assert _get(setup, "/approvals", erin).json()["data"] == []
    assert _get(setup, f"/approvals/{approval}", erin).status_code == 404
    assert "alices-secret-project" in _get(setup, "/audit", alice).text
    assert "alices-secret-project" not in _get(setup, "/audit", erin).text
    assert "alices-secret-project" in _get(setup, "/audit", "ops-key").text
