"""The console tests' gateway (the safety layer on, three client keys: two per-agent and one admin) and
a headless Chromium driven by Selenium (Debian's chromium + chromium-driver; skipped when absent)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from safety.safety_support import CLIENTS_YAML, SAFE_AGENTS_YAML, TRIAGE_KEY, WEATHER_KEY  # noqa: F401

ADMIN_KEY = "ck-admin-0a1b2c3d4e5f6789"
PLAIN_TRIAGE_KEY = "ck-triage-user-5e4d3c2b1a0f"
"""A plain key of the triage agent: it may use it, but not decide its approvals (triage-bot is an approver)."""
CONSOLE_AGENTS_YAML = SAFE_AGENTS_YAML + (f"  ops: {{{{key: {ADMIN_KEY}, admin: true, agents: []}}}}\n"
                                          f"  triage-user: {{{{key: {PLAIN_TRIAGE_KEY}, agents: [triage]}}}}\n")
CHROMIUM = os.environ.get("GATEWAY_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("GATEWAY_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
SCREENSHOTS = os.environ.get("GATEWAY_CONSOLE_SCREENSHOTS")
"""A folder to save the main pages' screenshots in (docs/console.md's pictures: `docs/`); unset: none saved."""


@contextmanager
def chromium(*arguments: str) -> Iterator[Any]:
    """A headless Chromium at 1280x800 (with these extra command-line `arguments`), or a skip saying what is
    missing."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (pip install selenium)")
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (Path(path).is_file() or shutil.which(path)):
            pytest.skip(f"{path} is absent (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console errors, CSP refusals among them
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800",
                     "--disable-gpu", "--no-first-run", "--disable-extensions", *arguments):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_window_size(1280, 800)
    try:
        yield driver
    finally:
        driver.quit()


def csp_refusals(driver: Any) -> list[str]:
    """What the page's Content-Security-Policy refused since the last call (the browser's console log)."""
    return [e["message"] for e in driver.get_log("browser") if "Content Security Policy" in e["message"]]


def screenshot(driver: Any, name: str) -> None:
    if SCREENSHOTS:
        folder = Path(SCREENSHOTS)
        folder.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(folder / f"console-{name}.png"))
