"""The console in a real browser (headless Chromium via Selenium) against a real gateway, scripted LLM and
upstream: sign in, browse, run a tool from its form, chat and watch steps, approve and deny writes."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from console_support import (
    ADMIN_KEY,
    CONSOLE_AGENTS_YAML,
    PLAIN_TRIAGE_KEY,
    TRIAGE_KEY,
    WEATHER_KEY,
    chromium,
    csp_refusals,
    screenshot,
)
from recording_server import RecordingServer
from recording_server import Reply as RecorderReply
from safety.safety_support import safe_gateway
from scripted_llm import Call, Reply
from server_support import LenientLLM

pytestmark = pytest.mark.slow

COMMENT = {"owner": "acme", "repo": "app", "issue_number": 7, "body": "On it."}
WAIT = 20


@pytest.fixture
def served(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Iterator[str]:
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=CONSOLE_AGENTS_YAML) as (url, _):
        yield url


@pytest.fixture(scope="module")
def chromium_of_this_module() -> Iterator[Any]:
    """One Chromium for these tests: starting one takes seconds."""
    with chromium() as driver:
        yield driver


@pytest.fixture
def browser(chromium_of_this_module: Any) -> Iterator[Any]:
    """The module's Chromium with no cookies (signed out): each test's gateway has a port of its own, so only
    cookies, which ignore the port, would carry over; other stored data belongs to one origin."""
    driver = chromium_of_this_module
    driver.get("about:blank")
    driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
    driver.get_log("browser")  # what an earlier test's pages logged (a framing refused on purpose) is not this one's
    yield driver
    driver.get("about:blank")  # leave the page before the test's gateway stops


def _wait(driver: Any, condition: Any) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT).until(condition)


def _text_in(selector: str, text: str) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    return ec.text_to_be_present_in_element((By.CSS_SELECTOR, selector), text)


def _sign_in(driver: Any, url: str, key: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver.get(f"{url}/console/")
    _wait(driver, lambda d: "/console/signin" in d.current_url)
    box = driver.find_element(By.ID, "key")
    assert driver.switch_to.active_element == box  # the key field has focus: type, Enter
    screenshot(driver, "signin")
    box.send_keys(key, Keys.ENTER)
    _wait(driver, lambda d: d.current_url.endswith("/console/agents"))


UNLABELLED = """
return Array.from(document.querySelectorAll("input, select, textarea, button"))
  .filter((c) => c.type !== "hidden" && !(c.labels && c.labels.length) && !c.getAttribute("aria-label")
                 && !(c.tagName === "BUTTON" && c.textContent.trim()))
  .map((c) => c.outerHTML.slice(0, 80));
