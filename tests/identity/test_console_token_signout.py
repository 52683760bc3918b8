"""Signing out of the console after signing in with an access token (redteam45: the cookie, `t.<token>`, kept
working): the real oidc-provider's token, a real uvicorn gateway, httpx as the browser and as the copy's holder."""

from __future__ import annotations

import re

import httpx
from identity_support import Setup


def test_sign_out_ends_a_token_cookie_on_the_console_and_the_token_lives_on_at_the_doors(setup: Setup) -> None:
    token = setup.token("alice")
    with httpx.Client(base_url=setup.url, timeout=20) as browser:
        assert browser.post("/console/signin", json={"key": token}).status_code == 200
        page = browser.get("/console/agents")
        assert page.status_code == 200
        csrf = re.search(r'name="csrf-token" content="([^"]+)"', page.text)
        assert csrf is not None
        copied = browser.cookies["gateway_console"]  # what a shared machine or a proxy's log may have kept
        assert browser.post("/console/signout", headers={"X-CSRF-Token": csrf.group(1)}).status_code == 200
    with httpx.Client(base_url=setup.url, timeout=20) as replay:
        replay.cookies.set("gateway_console", copied, path="/")
        answer = replay.get("/console/agents")
        assert answer.status_code == 303 and "/console/signin" in answer.headers["location"]
        again = replay.post("/console/signin", json={"key": token})  # the token itself, signed in once more
        assert again.status_code == 401 and again.json()["error"]["code"] == "signed_out", again.text
        assert replay.post("/console/signin", json={"key": setup.token("alice")}).status_code == 200  # a new one
    # The token is the provider's: the gateway does not revoke it there, and it works on the doors until it expires.
    assert httpx.get(f"{setup.url}/agents", headers={"Authorization": f"Bearer {token}"}).status_code == 200
