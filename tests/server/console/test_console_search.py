"""The console's tool search is the gateway's (the one every door uses), not a filter of names."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from console_support import CONSOLE_AGENTS_YAML, TRIAGE_KEY
from recording_server import RecordingServer
from safety.safety_support import safe_gateway
from server_support import LenientLLM
from test_console_access import signed_in


@pytest.fixture
def served(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Iterator[str]:
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=CONSOLE_AGENTS_YAML) as (url, _):
        yield url


def _listed(page: str, agent: str = "triage") -> list[str]:
    return re.findall(rf'href="/console/agents/{agent}/tools/([\w-]+)"', page)


def test_an_agents_search_finds_tools_by_what_is_asked_best_first(served: str) -> None:
    client, _ = signed_in(served, TRIAGE_KEY)
    everything = _listed(client.get("/console/agents/triage").text)
    assert {"getRepo", "listIssues", "getIssue", "createIssueComment"} <= set(everything)
    found = _listed(client.get("/console/agents/triage", params={"q": "which bugs are open"}).text)
    # no tool's text holds "bugs": a filter of names finds none; the search reads bugs as issues, all of them first;
    # getRepo only after them, for what it answers (`open_issues_count`: gateway.offer.answer_text)
    assert found[0] == "listIssues" and set(found[:3]) == {"listIssues", "getIssue", "createIssueComment"}
    assert found[3:] in ([], ["getRepo"])
    nothing = client.get("/console/agents/triage", params={"q": "weather forecast"}).text
    assert _listed(nothing) == [] and "Tool search finds nothing" in nothing  # a score of 0 is not listed


def test_the_search_of_every_agent_is_the_same_search(served: str) -> None:
    client, _ = signed_in(served, TRIAGE_KEY)
    page = client.get("/console/agents", params={"q": "leave a comment on the bug"}).text
    assert _listed(page)[0] == "createIssueComment"
