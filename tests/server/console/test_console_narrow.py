"""The console on a phone (390 px wide, as an iPhone 12-15 shows it) in a real browser: every section and
Sign out can be reached, and no page asks for a file it may not have (the browser's own `/favicon.ico`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from console_support import TRIAGE_KEY, chromium, screenshot
from recording_server import RecordingServer
from safety.safety_support import safe_gateway
from server_support import LenientLLM

pytestmark = pytest.mark.slow

PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 3, "mobile": True}
SHOWN = """
const width = document.documentElement.clientWidth;
return Array.from(document.querySelectorAll(arguments[0])).map((element) => {
  const box = element.getBoundingClientRect();
  const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
  const shown = box.width > 0 && box.left >= 0 && box.right <= width && hit !== null && element.contains(hit);
  return [element.textContent.trim(), shown];
});
"""


@pytest.fixture
def phone(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Iterator[tuple[Any, str]]:
    with safe_gateway(tmp_path, llm.url, upstream.url) as (url, _), chromium() as driver:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", PHONE)
        try:
            yield driver, url
        finally:
            driver.get("about:blank")


def _sign_in(driver: Any, url: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{url}/console/")
    WebDriverWait(driver, 20).until(lambda d: "/console/signin" in d.current_url)
    driver.find_element(By.ID, "key").send_keys(TRIAGE_KEY, Keys.ENTER)
    WebDriverWait(driver, 20).until(lambda d: d.current_url.endswith("/console/agents"))


def test_every_section_and_sign_out_are_on_screen_at_390_px(phone: tuple[Any, str]) -> None:
    driver, url = phone
    _sign_in(driver, url)
    for page in ("agents", "approvals", "audit", "health"):
        driver.get(f"{url}/console/{page}")
        assert driver.execute_script("return document.documentElement.clientWidth") == PHONE["width"]
        links = driver.execute_script(SHOWN, "header.top nav a")
        assert [name for name, _ in links] == ["Agents", "Chat", "Approvals", "Runs and audit", "Health"]
        assert [name for name, shown in links if not shown] == [], page
        assert driver.execute_script(SHOWN, "#signout") == [["Sign out", True]], page
        # The header does not widen the page: nothing to scroll sideways for.
        assert driver.execute_script("return document.querySelector('header.top').scrollWidth") <= PHONE["width"]
    screenshot(driver, "phone")


def test_no_console_page_logs_a_failed_request(phone: tuple[Any, str]) -> None:
    driver, url = phone
    driver.get(f"{url}/console/signin")
    _sign_in(driver, url)
    for page in ("agents", "approvals", "audit", "health", "agents/triage"):
        driver.get(f"{url}/console/{page}")
    failed = [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert failed == []
