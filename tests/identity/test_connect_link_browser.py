"""A connect link in a real browser (headless Chromium via Selenium), across sites as in production.

The gateway is `http://gateway.test:<port>` to the browser (Chromium's host resolver maps the name to 127.0.0.1),
the provider `http://127.0.0.1:<port>`: two sites, so the browser applies SameSite as it would between a company's
gateway and its tracker's sign-in. What the httpx tests cannot show: the start page's nonce cookie (SameSite=Lax)
comes back on the provider's redirect to the callback, and the flow a user walks (sign in on the way, the
provider's login and consent forms, the callback's page) ends connected.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet
from identity_support import TRACKER, Setup, bearer_of, claims_of, started
from recording_server import RecordingServer, Reply
from server_support import LenientLLM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server" / "console"))
from console_support import chromium  # noqa: E402

pytestmark = pytest.mark.slow

GATEWAY_HOST = "gateway.test"
WAIT = 20


@pytest.fixture
def across_sites(tmp_path: Path, repos: RecordingServer, model: LenientLLM,
                 monkeypatch: pytest.MonkeyPatch) -> Iterator[Setup]:
    """The identity tests' setup, but the gateway's URL (its audience, its callback) on the name gateway.test."""
    monkeypatch.setenv("GATEWAY_CONNECTIONS_KEY", Fernet.generate_key().decode())
    with started(tmp_path, repos, model, host=GATEWAY_HOST) as setup:
        yield setup


@pytest.fixture
def browser() -> Iterator[Any]:
    with chromium(f"--host-resolver-rules=MAP {GATEWAY_HOST} 127.0.0.1") as driver:
        yield driver


def _wait(driver: Any, condition: Any) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT).until(condition)


def _link_for(setup: Setup, user: str) -> str:
    answer = httpx.post(f"{setup.url}/connections/tracker",
                        headers={"Authorization": f"Bearer {setup.token(user)}"}, timeout=10)
    link: str = answer.json()["connect_url"]
    assert link.startswith(f"http://{GATEWAY_HOST}:")
    return link


def _sign_in_on_the_page(driver: Any, token: str) -> None:
    from selenium.webdriver.common.by import By

    _wait(driver, lambda d: "/console/signin" in d.current_url)
    driver.find_element(By.ID, "key").send_keys(token)
    driver.find_element(By.ID, "signin-submit").click()


def _sign_in_at_the_provider(driver: Any, user: str) -> None:
    """oidc-provider's development login form, then its consent form."""
    from selenium.webdriver.common.by import By

    _wait(driver, lambda d: d.find_elements(By.NAME, "login"))
    driver.find_element(By.NAME, "login").send_keys(user)
    driver.find_element(By.NAME, "password").send_keys("any")
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    _wait(driver, lambda d: 'value="consent"' in d.page_source or GATEWAY_HOST in d.current_url)
    if GATEWAY_HOST not in driver.current_url:
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()


def _body(driver: Any) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.TAG_NAME, "body").text)


def test_the_owner_signs_in_on_the_way_and_is_connected_across_sites(across_sites: Setup, browser: Any) -> None:
    setup = across_sites
    link = _link_for(setup, "bob")
    browser.get(link)  # not signed in: the console's sign-in, which says why, and back to the start page
    assert "connects your own account" in _body(browser)
    _sign_in_on_the_page(browser, setup.token("bob"))
    _sign_in_at_the_provider(browser, "bob")  # the start page sent the browser on to the provider (another site)
    _wait(browser, lambda d: "/connections/callback" in d.current_url)
    assert "Your account is connected to tracker" in _body(browser)  # the Lax nonce cookie came back
    assert not [c for c in browser.get_cookies() if c["name"].startswith("gateway_connect_")]  # cleared

    listed = httpx.post(f"{setup.url}/agents/planner/tools/listTickets", json={},
                        headers={"Authorization": f"Bearer {setup.token('bob')}"}, timeout=20)
    assert listed.status_code == 200, listed.text
    (sent,) = setup.upstream.requests
    assert claims_of(bearer_of(sent), setup.provider, TRACKER)["sub"] == "bob"


def test_another_users_browser_is_refused_at_the_start_page(across_sites: Setup, browser: Any) -> None:
    setup = across_sites
    link = _link_for(setup, "bob")
    browser.get(link)
    _sign_in_on_the_page(browser, setup.token("alice"))  # alice signs in as herself on the way
    _wait(browser, lambda d: "/console/connect" in d.current_url and "made for another user" in _body(d))
    assert "bob" not in _body(browser)
    refused = httpx.post(f"{setup.url}/agents/planner/tools/listTickets", json={},
                         headers={"Authorization": f"Bearer {setup.token('bob')}"}, timeout=20)
    assert refused.json()["error"]["code"] == "not_connected" and setup.upstream.requests == []


def test_a_link_clicked_on_another_site_continues_from_the_sign_in_page(across_sites: Setup, browser: Any) -> None:
    # bob is signed in to the console, then clicks his link on another site (a chat app: here a page the loopback
    # upstream serves). The console's cookie is SameSite=Strict, so that navigation arrives without it: the gate
    # shows the sign-in page, whose "continue" link is a same-site navigation that carries it.
    from selenium.webdriver.common.by import By

    setup = across_sites
    link = _link_for(setup, "bob")
    setup.upstream.route("/chat-app", Reply(200, f'<!doctype html><a id="link" href="{link}">connect</a>',
                                            headers={"Content-Type": "text/html"}))
    browser.get(f"http://{GATEWAY_HOST}:{setup.url.rsplit(':', 1)[1]}/console/signin")
    _sign_in_on_the_page(browser, setup.token("bob"))
    _wait(browser, lambda d: "/console/agents" in d.current_url)

    browser.get(f"{setup.upstream.url}/chat-app")
    browser.find_element(By.ID, "link").click()
    _wait(browser, lambda d: "/console/signin" in d.current_url)
    browser.find_element(By.ID, "signin-continue").click()
    _sign_in_at_the_provider(browser, "bob")
    _wait(browser, lambda d: "/connections/callback" in d.current_url)
    assert "Your account is connected to tracker" in _body(browser)
