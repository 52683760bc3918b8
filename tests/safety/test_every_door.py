"""One tool call through every door: the same pipeline, so the same audit row, limits and approval rules.

The doors: chat (scripted LLM), the direct call, MCP over HTTP (the official `mcp` client), MCP over stdio (a
`gateway mcp` subprocess), `gateway call` and `gateway chat` (in-process). They share one store file, which
agents.yaml names, as `gateway serve` and the commands do in real use.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from recording_server import RecordingServer
from recording_server import Reply as UpstreamReply
from scripted_llm import Call, Reply
from server_support import AGENTS_YAML, ROOT, LenientLLM

from gateway.cli.commands import main
from gateway.cli.terminal_chat import chat_command

from .safety_support import API_TOKEN, safe_gateway

ARGS = {"latitude": 52.52, "longitude": 13.41, "current": ["temperature_2m"], "timezone": "Europe/Berlin"}
CARRYING = {**ARGS, "timezone": API_TOKEN}
"""`timezone` carries a configured secret (the github api's token): refused unsent, and every row shows it
redacted."""
COMMENT = {"owner": "acme", "repo": "app", "issue_number": 7, "body": "On it."}
DOORS = ["chat", "direct", "mcp-http", "mcp-stdio", "gateway call", "gateway chat"]


def _yaml(settings: str = "") -> str:
    return AGENTS_YAML + "gateway:\n  store: state.db\n" + settings


class Doors:
    """Each door, called once with one tool call; returns what the caller saw, reduced to (ok, error_type)."""

    def __init__(self, folder: Path, url: str, llm: LenientLLM) -> None:
        self.folder, self.url, self.llm = folder, url, llm
        self.common = ["--specs", str(folder / "specs"), "--agents", str(folder / "agents.yaml"), "--no-cache"]

    def call(self, door: str, agent: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, str | None]:
        return getattr(self, "_" + door.replace(" ", "_").replace("-", "_"))(agent, tool, arguments)

    def _chat(self, agent: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, str | None]:
        self.llm.replies.clear()  # a paused run left its last reply unread
        self.llm.script(Reply(calls=[Call(tool, arguments)]), Reply(text="done"))
        answer = httpx.post(f"{self.url}/v1/chat/completions", timeout=30,
                            json={"model": agent, "messages": [{"role": "user", "content": "go"}]}).json()
        if answer["gateway"]["pending_approvals"]:
            return False, "approval_pending"
        (step,) = answer["gateway"]["steps"]
        return step["ok"], step["error_type"]

    def _direct(self, agent: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, str | None]:
        answer = httpx.post(f"{self.url}/agents/{agent}/tools/{tool}", json=arguments, timeout=30).json()
        result = answer.get("result", answer)
        return result["ok"], result["error_type"]

    def _mcp_http(self, agent: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, str | None]:
        async def call() -> Any:
            async with Client(f"{self.url}/mcp/{agent}") as client:
                return await client.call_tool(tool, arguments)

        return _mcp_outcome(anyio.run(call))

    def _mcp_stdio(self, agent: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, str | None]:
        params = StdioServerParameters(command=sys.executable, args=["-m", "gateway", "mcp", agent, *self.common],
                                       cwd=str(ROOT))

        async def call() -> Any:
            async with Client(params) as client:
                return await client.call_tool(tool, arguments)

        return _mcp_outcome(anyio.run(call))

    def _gateway_call(self, agent: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, str | None]:
        out = io.StringIO()
        stdout, sys.stdout = sys.stdout, out
        try:
            main(["call", *self.common, agent, tool, "--args", json.dumps(arguments)])
        finally:
            sys.stdout = stdout
        result = json.loads(out.getvalue())
        return result["ok"], result["error_type"]

    def _gateway_chat(self, agent: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, str | None]:
        self.llm.replies.clear()  # a paused run left its last reply unread
        self.llm.script(Reply(calls=[Call(tool, arguments)]), Reply(text="done"))
        err = io.StringIO()
        asked: list[str] = []

        def ask(prompt: str) -> str:
            asked.append(prompt)
            return "n"  # the terminal's human refuses

        chat_command(self.folder / "specs", self.folder / "agents.yaml", agent, "go", use_cache=False, ask=ask,
                     out=io.StringIO(), err=err)
        if asked:
            return False, "approval_pending"
        lines = [line for line in err.getvalue().splitlines() if line.startswith(f"<- {tool}")]
        assert lines, err.getvalue()
        line = lines[0]
        if "failed: " in line:
            return False, line.split("failed: ", 1)[1].split(":", 1)[0]
        return True, None


def _mcp_outcome(result: Any) -> tuple[bool, str | None]:
    if not result.is_error:
        return True, None
    text = result.content[0].text
    return False, text.split("(", 1)[1].split(")", 1)[0]  # "Error (<error_type>): ..."


@pytest.fixture
def project(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, request: pytest.FixtureRequest
            ) -> Iterator[tuple[Doors, httpx.Client]]:
    settings = getattr(request, "param", "")
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=_yaml(settings),
                      store=tmp_path / "state.db") as (url, _), httpx.Client(base_url=url, timeout=30) as client:
        yield Doors(tmp_path, url, llm), client


def _tool_rows(client: httpx.Client, tool: str) -> list[dict[str, Any]]:
    rows = client.get("/audit", params={"limit": 100}).json()["data"]
    return [r for r in reversed(rows) if r["tool"] == tool]


@pytest.mark.slow
def test_one_call_through_every_door_leaves_the_same_audit_row(project: tuple[Doors, httpx.Client],
                                                               upstream: RecordingServer) -> None:
    doors, client = project
    outcomes = {door: doors.call(door, "weather", "getForecast", ARGS) for door in DOORS}
    assert outcomes == dict.fromkeys(DOORS, (True, None))
    assert len([r for r in upstream.requests if r.path == "/meteo/v1/forecast"]) == len(DOORS)
    rows = _tool_rows(client, "getForecast")
    assert len(rows) == len(DOORS)  # one row per call, whatever the door
    assert {(r["tool"], r["status"], r["agent"]) for r in rows} == {("getForecast", "ok", "weather")}
    assert all(r["arguments"] == ARGS for r in rows), rows


@pytest.mark.slow
def test_a_credential_in_the_arguments_is_refused_unsent_on_every_door(project: tuple[Doors, httpx.Client],
                                                                       upstream: RecordingServer) -> None:
    """Before: every door sent the github api's token to the weather api as `timezone` (only the row hid it)."""
    doors, client = project
    outcomes = {door: doors.call(door, "weather", "getForecast", CARRYING) for door in DOORS}
    assert outcomes == dict.fromkeys(DOORS, (False, "credential_in_arguments"))
    assert upstream.requests == []
    rows = _tool_rows(client, "getForecast")
    assert len(rows) == len(DOORS)  # one row per refused call, whatever the door
    assert {(r["status"], r["agent"]) for r in rows} == {("credential_in_arguments", "weather")}
    assert all(r["arguments"] == {**ARGS, "timezone": "[REDACTED]"} for r in rows), rows
    assert API_TOKEN not in json.dumps(rows)


@pytest.mark.slow
@pytest.mark.parametrize("project", ["  rate_limits:\n    tools:\n      getForecast: 1/h\n"], indirect=True)
def test_a_rate_limit_applies_on_every_door(project: tuple[Doors, httpx.Client], upstream: RecordingServer) -> None:
    doors, client = project
    first, *others = DOORS
    assert doors.call(first, "weather", "getForecast", ARGS) == (True, None)
    for door in others:  # the bucket is shared through the store: every later door is refused
        assert doors.call(door, "weather", "getForecast", ARGS) == (False, "rate_limited"), door
    assert len([r for r in upstream.requests if r.path == "/meteo/v1/forecast"]) == 1
    statuses = [r["status"] for r in _tool_rows(client, "getForecast")]
    assert statuses == ["ok", *["rate_limited"] * len(others)]


@pytest.mark.slow
def test_an_approval_rule_applies_on_every_door(project: tuple[Doors, httpx.Client],
                                                upstream: RecordingServer) -> None:
    doors, client = project
    for door in DOORS:
        assert doors.call(door, "triage", "createIssueComment", COMMENT) == (False, "approval_pending"), door
    assert not any(r.method == "POST" for r in upstream.requests)  # no write ran without a human
    # Every door but `gateway chat` (whose human answers in the terminal) left the call waiting in the store.
    pending = client.get("/approvals").json()["data"]
    assert len(pending) == len(DOORS) - 1 and {p["tool"] for p in pending} == {"createIssueComment"}


@pytest.mark.slow
def test_invalid_arguments_are_refused_before_an_approval_is_queued(project: tuple[Doors, httpx.Client],
                                                                    upstream: RecordingServer) -> None:
    doors, client = project
    invalid = {**COMMENT, "issue_number": -1.5}
    for door in DOORS:
        assert doors.call(door, "triage", "createIssueComment", invalid) == (False, "invalid_arguments"), door
    assert client.get("/approvals").json()["data"] == []  # nobody is asked to approve a call that cannot run
    assert not any(r.method == "POST" for r in upstream.requests)


@pytest.mark.slow
def test_a_body_that_breaks_the_output_schema_is_the_same_failure_on_every_door(
        project: tuple[Doors, httpx.Client], upstream: RecordingServer) -> None:
    doors, client = project
    upstream.route("/meteo/v1/forecast", UpstreamReply(200, {"latitude": "north"}))  # no longitude, a text latitude
    outcomes = {door: doors.call(door, "weather", "getForecast", ARGS) for door in DOORS}
    assert outcomes == dict.fromkeys(DOORS, (False, "invalid_output"))
    assert {r["status"] for r in _tool_rows(client, "getForecast")} == {"invalid_output"}


@pytest.mark.slow
def test_a_call_approved_in_the_terminal_is_audited_with_its_approval(project: tuple[Doors, httpx.Client],
                                                                      upstream: RecordingServer) -> None:
    doors, client = project
    doors.llm.replies.clear()
    doors.llm.script(Reply(calls=[Call("createIssueComment", COMMENT)]), Reply(text="Commented."))
    code = chat_command(doors.folder / "specs", doors.folder / "agents.yaml", "triage", "go", use_cache=False,
                        ask=lambda prompt: "y", out=io.StringIO(), err=io.StringIO())
    assert code == 0 and any(r.method == "POST" for r in upstream.requests)
    (row,) = _tool_rows(client, "createIssueComment")
    assert row["status"] == "ok" and (row["approval"] or "").startswith("apr_")
