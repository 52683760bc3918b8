from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from recording_server import RecordingServer, Reply
from server_support import FORECAST, ISSUE, ROOT, LenientLLM, write_project

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]  # the 2026-07-28 protocol (the client's default) and the 2025 handshake


@pytest.mark.parametrize("mode", MODES)
async def test_streamable_http_lists_exact_schemas(gw: tuple[str, Any], mode: str) -> None:
    url, app = gw
    catalog = app.state.gateway.current.runtime.catalog
    async with Client(f"{url}/mcp/triage", mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert list(tools) == ["getRepo", "listIssues", "getIssue", "createIssueComment"]
    assert tools["getIssue"].input_schema == catalog.get("getIssue").input_schema
    assert tools["getIssue"].output_schema == catalog.get("getIssue").output_schema
    list_output = catalog.get("listIssues").output_schema
    assert list_output["type"] == "array"
    if mode == "legacy":  # the 2025 protocol wants an object at the root: wrapped, same schema inside
        assert tools["listIssues"].output_schema["properties"]["result"]["items"] == list_output["items"]
    else:
        assert tools["listIssues"].output_schema == list_output
    assert tools["getIssue"].annotations.read_only_hint is True
    assert tools["createIssueComment"].annotations.read_only_hint is False


@pytest.mark.parametrize("mode", MODES)
async def test_streamable_http_calls_through_the_executor(gw: tuple[str, Any], upstream: RecordingServer,
                                                          mode: str) -> None:
    url, _ = gw
    async with Client(f"{url}/mcp/weather", mode=mode) as client:
        result = await client.call_tool("getForecast", {"latitude": 52.52, "longitude": 13.41,
                                                        "current": ["temperature_2m"]})
        assert result.is_error is False
        assert result.structured_content == FORECAST
        assert upstream.last.path == "/meteo/v1/forecast"
        assert dict(upstream.last.query)["current"] == "temperature_2m"

        invalid = await client.call_tool("getForecast", {"latitude": "north"})
        assert invalid.is_error is True
        assert "invalid_arguments" in invalid.content[0].text

        upstream.route("/meteo/", Reply(400, {"error": True, "reason": "Latitude must be in range"}))
        failed = await client.call_tool("getForecast", {"latitude": 1, "longitude": 2})
        assert failed.is_error is True
        assert "Latitude must be in range" in failed.content[0].text


async def test_array_results_are_structured_in_both_eras(gw: tuple[str, Any]) -> None:
    url, _ = gw
    arguments = {"owner": "acme", "repo": "app"}
    async with Client(f"{url}/mcp/triage", mode="legacy") as client:
        legacy = await client.call_tool("listIssues", arguments)
    async with Client(f"{url}/mcp/triage") as client:
        modern = await client.call_tool("listIssues", arguments)
    assert legacy.structured_content == {"result": [ISSUE]}
    assert modern.structured_content == [ISSUE]


async def test_a_body_that_breaks_the_output_schema_is_an_error_not_a_lie(gw: tuple[str, Any],
                                                                          upstream: RecordingServer) -> None:
    url, _ = gw
    upstream.route("/github/", Reply(200, {"id": "not-a-number"}))
    async with Client(f"{url}/mcp/triage") as client:
        result = await client.call_tool("getIssue", {"owner": "acme", "repo": "app", "issue_number": 1})
    assert result.is_error is True
    assert "output schema" in result.content[0].text and "not-a-number" in result.content[0].text


async def test_write_under_approval_is_not_executed(gw: tuple[str, Any], upstream: RecordingServer) -> None:
    url, _ = gw
    async with Client(f"{url}/mcp/triage") as client:
        result = await client.call_tool("createIssueComment",
                                        {"owner": "acme", "repo": "app", "issue_number": 7, "body": "hi"})
    assert result.is_error is True
    assert not [r for r in upstream.requests if r.method == "POST"]


async def test_unknown_agent_and_foreign_session(gw: tuple[str, Any]) -> None:
    url, _ = gw
    response = httpx.post(f"{url}/mcp/nobody", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "unknown_agent"

    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"accept": "application/json, text/event-stream"}
    opened = httpx.post(f"{url}/mcp/weather", json=initialize, headers=headers)
    session = opened.headers["mcp-session-id"]
    foreign = httpx.post(f"{url}/mcp/triage", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                         headers={**headers, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"})
    assert foreign.status_code == 404


async def test_unknown_tool_is_a_protocol_error(gw: tuple[str, Any]) -> None:
    url, _ = gw
    async with Client(f"{url}/mcp/weather", mode="legacy") as client:
        with pytest.raises(Exception, match="getIssue"):
            await client.call_tool("getIssue", {})


@pytest.mark.slow
async def test_stdio_subprocess(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    specs, agents = write_project(tmp_path, llm.url, upstream.url)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway", "mcp", "weather", "--specs", str(specs), "--agents", str(agents), "--no-cache"],
        cwd=str(ROOT),
    )
    async with Client(params) as client:
        tools = (await client.list_tools()).tools
        assert [t.name for t in tools] == ["getForecast"]
        result = await client.call_tool("getForecast", {"latitude": 52.52, "longitude": 13.41})
    assert result.is_error is False
    assert result.structured_content == FORECAST
    assert upstream.last.path == "/meteo/v1/forecast"


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
async def test_stdio_calls_are_audited_as_the_declared_client(tmp_path: Path, llm: LenientLLM,
                                                              upstream: RecordingServer, mode: str) -> None:
    """`gateway mcp` audited its calls for no client (`-`): they name `stdio` and what the MCP client declared
    (`clientInfo.name`), its control characters left out, as `gateway call` names `cli`."""
    from mcp_types import Implementation

    specs, agents = write_project(tmp_path, llm.url, upstream.url)
    common = ["--specs", str(specs), "--agents", str(agents), "--no-cache"]
    params = StdioServerParameters(command=sys.executable, args=["-m", "gateway", "mcp", "weather", *common],
                                   cwd=str(ROOT))
    declared = Implementation(name="Desk\x1b[31mtop  app", version="1.0")
    async with Client(params, client_info=declared, mode=mode) as client:
        result = await client.call_tool("getForecast", {"latitude": 52.52, "longitude": 13.41})
    assert result.is_error is False
    audit = await anyio.run_process([sys.executable, "-m", "gateway", "audit", "--json", *common], cwd=str(ROOT))
    rows = [json.loads(line) for line in audit.stdout.decode().splitlines()]
    assert [(row["tool"], row["client"]) for row in rows] == [("getForecast", "stdio:Desk-[31mtop-app")], rows


@pytest.mark.slow
async def test_stdio_answers_a_call_holding_a_lone_surrogate(tmp_path: Path, llm: LenientLLM,
                                                            upstream: RecordingServer) -> None:
    """`"\\ud800"` is valid JSON but no text: the SDK's parser refused the line without its id, and the client waited
    for ever. It is answered with an error for its id, nothing is sent upstream, and the next call is answered."""
    specs, agents = write_project(tmp_path, llm.url, upstream.url)
    command = [sys.executable, "-m", "gateway", "mcp", "weather", "--specs", str(specs), "--agents", str(agents),
               "--no-cache"]
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "t", "version": "1"}}}
    lines = [json.dumps(initialize), json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
             '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "getForecast", '
             '"arguments": {"latitude": 52.5, "longitude": 13.4, "timezone": "Europe/Berlin\\ud800"}}}',
             json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                         "params": {"name": "getForecast", "arguments": {"latitude": 52.5, "longitude": 13.4}}})]
    async with await anyio.open_process(command, cwd=str(ROOT)) as process:
        assert process.stdin is not None and process.stdout is not None
        await process.stdin.send("".join(line + "\n" for line in lines).encode())
        answers: dict[int, Any] = {}
        buffered = b""
        with anyio.fail_after(120):  # a hang fails the test instead of stalling the suite
            while len(answers) < 3:
                buffered += await process.stdout.receive()
                *complete, buffered = buffered.split(b"\n")
                answers.update((m["id"], m) for m in map(json.loads, filter(None, complete)))
        await process.stdin.aclose()
    refused = answers[2]["error"]
    assert refused["code"] == -32602 and "lone surrogate" in refused["message"]
    assert answers[3]["result"]["structuredContent"] == FORECAST
    assert len(upstream.requests) == 1


