"""`gateway mcp` over stdio lists its tools before it imports what only a call needs, and the call still runs
through the whole pipeline once it comes (issue #31: a desktop client waits for the listing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import pytest
from recording_server import RecordingServer
from server_support import FORECAST, ROOT, LenientLLM, write_project

CALL_ONLY = [
    "gateway.execution.executor",  # the executor and the stages of the call pipeline
    "gateway.assembly.composition",
    "gateway.server.direct_call",  # the plans a call runs on
    "gateway.providers.anthropic",  # the provider adapters (never needed over MCP)
    "prometheus_client",  # nothing is counted over stdio
]
"""Modules `gateway mcp` needs only once a tool is called (or never), each the root of an import tree."""
HTTP_ONLY = [
    "gateway.server.supervision",  # the HTTP half of the safety layer: client keys, routes, resumes
    "gateway.server.auth",  # client keys and wrong keys, the resource server's middleware
    "gateway.server.routes",
    "gateway.identity.resource",  # the OAuth resource server (gateway.auth)
    "gateway.identity.connections",  # users' connections: built at the first call that reaches the executor
    "gateway.loop",  # the chat loop (approvals are decided in `gateway approvals`, not over stdio)
    "httpx",  # the gateway's upstream client library (the SDK brings its own, httpx2)
]
"""Modules only the HTTP door (`gateway serve`) needs: the stdio door's safety layer is the one every door shares."""
SEARCH_ONLY = [
    "gateway.offer.index",  # BM25 over the catalog's index (the index itself comes with the cached catalog)
    "gateway.offer.embeddings",
]
"""Modules only a search needs (this agent has no tool search), and the compiler only a spec it compiles."""
OTHER_DOORS = [
    "gateway.dialects.strict_decode",  # OpenAI's strict mode: the MCP door renders its own format only (a view
    "gateway.dialects.strict_limits",  # measures every format only for a tool over its budget)
    "gateway.loop_types",  # the loop's types: a paused run is resumed by `gateway approvals` or the HTTP door
    "gateway.providers.deferred",  # a provider's own tool search (`native`): nothing is deferred over MCP
]
"""Modules of what other doors render or run."""


def _imported(importtime: str) -> set[str]:
    """The modules named in `python -X importtime` lines (an import statement's; `importlib.import_module`, which a
    package's PEP 562 names use, is not logged, but what that module imports by statement is)."""
    return {line.rsplit("|", 1)[1].strip() for line in importtime.splitlines() if line.startswith("import time:")}


def _exchange(process: subprocess.Popen[bytes], message: dict[str, Any]) -> dict[str, Any] | None:
    stdin, stdout = process.stdin, process.stdout
    assert stdin is not None and stdout is not None
    stdin.write(json.dumps(message).encode() + b"\n")
    stdin.flush()
    if "id" not in message:
        return None
    answer: dict[str, Any] = json.loads(stdout.readline())
    assert answer.get("id") == message["id"], answer
    return answer


@pytest.mark.slow
def test_stdio_lists_before_importing_the_call_machinery_and_then_calls_through_it(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    specs, agents = write_project(tmp_path, llm.url, upstream.url)
    errors_path = tmp_path / "stderr.txt"
    env = {**os.environ, "GATEWAY_CACHE_DIR": str(tmp_path / "cache")}
    # A desktop client starts a gateway whose specs were compiled before (the warm cache).
    subprocess.run([sys.executable, "-m", "gateway", "validate", "--specs", str(specs), "--agents", str(agents)],
                   cwd=ROOT, env=env, check=True, capture_output=True)
    errors: IO[bytes]
    with errors_path.open("wb") as errors, subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "gateway", "mcp", "weather", "--specs", str(specs),
             "--agents", str(agents)], cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=errors) as process:
        try:
            _exchange(process, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}})
            _exchange(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            listed = _exchange(process, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            # stderr is unbuffered: every import made before the listing was written is in the file now
            before_listing = _imported(errors_path.read_text())
            called = _exchange(process, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                "name": "getForecast", "arguments": {"latitude": 52.52, "longitude": 13.41}}})
        finally:
            assert process.stdin is not None
            process.stdin.close()
            process.wait(timeout=60)
    assert listed is not None and [tool["name"] for tool in listed["result"]["tools"]] == ["getForecast"]
    assert "gateway.server.mcp.stdio" in before_listing  # the importtime lines are there
    assert sorted(before_listing.intersection(CALL_ONLY)) == []
    assert sorted(before_listing.intersection(HTTP_ONLY)) == []
    assert sorted(before_listing.intersection(SEARCH_ONLY)) == []
    assert sorted(before_listing.intersection(OTHER_DOORS)) == []
    assert called is not None and called["result"]["isError"] is False
    assert called["result"]["structuredContent"] == FORECAST
    assert upstream.last.path == "/meteo/v1/forecast"
    after_call = _imported(errors_path.read_text())
    assert {"gateway.execution.executor", "gateway.assembly.composition", "gateway.identity.connections"} <= after_call
    assert "gateway.server.supervision" not in after_call  # the whole pipeline ran without the HTTP half
