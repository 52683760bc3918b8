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


def test_the_consoles_audit_names_the_user_beside_the_client(setup: Setup) -> None:
    """An operator reading the console's audit sees who of a client's users made each call (the row's `subject`)."""
    alice = setup.token("alice")
    answer = httpx.post(f"{setup.url}/agents/careful/tools/getRepo", json={"name": "alices-project"},
                        headers={"Authorization": f"Bearer {alice}"}, timeout=20)
    assert answer.status_code == 202, answer.text
    with httpx.Client(base_url=setup.url, timeout=20) as console:
        assert console.post("/console/signin", json={"key": "ops-key"}).status_code == 200
        page = console.get("/console/audit").text
    assert '<small class="subject">(alice)</small>' in page, page
