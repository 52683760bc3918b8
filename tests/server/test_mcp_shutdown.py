"""An MCP caller whose `gateway serve` is stopped (SIGTERM) while its tool call runs: a real process, a real slow
upstream on 127.0.0.1, the official `mcp` client in both protocol eras (the 2025 session, whose GET stream the
stopping instance closes at once, and the stateless 2026-07-28 protocol)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from recording_server import RecordingServer, Reply
from serve_process import SLOW_AGENTS, start_serve, write_slow_project

from gateway.safety.audit import CANCELLED, CANCELLED_UNSENT

pytestmark = pytest.mark.anyio

MODES = ["legacy", "auto"]  # the 2025 handshake (a session and its GET stream), the 2026-07-28 protocol

HELD_BY_A_HOOK = """\
    hooks:
      - {on: before_tool_call, url: "UPSTREAM/hook", timeout: 30}
"""
"""A hook that answers late: the call waits in it, before its audit row and before anything is sent."""


@asynccontextmanager
async def _serving(folder: Path, upstream: RecordingServer, graceful: int,
                   agents: str = SLOW_AGENTS) -> AsyncIterator[tuple[subprocess.Popen[bytes], str]]:
    write_slow_project(folder, upstream.url, agents)
    process, port = start_serve(folder, "--graceful-timeout", str(graceful))
    try:
        yield process, f"http://127.0.0.1:{port}/mcp/ops"
    finally:
        process.kill()


async def _stop_once_asked(process: subprocess.Popen[bytes], upstream: RecordingServer, path: str) -> None:
    """SIGTERM to the gateway once the call reached `path` on the upstream (the call is in flight)."""
    while not any(request.path == path for request in upstream.requests):
        await anyio.sleep(0.02)
    process.send_signal(signal.SIGTERM)


async def _call_while_stopped(url: str, mode: str, process: subprocess.Popen[bytes], upstream: RecordingServer,
                              path: str) -> Any:
    """`slow` called by a client that listed the tools first, the gateway stopped once the call reached `path`:
    the result, or the MCPError the client raised."""
    with anyio.fail_after(60):  # a hang guard only
        async with Client(url, mode=mode) as client, anyio.create_task_group() as group:
            await client.list_tools()  # as an agent host does: its model needs the list
            group.start_soon(_stop_once_asked, process, upstream, path)
            try:
                return await client.call_tool("slow", {})
            except MCPError as error:
                return error


def _audit(folder: Path) -> list[dict[str, Any]]:
    """The tool rows of the stopped gateway's store, read by `gateway audit` (the operator's export)."""
    done = subprocess.run([sys.executable, "-m", "gateway", "audit", "--json"], cwd=folder, capture_output=True,
                          text=True, timeout=60, check=True)
    return [row for line in done.stdout.splitlines() if (row := json.loads(line))["kind"] == "tool"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_in_flight_is_answered_on_its_own_request_while_the_instance_stops(
        tmp_path: Path, upstream: RecordingServer, mode: str) -> None:
    # What the operator trial (user46) saw lost is delivered: the answer comes on the call's own POST (JSON), the
    # 2025 session's GET stream, closed at once by the stopping instance, is not needed for it.
    upstream.route("/slow", Reply(200, {"done": True}, delay=2))
    async with _serving(tmp_path, upstream, graceful=20) as (process, url):
        result = await _call_while_stopped(url, mode, process, upstream, "/slow")
        assert process.wait(30) in (0, -signal.SIGTERM)
    assert not isinstance(result, MCPError), result
    assert result.is_error is False
    assert result.structured_content == {"done": True}
    assert [row["status"] for row in _audit(tmp_path)] == ["ok"]


CUTS = {
    # what the call waits on when the graceful timeout ends: the upstream (sent), or a hook before its audit row
    "sent": ("/slow", "", "was sent and may have run upstream", CANCELLED),
    "not sent": ("/hook", HELD_BY_A_HOOK, "The call was not sent: nothing ran upstream", CANCELLED_UNSENT),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sent", list(CUTS))
async def test_a_call_cut_by_the_graceful_timeout_says_the_instance_stopped_and_whether_it_was_sent(
        tmp_path: Path, upstream: RecordingServer, mode: str, sent: str) -> None:
    held_at, hooks, said, row = CUTS[sent]
    upstream.route(held_at, Reply(200, {"done": True}, delay=8))
    agents = SLOW_AGENTS + hooks.replace("UPSTREAM", upstream.url)
    async with _serving(tmp_path, upstream, graceful=1, agents=agents) as (process, url):
        error = await _call_while_stopped(url, mode, process, upstream, held_at)
        assert process.wait(30) in (0, -signal.SIGTERM)
    assert isinstance(error, MCPError), error  # before: "Server returned an error response" (uvicorn's bare 500)
    assert error.error.data == {"status": 503, "code": "instance_stopped", "sent": sent}
    assert "The gateway instance stopped" in error.error.message
    assert said in error.error.message
    assert [(r["status"], r["error"]) for r in _audit(tmp_path)] == [("transport_error", row)]
    assert sum(request.path == "/slow" for request in upstream.requests) == (sent == "sent")


async def test_a_call_the_sessions_task_answers_is_told_it_is_not_known_whether_it_was_sent(
        tmp_path: Path, upstream: RecordingServer) -> None:
    # A 2025 session's `tools/call` whose version header is another one the SDK takes (2025-03-26, not the session's
    # 2025-06-18) is not answered in the request's own task but by the SDK's session manager, in the session's task:
    # the door cannot count what that task sends, so the cut answer says it does not know (the `unknown` branch).
    upstream.route("/slow", Reply(200, {"done": True}, delay=8))
    async with _serving(tmp_path, upstream, graceful=1) as (process, url):
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        with anyio.fail_after(60):  # a hang guard only
            async with httpx.AsyncClient(headers=headers, timeout=60) as client:
                opened = await client.post(url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"}}})
                assert opened.status_code == 200, opened.text
                session = {"mcp-session-id": opened.headers["mcp-session-id"]}
                await client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                                  headers={**session, "mcp-protocol-version": "2025-06-18"})
                async with anyio.create_task_group() as group:
                    group.start_soon(_stop_once_asked, process, upstream, "/slow")
                    answer = await client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                          "params": {"name": "slow", "arguments": {}}},
                                               headers={**session, "mcp-protocol-version": "2025-03-26"})
        assert process.wait(30) in (0, -signal.SIGTERM)
    assert answer.status_code == 503, answer.text
    error = answer.json()["error"]
    assert error["data"] == {"status": 503, "code": "instance_stopped", "sent": "unknown"}
    assert "Whether the call was sent is not known here" in error["message"]
    assert sum(request.path == "/slow" for request in upstream.requests) == 1  # it was: the audit row says so
    assert [row["status"] for row in _audit(tmp_path)] in (["transport_error"], ["running"])
