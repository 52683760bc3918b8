"""Stored XSS in a real browser (redteam45): what an attacker writes reaches every console page as text, never as
markup. The attacker shapes an upstream's answers (a tool result), a model that follows injected instructions
(its arguments, its answer, a write waiting for approval) and a spec from the internet (its descriptions,
examples and enum values). Each page is opened in headless Chromium; an element the payload would make, a script
it would run, or a refusal the page's CSP logs for one would each say the text became markup."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from console_support import ADMIN_KEY, CONSOLE_AGENTS_YAML, TRIAGE_KEY, chromium, csp_refusals
from recording_server import RecordingServer
from recording_server import Reply as RecorderReply
from safety.safety_support import safe_gateway
from scripted_llm import Call, Reply
from server_support import LenientLLM
from test_console_browser import _sign_in, _text_in, _wait

pytestmark = pytest.mark.slow

PAYLOAD = ('"\'><img data-pwned src=x onerror="window.pwned=1"><svg data-pwned onload="window.pwned=1">'
           '</textarea></script><script>window.pwned=1</script><a data-pwned href="javascript:window.pwned=1">'
           'x</a>{{7*7}}')
NOTES_SPEC = {
    "openapi": "3.1.0",
    "info": {"title": f"Notes {PAYLOAD}", "version": "1", "description": PAYLOAD},
    "paths": {"/notes/{owner}": {"post": {
        "operationId": "writeNote", "summary": PAYLOAD, "description": PAYLOAD,
        "parameters": [{"name": "owner", "in": "path", "required": True, "description": PAYLOAD,
                        "schema": {"type": "string", "default": PAYLOAD, "examples": [PAYLOAD]}}],
        "requestBody": {"content": {"application/json": {"schema": {
            "type": "object", "properties": {
                "kind": {"type": "string", "enum": [PAYLOAD, "plain"], "description": PAYLOAD},
                "text": {"type": "string", "title": PAYLOAD, "default": PAYLOAD}}}}}},
        "responses": {"200": {"description": PAYLOAD}}}}},
}
NOTES_YAML = CONSOLE_AGENTS_YAML.replace("agents:\n", """\
  notes: {{base_url: "{upstream}/notes-api"}}
agents:
  notes:
    model: openai/gpt-test
    description: "notes"
    approval: writes
    tools: [{{api: notes}}]
""", 1).replace("agents: [triage], approver: true", "agents: [triage, notes], approver: true")
MARKUP = """return {pwned: window.pwned === 1, elements: document.querySelectorAll('[data-pwned]').length,
                 scripts: Array.from(document.scripts).filter((s) => !s.src).length};"""


@pytest.fixture
def served(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Iterator[str]:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "notes.json").write_text(json.dumps(NOTES_SPEC))
    upstream.route("/notes-api/", lambda request: RecorderReply(200, {"saved": PAYLOAD, "echo": PAYLOAD}))
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=NOTES_YAML) as (url, _):
        yield url


def _no_markup(driver: Any, page: str) -> None:
    assert driver.execute_script(MARKUP) == {"pwned": False, "elements": 0, "scripts": 0}, page
    assert csp_refusals(driver) == [], page


def test_attackers_text_is_text_on_every_page(served: str, llm: LenientLLM, upstream: RecordingServer) -> None:
    from selenium.webdriver.common.by import By

    # A run whose model was told, by a tool result, to write the payload everywhere it can: a read whose answer
    # is the payload, then a write waiting for approval with the payload as its arguments, then the payload said.
    llm.script(Reply(calls=[Call("writeNote", {"owner": "read-only", "text": PAYLOAD})]),
               Reply(text=PAYLOAD))
    started = httpx.post(f"{served}/v1/chat/completions", headers={"Authorization": f"Bearer {TRIAGE_KEY}"},
                         json={"model": "notes", "messages": [{"role": "user", "content": PAYLOAD}]}, timeout=30)
    assert started.status_code == 200, started.text
    run_id = started.json()["id"]
    assert started.json()["gateway"]["pending_approvals"]
    with chromium() as driver:
        _sign_in(driver, served, ADMIN_KEY)
        pages = ["/console/agents", "/console/agents/notes", "/console/agents/notes/tools/writeNote",
                 "/console/approvals", "/console/audit", f"/console/runs/{run_id}", "/console/health",
                 "/console/chat?agent=notes"]
        for page in pages:
            driver.get(served + page)
            _no_markup(driver, page)
        driver.get(served + "/console/approvals")
        assert "<img data-pwned src=x" in driver.find_element(By.CSS_SELECTOR, ".approval").text  # shown, as text
        # approving it runs the write; its answer (the upstream's payload) is shown in the page
        llm.script(Reply(text=PAYLOAD))
        driver.find_element(By.CSS_SELECTOR, ".approval button.approve").click()
        _wait(driver, _text_in(".approval .outcome", "Approved"))
        _no_markup(driver, "an approval's outcome")
        # the try-out form with the spec's defaults, run: the upstream's answer in the result box
        driver.get(served + "/console/agents/notes/tools/writeNote")
        driver.find_element(By.ID, "raw-json").click()
        raw_box = driver.find_element(By.ID, "raw-arguments")
        raw_box.clear()
        raw_box.send_keys(json.dumps({"owner": "me", "text": "x"}))
        driver.find_element(By.ID, "run-tool").click()
        _wait(driver, lambda d: d.find_element(By.ID, "result-status").text not in ("", "Running…"))
        _no_markup(driver, "a try-out's result")
        # a chat in the page: the model's streamed answer and its step
        llm.script(Reply(calls=[Call("writeNote", {"owner": PAYLOAD, "text": PAYLOAD})]), Reply(text=PAYLOAD))
        driver.get(served + "/console/chat?agent=notes")
        driver.find_element(By.ID, "chat-input").send_keys("go")
        driver.find_element(By.ID, "chat-send").click()
        _wait(driver, _text_in("#transcript", "{{7*7}}"))
        _no_markup(driver, "a chat")
        for page in ("/console/audit", f"/console/runs/{run_id}"):
            driver.get(served + page)
            _no_markup(driver, page)
            assert "{{7*7}}" in driver.find_element(By.TAG_NAME, "main").text, page