async def test_large_listings_come_in_pages(gw: tuple[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.server.mcp import listing

    monkeypatch.setattr(listing, "PAGE_BYTES", 1)  # every tool on a page of its own
    url, _ = gw
    async with Client(f"{url}/mcp/triage", mode="legacy") as client:
        names, cursor = [], None
        for _ in range(10):
            page = await client.list_tools(cursor=cursor)
            assert len(page.tools) == 1
            names.append(page.tools[0].name)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert names == ["getRepo", "listIssues", "getIssue", "createIssueComment"]
        with pytest.raises(Exception, match="cursor"):
            await client.list_tools(cursor="99")


TRACED = """
import asyncio, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from opentelemetry import trace

names = []

class RecordingTracer(trace.NoOpTracer):
    def start_span(self, name, *args, **kwargs):
        names.append(name)
        return super().start_span(name, *args, **kwargs)

    def start_as_current_span(self, name, *args, **kwargs):
        names.append(name)
        return super().start_as_current_span(name, *args, **kwargs)

class RecordingProvider(trace.NoOpTracerProvider):
    def get_tracer(self, *args, **kwargs):
        return RecordingTracer()

trace.set_tracer_provider(RecordingProvider())

from mcp import Client
from recording_server import RecordingServer
from server_support import FORECAST, LenientLLM, gateway, route_upstream
import tempfile, pathlib

async def call(url):
    async with Client(url + "/mcp/weather", mode=sys.argv[3]) as client:
        return await client.call_tool("getForecast", {"latitude": 52.52, "longitude": 13.41})

with tempfile.TemporaryDirectory() as tmp, LenientLLM() as llm, RecordingServer() as upstream:
    route_upstream(upstream)
    with gateway(pathlib.Path(tmp), llm.url, upstream.url) as (url, app):
        result = asyncio.run(call(url))
assert result.structured_content == FORECAST, result
print(sorted(set(names)))
"""


@pytest.mark.parametrize("mode", MODES)
def test_a_tracer_provider_gets_spans_on_the_same_path(mode: str) -> None:
    """With an OpenTelemetry tracer provider installed the door answers the same, through the SDK's middleware
    (a span per message); without one it runs that same middleware, so tracing changes no code path."""
    import subprocess

    tests = ROOT / "tests"
    done = subprocess.run([sys.executable, "-c", TRACED, str(tests), str(tests / "server"), mode], cwd=str(ROOT),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "tools/call getForecast" in done.stdout


def test_the_server_keeps_the_sdks_default_middleware() -> None:
    """Each of the SDK's default middleware is kept, run while a tracer provider is installed (the traced test
    above sees its spans); without one it is skipped, as its spans would record nothing. Inside them, innermost, the
    door's plain calls (`plain`), so a traced server's span still wraps a call answered there."""
    from mcp.server.lowlevel.server import Server

    from gateway.server.mcp.plain import PlainCalls
    from gateway.server.mcp.server import WhileTraced, build_mcp_server

    ours = build_mcp_server(None)  # type: ignore[arg-type]
    *defaults, innermost = ours.middleware
    assert all(isinstance(m, WhileTraced) for m in defaults)
    assert [type(m.inner) for m in defaults] == [type(m) for m in Server("reference").middleware]
    assert isinstance(innermost, PlainCalls)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", ["/mcp/weather/mcp", "/mcp?agent=weather"])
async def test_the_inspectors_paths_reach_the_agent(gw: tuple[str, Any], mode: str, path: str) -> None:
    """The MCP Inspector rewrites a server URL's path to end in /mcp: the agent can come before it, or as a query."""
    url, _ = gw
    async with Client(url + path, mode=mode) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["getForecast"]
        result = await client.call_tool("getForecast", {"latitude": 52.52, "longitude": 13.41})
    assert result.structured_content == FORECAST


def test_mcp_without_an_agent_says_how_to_name_one(gw: tuple[str, Any]) -> None:
    url, _ = gw
    response = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 404
    assert "/mcp?agent=" in response.json()["error"]["message"]
    unknown = httpx.post(f"{url}/mcp?agent=nobody", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert unknown.status_code == 404 and "weather" in unknown.json()["error"]["message"]


def test_the_door_uses_no_private_name_of_another_package() -> None:
    """The MCP door is built on the SDK's public server API: no `_`-prefixed module, import or attribute of
    another package (a minor SDK release may rename those silently)."""
    import ast

    problems = []
    for path in sorted((ROOT / "gateway" / "server" / "mcp").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module != "__future__":
                names = [*(node.module or "").split("."), *(alias.name for alias in node.names)]
                problems += [f"{path.name}:{node.lineno} {node.module}" for n in names if n.startswith("_")]
            elif isinstance(node, ast.Import):
                problems += [f"{path.name}:{node.lineno} {a.name}" for a in node.names
                             if any(part.startswith("_") for part in a.name.split("."))]
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.endswith("__"):
                if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    problems.append(f"{path.name}:{node.lineno} .{node.attr}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id in ("getattr", "setattr", "hasattr") and len(node.args) > 1 and \
                    isinstance(node.args[1], ast.Constant) and str(node.args[1].value).startswith("_"):
                problems.append(f"{path.name}:{node.lineno} {node.func.id}(..., {node.args[1].value!r})")
    assert problems == []