"""


def _unlabelled(driver: Any) -> list[str]:
    """Controls a screen reader could not name (no <label>, aria-label or text)."""
    return driver.execute_script(UNLABELLED)  # type: ignore[no-any-return]


def _writes(upstream: RecordingServer) -> list[str]:
    return [r.path for r in upstream.requests if r.method == "POST"]


def test_sign_in_browse_and_run_a_tool_from_its_form(served: str, browser: Any, upstream: RecordingServer) -> None:
    from selenium.webdriver.common.by import By

    _sign_in(browser, served, TRIAGE_KEY)
    cards = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#agent-list .card h2")]
    assert cards == ["triage"]  # the triage key does not see the weather agent
    browser.find_element(By.LINK_TEXT, "triage").click()
    _wait(browser, _text_in("#tool-table", "getIssue"))
    filter_box = browser.find_element(By.ID, "tool-filter")
    filter_box.send_keys("comment")  # filters the table as one types
    visible = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#tool-table tbody tr") if r.is_displayed()]
    assert len(visible) == 1 and "createIssueComment" in visible[0]
    screenshot(browser, "agent")
    browser.find_element(By.ID, "tool-filter").clear()
    browser.get(f"{served}/console/agents/triage/tools/getIssue")
    for label, value in (("owner", "acme"), ("repo", "app"), ("issue_number", "7")):
        field = browser.find_element(By.CSS_SELECTOR, f".schema-form > .field[data-name='{label}'] .value")
        assert browser.find_element(By.CSS_SELECTOR, f"label[for='{field.get_attribute('id')}']").text.startswith(
            label)  # every control has its label
        field.send_keys(value)
    raw = json.loads(browser.find_element(By.ID, "raw-arguments").get_attribute("value"))
    assert raw == {"owner": "acme", "repo": "app", "issue_number": 7}  # the JSON view follows the form
    browser.find_element(By.ID, "run-tool").click()
    _wait(browser, _text_in("#result-status", "upstream HTTP 200"))
    assert "Crash on start" in browser.find_element(By.ID, "result-body").text  # the upstream's answer
    assert [r.path for r in upstream.requests] == ["/github/repos/acme/app/issues/7"]
    browser.execute_script("document.getElementById('try-heading').scrollIntoView()")
    screenshot(browser, "tool")

    browser.find_element(By.ID, "raw-json").click()  # a wrong value: the gateway's own words, nothing sent
    raw_box = browser.find_element(By.ID, "raw-arguments")
    raw_box.clear()
    raw_box.send_keys('{"owner": "acme", "repo": "app", "issue_number": "seven"}')
    browser.find_element(By.ID, "run-tool").click()
    _wait(browser, _text_in("#result-status", "HTTP 422"))
    assert "issue_number" in browser.find_element(By.ID, "result-body").text
    assert len(upstream.requests) == 1


def test_lists_and_enums_in_the_form(served: str, browser: Any, upstream: RecordingServer) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    _sign_in(browser, served, WEATHER_KEY)
    browser.get(f"{served}/console/agents/weather/tools/getForecast")
    form = browser.find_element(By.CSS_SELECTOR, ".schema-form")
    form.find_element(By.CSS_SELECTOR, ".field[data-name='latitude'] .value").send_keys("52.52")
    form.find_element(By.CSS_SELECTOR, ".field[data-name='longitude'] .value").send_keys("13.41")
    current = form.find_element(By.CSS_SELECTOR, ".field[data-name='current']")
    for variable in ("temperature_2m", "wind_speed_10m"):
        current.find_element(By.CSS_SELECTOR, "button.add-item").click()
        Select(current.find_elements(By.CSS_SELECTOR, ".items select")[-1]).select_by_visible_text(variable)
    unit = form.find_element(By.CSS_SELECTOR, ".field[data-name='temperature_unit'] select")
    Select(unit).select_by_visible_text("fahrenheit")
    raw = json.loads(browser.find_element(By.ID, "raw-arguments").get_attribute("value"))
    assert raw == {"latitude": 52.52, "longitude": 13.41, "current": ["temperature_2m", "wind_speed_10m"],
                   "temperature_unit": "fahrenheit"}  # unset enums stay out: no default is sent for the user
    browser.find_element(By.ID, "run-tool").click()
    _wait(browser, _text_in("#result-status", "upstream HTTP 200"))
    (request,) = upstream.requests
    assert "current=temperature_2m,wind_speed_10m" in request.target.replace("%2C", ",")
    assert "temperature_unit=fahrenheit" in request.target


SHOP_SPEC = """\
openapi: 3.1.0
info: {title: Shop, version: "1"}
paths:
  /orders:
    post:
      operationId: createOrder
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [customer, lines]
              properties:
                customer:
                  type: object
                  required: [name]
                  properties: {name: {type: string}, email: {type: string, format: email}}
                lines:
                  type: array
                  items:
                    type: object
                    required: [sku, qty]
                    properties: {sku: {type: string}, qty: {type: integer, minimum: 1}}
                express: {type: boolean}
      responses: {"201": {description: created}}
"""
SHOP_YAML = CONSOLE_AGENTS_YAML.replace("agents:\n", """\
  shop: {{base_url: "{upstream}/shop"}}
agents:
  shop:
    model: openai/gpt-test
    tools: [{{api: shop}}]
