"""`tools/call` answered on the transport (gateway.server.mcp_fastcall): the same answers as the SDK's path, and
every check the SDK makes before it still made."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp_types.methods import serialize_server_result
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from recording_server import RecordingServer, Reply
from server_support import FORECAST

from gateway.server.mcp import _wire_result
from gateway.server.mcp_fastcall import legacy_result

pytestmark = pytest.mark.anyio

ACCEPT = {"accept": "application/json, text/event-stream"}


def _manager(app: Any) -> Any:
    return app.state.mcp.endpoint.manager


async def _open(client: httpx.AsyncClient, url: str, version: str = "2025-06-18") -> dict[str, str]:
    opened = await client.post(url, headers=ACCEPT, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    assert opened.status_code == 200, opened.text
    headers = {**ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": version}
    done = await client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert done.status_code == 202
    return headers


CALLS: list[tuple[str, str, dict[str, Any], bool]] = [
    # (agent, tool, params beyond the name, answered on the fast path)
    ("weather", "getForecast", {"arguments": {"latitude": 52.52, "longitude": 13.41}}, True),
    ("triage", "listIssues", {"arguments": {"owner": "acme", "repo": "app"}}, True),  # an array, wrapped for 2025
    ("weather", "getForecast", {"arguments": {"latitude": "north"}}, True),  # invalid: isError, nothing sent
    ("triage", "getIssue", {"arguments": {"owner": "acme", "repo": "app", "issue_number": 1}}, True),
    ("triage", "createIssueComment",  # under approval: refused, isError
     {"arguments": {"owner": "acme", "repo": "app", "issue_number": 7, "body": "hi"}}, True),
    ("weather", "getForecast", {}, True),  # no arguments at all
    ("weather", "getIssue", {"arguments": {}}, False),  # not this agent's tool: the SDK's protocol error
    ("weather", "getForecast", {"arguments": {"latitude": 1, "longitude": 2}, "_meta": {"progressToken": 5}}, False),
    ("weather", "getForecast", {"arguments": ["not", "an", "object"]}, False),  # malformed: the SDK's error
]


@pytest.mark.parametrize("version", ["2025-06-18", "2024-11-05"])
async def test_answers_are_the_sdks_answers(gw: tuple[str, Any], upstream: RecordingServer, version: str) -> None:
    url, app = gw
    upstream.route("/github/repos/acme/app/issues/1", Reply(200, {"id": "not-a-number"}))  # breaks the output schema
    answers: dict[bool, list[tuple[int, Any]]] = {}
    async with httpx.AsyncClient(timeout=10) as client:
        await client.get(f"{url}/mcp/weather")  # builds the MCP endpoint
        manager = _manager(app)
        fast_call = manager.fast_call
        for fast in (True, False):
            manager.fast_call = fast_call if fast else None  # None: every call takes the SDK's path
            sessions = {agent: await _open(client, f"{url}/mcp/{agent}", version) for agent in ("weather", "triage")}
            answers[fast] = []
            for index, (agent, tool, params, on_fast_path) in enumerate(CALLS):
                before = manager.fast_calls
                response = await client.post(f"{url}/mcp/{agent}", headers=sessions[agent], json={
                    "jsonrpc": "2.0", "id": f"call-{index}" if index % 2 else index, "method": "tools/call",
                    "params": {"name": tool, **params}})
                answers[fast].append((response.status_code, response.json()))
                assert response.headers["content-type"] == "application/json"
                assert manager.fast_calls - before == (1 if fast and on_fast_path else 0), (tool, params)
    assert answers[True] == answers[False]
    by_call = dict(zip([c[1] + str(i) for i, c in enumerate(CALLS)], answers[True], strict=True))
    forecast = by_call["getForecast0"][1]["result"]
    assert forecast["isError"] is False
    assert forecast["structuredContent"] == FORECAST
    assert by_call["getForecast2"][1]["result"]["isError"] is True
    assert "output schema" in by_call["getIssue3"][1]["result"]["content"][0]["text"]
    assert "error" in by_call["getIssue6"][1]  # a JSON-RPC error, not a result


@pytest.mark.parametrize("version", HANDSHAKE_PROTOCOL_VERSIONS)
def test_results_are_shaped_as_the_sdk_shapes_them(version: str) -> None:
    results = [
        _wire_result('{"a":1}', {"a": 1, "none": None, "big": 2**70, "text": "grüß dich", "nested": [{"x": None}]}),
        _wire_result("[1,2]", {"result": [1, 2]}),
        _wire_result("plain text", None),
        _wire_result("Error (upstream_error): HTTP 500", None, is_error=True),
    ]
    for result in results:
        assert legacy_result(result) == serialize_server_result("tools/call", version, result)


async def test_the_official_client_takes_the_fast_path(gw: tuple[str, Any], upstream: RecordingServer) -> None:
    url, app = gw
    async with Client(f"{url}/mcp/weather", mode="legacy") as client:
        first = await client.call_tool("getForecast", {"latitude": 52.52, "longitude": 13.41})
        second = await client.call_tool("getForecast", {"latitude": 1, "longitude": 2})
    assert first.structured_content == FORECAST and second.is_error is False
    assert _manager(app).fast_calls == 2
    assert [r.path for r in upstream.requests if r.path.startswith("/meteo/")] == ["/meteo/v1/forecast"] * 2


async def test_the_sdks_checks_still_come_first(gw: tuple[str, Any], upstream: RecordingServer) -> None:
    url, app = gw
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "getForecast", "arguments": {"latitude": 1, "longitude": 2}}}
    async with httpx.AsyncClient(timeout=10) as client:
        headers = await _open(client, f"{url}/mcp/weather")
        sent = len(upstream.requests)
        foreign_page = await client.post(f"{url}/mcp/weather", json=call,
                                         headers={**headers, "origin": "http://evil.example"})
        assert foreign_page.status_code == 403  # DNS rebinding protection
        no_json = await client.post(f"{url}/mcp/weather", json=call, headers={**headers, "accept": "text/plain"})
        assert no_json.status_code == 406
        unknown = await client.post(f"{url}/mcp/weather", json=call,
                                    headers={**headers, "mcp-session-id": "0" * 32})
        assert unknown.status_code == 404
        assert (await client.delete(f"{url}/mcp/weather", headers=headers)).status_code == 200
        ended = await client.post(f"{url}/mcp/weather", json=call, headers=headers)
        assert ended.status_code == 404
    assert len(upstream.requests) == sent  # none of them reached the API
    assert _manager(app).fast_calls == 0


async def test_a_call_in_flight_keeps_its_session_alive(gw: tuple[str, Any], upstream: RecordingServer) -> None:
    url, app = gw
    async with httpx.AsyncClient(timeout=10) as client:
        await client.get(f"{url}/mcp/weather")
        _manager(app).session_idle_timeout = 0.2  # taken by sessions opened from now on
        headers = await _open(client, f"{url}/mcp/weather")
        upstream.route("/meteo/", Reply(200, FORECAST, delay=0.6))  # three idle timeouts long
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "getForecast", "arguments": {"latitude": 1, "longitude": 2}}}
        slow = await client.post(f"{url}/mcp/weather", json=call, headers=headers)
        assert slow.status_code == 200 and slow.json()["result"]["isError"] is False
        upstream.route("/meteo/", Reply(200, FORECAST))
        again = await client.post(f"{url}/mcp/weather", json={**call, "id": 2}, headers=headers)
        assert again.status_code == 200  # the session outlived the slow call
        await asyncio.sleep(0.5)
        expired = await client.post(f"{url}/mcp/weather", json={**call, "id": 3}, headers=headers)
        assert expired.status_code == 404  # and idles out once nothing is in flight
    assert _manager(app).fast_calls == 2


MODERN = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}


def _modern(tool: str, params: dict[str, Any], *, meta: Any = ENVELOPE, **headers: str) -> tuple[dict[str, str], Any]:
    base = {**ACCEPT, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": tool}
    body = {"name": tool, **params}
    if meta is not None:
        body["_meta"] = meta
    return {**base, **headers}, body


MODERN_CALLS: list[tuple[str, tuple[dict[str, str], Any], bool]] = [
    ("weather", _modern("getForecast", {"arguments": {"latitude": 52.52, "longitude": 13.41}}), True),
    ("triage", _modern("listIssues", {"arguments": {"owner": "acme", "repo": "app"}}), True),  # an array, as it is
    ("weather", _modern("getForecast", {"arguments": {"latitude": "north"}}), True),
    ("triage", _modern("getIssue", {"arguments": {"owner": "acme", "repo": "app", "issue_number": 1}}), True),
    ("weather", _modern("getForecast", {}), True),
    ("weather", _modern("getIssue", {"arguments": {}}), False),  # not this agent's tool
    ("weather", _modern("getForecast", {"arguments": {"latitude": 1, "longitude": 2}}, meta=None), False),
    ("weather", _modern("getForecast", {"arguments": {"latitude": 1, "longitude": 2}},
                        meta={"io.modelcontextprotocol/protocolVersion": MODERN}), False),  # half an envelope
    ("weather", _modern("getForecast", {"arguments": {"latitude": 1, "longitude": 2}},
                        **{"mcp-name": "getIssue"}), False),  # the routing header disagrees with the body
    ("weather", _modern("getForecast", {"arguments": {"latitude": 1, "longitude": 2}},
                        meta={**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": "none"}), False),
    ("weather", _modern("getForecast", {"arguments": ["not", "an", "object"]}), False),
]


async def test_stateless_era_answers_are_the_sdks_answers(gw: tuple[str, Any], upstream: RecordingServer) -> None:
    url, app = gw
    upstream.route("/github/repos/acme/app/issues/1", Reply(200, {"id": "not-a-number"}))
    answers: dict[bool, list[tuple[int, Any]]] = {}
    async with httpx.AsyncClient(timeout=10) as client:
        await client.get(f"{url}/mcp/weather")
        manager = _manager(app)
        fast_call = manager.fast_call
        for fast in (True, False):
            manager.fast_call = fast_call if fast else None
            answers[fast] = []
            for index, (agent, (headers, params), on_fast_path) in enumerate(MODERN_CALLS):
                before = manager.fast_calls
                response = await client.post(f"{url}/mcp/{agent}", headers=headers, json={
                    "jsonrpc": "2.0", "id": index, "method": "tools/call", "params": params})
                answers[fast].append((response.status_code, response.json()))
                assert "mcp-session-id" not in response.headers
                assert manager.fast_calls - before == (1 if fast and on_fast_path else 0), (index, params)
    assert answers[True] == answers[False]
    first = answers[True][0][1]["result"]
    assert first["structuredContent"] == FORECAST and first["resultType"] == "complete"
    assert first["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "gateway"
    refused = answers[True][5:]  # what the SDK refuses, each with its JSON-RPC error and HTTP status
    assert all("error" in answer for _, answer in refused), refused
    assert {status for status, _ in refused} - {200}


async def test_a_stateless_call_the_fast_path_passes_on_reaches_the_sdk_whole(
        gw: tuple[str, Any], upstream: RecordingServer) -> None:
    url, app = gw
    headers, params = _modern("getForecast", {"arguments": {"latitude": 1, "longitude": 2}})
    async with httpx.AsyncClient(timeout=10) as client:
        foreign = await client.post(f"{url}/mcp/weather", headers={**headers, "origin": "http://evil.example"},
                                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        assert foreign.status_code == 403
        # A body in several chunks, read by the fast path, which passes on it (not this agent's tool): the SDK
        # gets it whole and words the error about the tool the body names.
        params = _modern("getIssue", {"arguments": {}})[1]
        text = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}).encode()

        async def body() -> Any:
            yield text[:40]
            yield text[40:]

        unknown = await client.post(f"{url}/mcp/weather", content=body(), headers={
            **_modern("getIssue", {})[0], "content-type": "application/json"})
    assert unknown.status_code < 500, unknown.text
    assert "getIssue" in unknown.json()["error"]["message"]
    assert _manager(app).fast_calls == 0


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_official_client_takes_the_fast_path_in_both_eras(gw: tuple[str, Any], mode: str) -> None:
    url, app = gw
    async with Client(f"{url}/mcp/weather", mode=mode) as client:
        result = await client.call_tool("getForecast", {"latitude": 52.52, "longitude": 13.41})
    assert result.structured_content == FORECAST
    assert _manager(app).fast_calls == 1


def test_mcp_param_headers_that_disagree_leave_the_call_to_the_sdk() -> None:
    from types import SimpleNamespace

    from starlette.requests import Request

    from gateway.server.mcp_fastcall import _mcp_param_problem

    schema = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}
    manager = SimpleNamespace(app=SimpleNamespace(get_tool_input_schema=lambda name: schema))

    def problem(arguments: dict[str, Any], *headers: tuple[bytes, bytes]) -> bool:
        request = Request({"type": "http", "method": "POST", "path": "/", "headers": list(headers)})
        return _mcp_param_problem(manager, "t", arguments, request)  # type: ignore[arg-type]

    assert not problem({"region": "eu"}, (b"mcp-param-region", b"eu"))
    assert problem({"region": "eu"}, (b"mcp-param-region", b"us"))  # the SDK answers HEADER_MISMATCH
    assert problem({}, (b"mcp-param-region", b"eu"))  # a header for an argument the body lacks
    assert problem({"region": "eu"})  # an annotated argument without its header
    assert not problem({"other": 1})  # neither: nothing to disagree


@pytest.mark.parametrize("fast", [True, False])
async def test_a_cancelled_notification_cancels_the_running_call(gw: tuple[str, Any], upstream: RecordingServer,
                                                                 fast: bool) -> None:
    url, app = gw
    async with httpx.AsyncClient(timeout=10) as client:  # shorter than the upstream's delay: a call left running fails
        await client.get(f"{url}/mcp/weather")
        if not fast:
            _manager(app).fast_call = None  # the SDK's own behaviour, which the fast path must match
        headers = await _open(client, f"{url}/mcp/weather")
        upstream.route("/meteo/", Reply(200, FORECAST, delay=20))
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "getForecast", "arguments": {"latitude": 1, "longitude": 2}}}
        running = asyncio.create_task(client.post(f"{url}/mcp/weather", headers=headers, json=call))
        while not any(r.path.startswith("/meteo/") for r in upstream.requests):  # the call has reached the API
            await asyncio.sleep(0.02)
        notice = await client.post(f"{url}/mcp/weather", headers=headers, json={
            "jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "user"}})
        answer = await running
        upstream.route("/meteo/", Reply(200, FORECAST))
        after = await client.post(f"{url}/mcp/weather", headers=headers, json={**call, "id": 8})
    assert notice.status_code == 202
    assert answer.status_code == 200
    assert answer.json() == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32800, "message": "Request cancelled"}}
    assert after.json()["result"]["structuredContent"] == FORECAST  # the session goes on
    assert _manager(app).fast_calls == (1 if fast else 0)


def test_traced_servers_answer_every_call_on_the_sdks_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.server import mcp as door

    monkeypatch.setattr(door, "_tracing_configured", lambda: True)  # the SDK's middleware makes the spans
    assert door.MCPEndpoint(None, json_response=True).manager.fast_call is None  # type: ignore[arg-type]
    monkeypatch.setattr(door, "_tracing_configured", lambda: False)
    assert door.MCPEndpoint(None, json_response=True).manager.fast_call is not None  # type: ignore[arg-type]
