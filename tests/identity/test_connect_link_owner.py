"""A connect link is bound to the user who asked for it, and completes only in that user's browser.

Found by the second outside attack (branch redteam): `POST /connections/{api}` (or a call's `not_connected` error)
gave bob a link straight to the provider, and `GET /connections/callback` stored the tokens of whoever's browser came
back with its `state`. bob sent the link to alice ("connect the tracker here"); alice signed in at the tracker and
consented; the callback stored alice's tracker tokens as bob's connection, and bob's calls then acted as alice
(run with the real provider: the page answered 200 and bob's listTickets reached the tracker with a token whose
`sub` was alice).

Now the link is the gateway's start page (`/console/connect?state=...`): it goes on to the provider only in a
browser signed in to the console as the link's owner, which it gives a nonce cookie whose hash the store keeps with
the state; the callback stores tokens only for the browser holding that nonce. Every browser here is a real
`httpx.Client` with its cookie jar, against the real provider.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import pytest
from identity_support import TRACKER, Setup, bearer_of, claims_of, follow_link, return_from_provider, signed_in


def _link_for(setup: Setup, user: str) -> str:
    answer = httpx.post(f"{setup.url}/connections/tracker",
                        headers={"Authorization": f"Bearer {setup.token(user)}"}, timeout=10)
    assert answer.status_code == 200, answer.text
    link: str = answer.json()["connect_url"]
    assert link.startswith(f"{setup.url}/console/connect?state=")  # the gateway's start page, not the provider
    return link


def _list(setup: Setup, user: str) -> httpx.Response:
    return httpx.post(f"{setup.url}/agents/planner/tools/listTickets", json={},
                      headers={"Authorization": f"Bearer {setup.token(user)}"}, timeout=20)


def _stored(setup: Setup, user: str) -> bool:
    async def get() -> bool:
        return await setup.safety.store.get_connection(user, "tracker") is not None

    return anyio.run(get)


def _connect_cookies(browser: httpx.Client) -> list[str]:
    return [cookie.name for cookie in browser.cookies.jar if cookie.name.startswith("gateway_connect_")]


def _nothing_connected(setup: Setup) -> None:
    assert not _stored(setup, "bob") and not _stored(setup, "alice")
    assert _list(setup, "bob").json()["error"]["code"] == "not_connected"
    assert setup.upstream.requests == []


def test_a_link_opened_in_another_users_signed_in_browser_is_refused_and_spent(setup: Setup) -> None:
    link = _link_for(setup, "bob")
    with signed_in(setup.provider, setup.url, "alice") as alice:  # alice's browser follows bob's link
        page = follow_link(setup.provider, alice, "alice", link)
        assert page.status_code == 403, page.text
        assert "made for another user" in page.text and "bob" not in page.text  # names no one
        assert _connect_cookies(alice) == []  # nothing kept in her browser either
    _nothing_connected(setup)
    with signed_in(setup.provider, setup.url, "bob") as bob:  # a link that reached someone else is worth nothing
        spent = follow_link(setup.provider, bob, "bob", link)
        assert spent.status_code == 400 and "expired or was used" in spent.text
    _nothing_connected(setup)


def test_a_browser_not_signed_in_is_sent_to_sign_in_and_back_and_only_the_owner_goes_on(setup: Setup) -> None:
    link = _link_for(setup, "bob")
    with httpx.Client(timeout=20) as browser:
        page = follow_link(setup.provider, browser, "alice", link)
        assert page.status_code == 303 and page.headers["location"].startswith("/console/signin?next=")
        back_to = parse_qs(urlsplit(page.headers["location"]).query)["next"][0]
        assert back_to == link.removeprefix(f"{setup.url}/console")
        signin = browser.get(setup.url + page.headers["location"])
        assert signin.status_code == 200 and 'id="signin-connecting"' in signin.text
        assert f'id="signin-continue" href="/console{back_to}"' in signin.text  # a same-site way back, for Strict
        _nothing_connected(setup)  # the link is not spent: its owner may not have been signed in either

        # bob, in that browser, signs in as himself (the page posts its `next` back); he returns to the start page
        signed = browser.post(f"{setup.url}/console/signin", json={"key": setup.token("bob"), "next": back_to})
        assert signed.status_code == 200 and signed.json()["next"] == link.removeprefix(setup.url)
        page = follow_link(setup.provider, browser, "bob", setup.url + signed.json()["next"])
        assert page.status_code == 200 and "connected to tracker" in page.text
        assert _connect_cookies(browser) == []  # the callback cleared the nonce
    assert _stored(setup, "bob") and not _stored(setup, "alice")
    assert _list(setup, "bob").status_code == 200
    assert claims_of(bearer_of(setup.upstream.requests[0]), setup.provider, TRACKER)["sub"] == "bob"


def test_a_browser_signed_in_with_a_client_key_is_no_user_and_leaves_the_link_alone(setup: Setup) -> None:
    link = _link_for(setup, "bob")
    with httpx.Client(timeout=20) as ops:
        assert ops.post(f"{setup.url}/console/signin", json={"key": "ops-key"}).status_code == 200
        page = follow_link(setup.provider, ops, "ops", link)
        assert page.status_code == 403 and "access token" in page.text
    with signed_in(setup.provider, setup.url, "bob") as bob:
        assert follow_link(setup.provider, bob, "bob", link).status_code == 200
    assert _list(setup, "bob").status_code == 200


@pytest.mark.parametrize("cookie", ["missing", "forged"])
def test_the_provider_url_forwarded_from_the_owners_browser_connects_nothing(setup: Setup, cookie: str) -> None:
    # bob opens his own link in his own browser, then hands on the provider's URL it was sent to: alice signs in
    # there and her browser comes back to the callback without bob's nonce (or with one it made up)
    link = _link_for(setup, "bob")
    with signed_in(setup.provider, setup.url, "bob") as bob, httpx.Client(timeout=20) as alice:
        started = bob.get(link)
        assert started.status_code == 303 and started.headers["location"].startswith(setup.provider.issuer)
        (name,) = _connect_cookies(bob)
        cookie_of_bob = next(c for c in bob.cookies.jar if c.name == name)
        assert cookie_of_bob.has_nonstandard_attr("HttpOnly") and cookie_of_bob.path == "/connections/callback"
        if cookie == "forged":
            alice.cookies.set(name, "made-up-nonce", domain="127.0.0.1", path="/connections/callback")
        page = return_from_provider(setup.provider, alice, "alice", started.headers["location"])
        assert page.status_code == 403 and "did not start in the browser" in page.text
        _nothing_connected(setup)

        # the state is spent: bob's own browser, nonce and all, cannot finish it afterwards
        late = return_from_provider(setup.provider, bob, "bob", started.headers["location"])
        assert late.status_code == 400 and "expired or was used" in late.text
        assert _connect_cookies(bob) == []
    _nothing_connected(setup)


def test_two_links_opened_at_once_in_one_browser_both_connect(setup: Setup) -> None:
    # one nonce cookie per link: the second start does not overwrite the first's
    first, second = _link_for(setup, "bob"), _link_for(setup, "bob")
    with signed_in(setup.provider, setup.url, "bob") as bob:
        one, two = bob.get(first), bob.get(second)
        assert len(_connect_cookies(bob)) == 2
        assert return_from_provider(setup.provider, bob, "bob", one.headers["location"]).status_code == 200
        assert return_from_provider(setup.provider, bob, "bob", two.headers["location"]).status_code == 200
        assert _connect_cookies(bob) == []