""", 1)


def test_nested_objects_and_lists_of_objects_in_the_form(tmp_path: Path, browser: Any, llm: LenientLLM,
                                                         upstream: RecordingServer) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "shop.yaml").write_text(SHOP_SPEC)
    upstream.route("/shop/", lambda request: RecorderReply(201, {"id": "ord_1"}))
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=SHOP_YAML) as (url, _):
        _sign_in(browser, url, ADMIN_KEY)
        browser.get(f"{url}/console/agents/shop/tools/createOrder")
        form = browser.find_element(By.CSS_SELECTOR, ".schema-form")
        customer = form.find_element(By.CSS_SELECTOR, ".field[data-name='customer']")
        customer.find_element(By.CSS_SELECTOR, ".field[data-name='name'] .value").send_keys("Ann")
        lines = form.find_element(By.CSS_SELECTOR, ".field[data-name='lines']")
        for sku, qty in (("A-1", "2"), ("B-7", "1")):
            lines.find_element(By.CSS_SELECTOR, "button.add-item").click()
            item = lines.find_elements(By.CSS_SELECTOR, ".items > .item")[-1]
            item.find_element(By.CSS_SELECTOR, ".field[data-name='sku'] .value").send_keys(sku)
            item.find_element(By.CSS_SELECTOR, ".field[data-name='qty'] .value").send_keys(qty)
        Select(form.find_element(By.CSS_SELECTOR, ".field[data-name='express'] select")).select_by_visible_text("true")
        browser.find_element(By.ID, "run-tool").click()
        _wait(browser, _text_in("#result-status", "upstream HTTP 201"))
    (request,) = upstream.requests
    assert json.loads(request.body) == {"customer": {"name": "Ann"}, "express": True,
                                        "lines": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1}]}


def test_chat_shows_each_step_as_it_streams(served: str, browser: Any, llm: LenientLLM) -> None:
    from selenium.webdriver.common.by import By

    gate = threading.Event()
    llm.script(Reply(calls=[Call("getForecast", {"latitude": 52.52, "longitude": 13.41,
                                                 "current": ["temperature_2m"]})]),
               Reply(text="It is 3.5 °C in Berlin.", gate=gate))
    _sign_in(browser, served, WEATHER_KEY)
    browser.get(f"{served}/console/chat?agent=weather")
    box = browser.find_element(By.ID, "chat-input")
    box.send_keys("How warm is Berlin?")
    browser.find_element(By.ID, "chat-send").click()
    # The answer's first words are shown, and the step before them, while the model is still talking.
    _wait(browser, _text_in("#transcript .step", "→ ok"))
    _wait(browser, _text_in("#transcript .turn.assistant .content", "It"))
    assert "Berlin." not in browser.find_element(By.ID, "transcript").text
    gate.set()
    _wait(browser, _text_in("#transcript", "It is 3.5 °C in Berlin."))
    steps = [s.text for s in browser.find_elements(By.CSS_SELECTOR, "#transcript .step")]
    assert len(steps) == 1 and steps[0].startswith("⚙ getForecast") and "→ ok" in steps[0]
    screenshot(browser, "chat")


def test_approve_one_write_and_deny_another(served: str, browser: Any, llm: LenientLLM,
                                            upstream: RecordingServer) -> None:
    from selenium.webdriver.common.by import By

    llm.script(Reply(calls=[Call("createIssueComment", COMMENT)]), Reply(text="Commented."))
    _sign_in(browser, served, TRIAGE_KEY)
    browser.get(f"{served}/console/chat?agent=triage")
    browser.find_element(By.ID, "chat-input").send_keys("Acknowledge issue 7")
    browser.find_element(By.ID, "chat-send").click()
    _wait(browser, _text_in("#transcript", "waits for approval"))  # the pending approval, inline
    assert _writes(upstream) == []

    browser.get(f"{served}/console/approvals")  # the inbox holds it; approve it there
    cards = browser.find_elements(By.CSS_SELECTOR, ".approval")
    assert len(cards) == 1 and "createIssueComment" in cards[0].text
    screenshot(browser, "approvals")
    cards[0].find_element(By.CSS_SELECTOR, "button.approve").click()
    _wait(browser, _text_in(".approval .outcome", "Commented."))  # the resumed run's answer
    assert _writes(upstream) == ["/github/repos/acme/app/issues/7/comments"]  # exactly once
    assert cards[0].find_element(By.CSS_SELECTOR, "button.approve").get_attribute("disabled")

    llm.script(Reply(calls=[Call("createIssueComment", {**COMMENT, "body": "Closing as spam."})]),
               Reply(text="Understood, I left no comment."))
    browser.get(f"{served}/console/chat?agent=triage")
    browser.find_element(By.ID, "chat-input").send_keys("Call issue 7 spam")
    browser.find_element(By.ID, "chat-send").click()
    _wait(browser, _text_in("#transcript", "waits for approval"))
    reason = browser.find_element(By.CSS_SELECTOR, ".inline-approval input")
    reason.send_keys("not spam")
    browser.find_element(By.CSS_SELECTOR, ".inline-approval button.deny").click()
    _wait(browser, _text_in("#transcript", "Understood, I left no comment."))
    assert _writes(upstream) == ["/github/repos/acme/app/issues/7/comments"]  # the denied one never left
    tool_results = [m for m in llm.bodies()[-1]["messages"] if m.get("role") == "tool"]
    assert "not spam" in json.dumps(tool_results)  # the model learns why

    browser.get(f"{served}/console/audit?kind=decision")
    rows = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#audit-table tbody tr")]
    assert len(rows) == 2 and all("triage-bot" in r for r in rows)  # who decided
    assert "denied" in rows[0] and "approved" in rows[1]
    browser.get(f"{served}/console/audit")
    screenshot(browser, "audit")


def test_approving_a_run_started_on_the_responses_api_shows_its_answer(served: str, browser: Any, llm: LenientLLM,
                                                                      upstream: RecordingServer) -> None:
    from selenium.webdriver.common.by import By

    llm.script(Reply(calls=[Call("createIssueComment", COMMENT)]), Reply(text="Commented through Responses."))
    paused = httpx.post(f"{served}/v1/responses", json={"model": "triage", "input": "Acknowledge issue 7"},
                        headers={"Authorization": f"Bearer {TRIAGE_KEY}"}, timeout=30)
    assert paused.json()["gateway"]["pending_approvals"]
    _sign_in(browser, served, TRIAGE_KEY)
    browser.get(f"{served}/console/approvals")
    browser.find_element(By.CSS_SELECTOR, ".approval button.approve").click()
    _wait(browser, _text_in(".approval .outcome", "Commented through Responses."))
    assert "createIssueComment → 201" in browser.find_element(By.CSS_SELECTOR, ".approval .outcome").text
    assert _writes(upstream) == ["/github/repos/acme/app/issues/7/comments"]


def test_a_plain_keys_write_waits_for_an_approver_and_its_answer_is_its_own(served: str, browser: Any,
                                                                             llm: LenientLLM,
                                                                             upstream: RecordingServer) -> None:
    from selenium.webdriver.common.by import By

    llm.script(Reply(calls=[Call("createIssueComment", COMMENT)]), Reply(text="Commented for the user."))
    _sign_in(browser, served, PLAIN_TRIAGE_KEY)
    browser.get(f"{served}/console/chat?agent=triage")
    browser.find_element(By.ID, "chat-input").send_keys("Acknowledge issue 7")
    browser.find_element(By.ID, "chat-send").click()
    _wait(browser, _text_in("#transcript", "An approver decides it"))
    assert browser.find_elements(By.CSS_SELECTOR, ".inline-approval button") == []  # nothing to click
    run_page = browser.find_element(By.CSS_SELECTOR, ".inline-approval a").get_attribute("href")
    browser.get(f"{served}/console/approvals")
    (card,) = browser.find_elements(By.CSS_SELECTOR, ".approval")
    assert "Waits for an approver" in card.text and card.find_elements(By.TAG_NAME, "button") == []

    browser.find_element(By.ID, "signout").click()
    _wait(browser, lambda d: "/console/signin" in d.current_url)
    _sign_in(browser, served, ADMIN_KEY)
    browser.get(f"{served}/console/approvals")
    browser.find_element(By.CSS_SELECTOR, ".approval button.approve").click()
    _wait(browser, _text_in(".approval .outcome", "its answer is theirs"))
    assert "Commented for the user." not in browser.find_element(By.CSS_SELECTOR, ".approval .outcome").text
    assert _writes(upstream) == ["/github/repos/acme/app/issues/7/comments"]

    browser.find_element(By.ID, "signout").click()
    _wait(browser, lambda d: "/console/signin" in d.current_url)
    _sign_in(browser, served, PLAIN_TRIAGE_KEY)
    browser.get(run_page)
    assert "Commented for the user." in browser.find_element(By.ID, "run-answer").text


DECOY = """<!doctype html><title>You won</title><h1>Click the button to claim your prize</h1>
<iframe id="prize" src="{console}/console/approvals" width="900" height="600"></iframe>"""


def test_no_page_of_the_console_can_be_framed(served: str, browser: Any, llm: LenientLLM,
                                              upstream: RecordingServer) -> None:
    """The attack: a page on another port of 127.0.0.1 (the same site, so the SameSite cookie goes along) framed
    the approvals inbox of a signed-in admin, and one click approved a pending write."""
    from selenium.webdriver.common.by import By

    llm.script(Reply(calls=[Call("createIssueComment", COMMENT)]), Reply(text="Commented."))
    paused = httpx.post(f"{served}/v1/chat/completions", headers={"Authorization": f"Bearer {TRIAGE_KEY}"},
                        json={"model": "triage", "messages": [{"role": "user", "content": "ack 7"}]}, timeout=30)
    assert paused.json()["gateway"]["pending_approvals"]
    _sign_in(browser, served, ADMIN_KEY)
    with RecordingServer() as decoy:
        decoy.route("/", RecorderReply(200, DECOY.format(console=served), headers={"Content-Type": "text/html"}))
        browser.get(f"{decoy.url}/prize")
        assert "claim your prize" in browser.find_element(By.TAG_NAME, "h1").text
        browser.switch_to.frame(browser.find_element(By.ID, "prize"))
        assert browser.find_elements(By.CSS_SELECTOR, ".approval button.approve") == []  # nothing rendered to click
        browser.switch_to.default_content()
    assert _writes(upstream) == []
    browser.get(f"{served}/console/approvals")  # at home the inbox works as before
    assert browser.find_elements(By.CSS_SELECTOR, ".approval button.approve")


def test_after_sign_out_back_shows_nothing_of_the_viewer_who_left(served: str, browser: Any) -> None:
    """redteam45: at a shared machine, Back after sign-out showed the next person the audit log the last one read
    (the browser kept the page); a page of the console is never stored, so Back asks again and is sent to sign in."""
    from selenium.webdriver.common.by import By

    httpx.post(f"{served}/agents/triage/tools/getIssue", headers={"Authorization": f"Bearer {TRIAGE_KEY}"},
               json={"owner": "owner-of-the-one-who-left", "repo": "app", "issue_number": 7}, timeout=30)
    _sign_in(browser, served, TRIAGE_KEY)
    browser.get(f"{served}/console/audit")
    assert "owner-of-the-one-who-left" in browser.page_source
    browser.find_element(By.ID, "signout").click()
    _wait(browser, lambda d: "/console/signin" in d.current_url)
    browser.back()
    _wait(browser, lambda d: "/console/signin" in d.current_url)
    assert "owner-of-the-one-who-left" not in browser.page_source


def test_a_key_does_not_see_another_agent_and_admin_sees_all(served: str, browser: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    _sign_in(browser, served, WEATHER_KEY)
    assert [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#agent-list .card h2")] == ["weather"]
    browser.get(f"{served}/console/agents?q=issue")
    assert "getIssue" not in browser.page_source
    for page in ("/console/agents/triage", "/console/agents/triage/tools/getIssue"):
        browser.get(served + page)
        assert browser.find_element(By.ID, "page-error").text == "No agent 'triage' here."
    browser.get(f"{served}/console/chat")
    options = [o.text for o in browser.find_elements(By.CSS_SELECTOR, "#chat-agent option")]
    assert options == ["weather"]

    browser.get(f"{served}/console/")
    browser.find_element(By.ID, "signout").click()
    _wait(browser, lambda d: "/console/signin" in d.current_url)
    _sign_in(browser, served, ADMIN_KEY)
    cards = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#agent-list .card h2")]
    assert cards == ["weather", "triage"]
    screenshot(browser, "agents")
    for page in ("agents", "agents/triage", "agents/triage/tools/createIssueComment",
                 "agents/weather/tools/getForecast", "chat", "approvals", "audit", "health"):
        browser.get(f"{served}/console/{page}")
        assert _unlabelled(browser) == [], page
        assert csp_refusals(browser) == [], page  # the console's own script and styles are all it needs
    browser.get(f"{served}/console/agents")
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)  # the first Tab reaches the skip link
    assert browser.switch_to.active_element.text == "Skip to content"
    browser.get(f"{served}/console/health")
    assert "open-meteo" in browser.find_element(By.TAG_NAME, "main").text
    screenshot(browser, "health")


def test_an_approval_whose_resume_the_stopping_instance_cuts_says_so_on_its_card(
        tmp_path: Path, browser: Any, llm: LenientLLM, upstream: RecordingServer) -> None:
    """Approve on the console while the instance stops (SIGTERM, `--graceful-timeout 1`, the approved call held at
    the upstream): the card says the instance stopped and that the call was sent and may have run, from the 503 the
    console's decision door answers as the API's does (before: uvicorn's bare 500, shown as "Internal Server
    Error"), and the run gets its `stopped` row."""
    import openai
    from selenium.webdriver.common.by import By
    from serve_process import audit_rows, stopped_while_held

    llm.script(Reply(calls=[Call("slow")]), Reply(text="never asked: the instance stops first"))
    with stopped_while_held(tmp_path, upstream, llm.url, "sent", "    approval: always\n") as port:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0)
        client.chat.completions.create(model="ops", messages=[{"role": "user", "content": "go"}])
        browser.get(f"http://127.0.0.1:{port}/console/approvals")  # no `clients`: an open console
        browser.find_element(By.CSS_SELECTOR, ".approval button.approve").click()
        _wait(browser, _text_in(".approval .outcome", "The gateway instance stopped"))
    said = browser.find_element(By.CSS_SELECTOR, ".approval .outcome").text
    assert "The call was sent and may have run upstream" in said, said
    assert audit_rows(tmp_path, "chat")[0][0] == "stopped"
