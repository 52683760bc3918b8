"""An MCP call's result on the wire: the api's JSON text written once (text content and structured content), in
both protocol eras and on both ways a session's request is answered, and never when it could carry a secret."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from recording_server import RecordingServer, Reply
from server_support import FORECAST, ISSUE

pytestmark = pytest.mark.anyio

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
API_TOKEN = "gh-secret-token"
BIG = 123456789012345678901234567890
"""An integer past a double's precision: its parse holds a float, the api's text its every digit."""
FORECAST_CALL = {"name": "getForecast", "arguments": {"latitude": 52.5, "longitude": 13.4}}
MODERN = "2026-07-28"


async def _session(client: httpx.AsyncClient, url: str) -> dict[str, str]:
    opened = await client.post(url, headers=ACCEPT, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    assert opened.status_code == 200, opened.text
    headers = {**ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    assert (await client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            ).status_code == 202
    return headers


async def _call(url: str, params: dict[str, Any], *, era: str = "2025", chunked: bool = False) -> dict[str, Any]:
    """One `tools/call` of the agent at `url`: in a 2025 session (answered by the door, or `chunked`: by the SDK's
    transport), or stateless 2026-07-28. The result, read by a parser that keeps an integer's every digit."""
    async with httpx.AsyncClient(timeout=10) as client:
        if era == "2025":
            headers = await _session(client, url)
        else:
            headers = {**ACCEPT, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": params["name"]}
            params = {**params, "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                                          "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                                          "io.modelcontextprotocol/clientCapabilities": {}}}
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()

        async def chunks() -> Any:
            yield body

        response = await client.post(url, headers=headers, content=chunks() if chunked else body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = json.loads(response.text)["result"]
    return result


@pytest.mark.parametrize("era", ["2025", "2026"])
async def test_the_result_carries_the_apis_json_as_it_was_sent(gw: tuple[str, Any], upstream: RecordingServer,
                                                               era: str) -> None:
    """A body nothing changed (no secret, no escape, nothing cut) goes out as the api's own JSON text, as the text
    content and as the structured content, not written again from its parse."""
    url, _ = gw
    text = json.dumps({**FORECAST, "generationtime_ms": 0}, ensure_ascii=False)  # on one line, no escape
    text = text.replace('"generationtime_ms": 0', f'"generationtime_ms": {BIG}')
    upstream.route("/meteo/v1/forecast", Reply(200, text.encode(), headers={"Content-Type": "application/json"}))
    result = await _call(f"{url}/mcp/weather", FORECAST_CALL, era=era)
    assert result["isError"] is False
    assert result["content"] == [{"type": "text", "text": text}]
    assert result["structuredContent"]["generationtime_ms"] == BIG
    assert result["structuredContent"]["current"] == FORECAST["current"]


async def test_a_wrapped_array_is_written_from_the_apis_text(gw: tuple[str, Any], upstream: RecordingServer) -> None:
    """A 2025 client gets a non-object result wrapped as `{"result": ...}`: around the api's text too."""
    url, _ = gw
    text = json.dumps([{**ISSUE, "id": 0}]).replace('"id": 0', f'"id": {BIG}')
    upstream.route("/github/repos/acme/app/issues", Reply(200, text.encode(),
                                                          headers={"Content-Type": "application/json"}))
    result = await _call(f"{url}/mcp/triage", {"name": "listIssues", "arguments": {"owner": "acme", "repo": "app"}})
    assert result["content"][0]["text"] == text
    assert result["structuredContent"]["result"][0]["id"] == BIG
    assert result["structuredContent"]["result"][0]["number"] == 7


async def test_through_the_sdks_transport_the_result_is_the_same(gw: tuple[str, Any],
                                                                 upstream: RecordingServer) -> None:
    """A session's request the SDK's transport answers (a body in chunks) gets the same result: the same text, the
    structured content checked by the SDK's kernel (from the parse: the api's digits past a double are not kept
    there)."""
    url, _ = gw
    text = json.dumps(FORECAST, ensure_ascii=False)
    upstream.route("/meteo/v1/forecast", Reply(200, text.encode(), headers={"Content-Type": "application/json"}))
    door = await _call(f"{url}/mcp/weather", FORECAST_CALL)
    sdk = await _call(f"{url}/mcp/weather", FORECAST_CALL, chunked=True)
    assert door == sdk
    assert door["content"][0]["text"] == text and door["structuredContent"] == FORECAST


async def test_a_pretty_printed_answer_is_sent_compact(gw: tuple[str, Any], upstream: RecordingServer) -> None:
    """The model is not sent an api's indentation: a body on several lines is written again, compact."""
    url, _ = gw
    upstream.route("/meteo/v1/forecast", Reply(200, json.dumps(FORECAST, indent=2, ensure_ascii=False).encode(),
                                               headers={"Content-Type": "application/json"}))
    result = await _call(f"{url}/mcp/weather", FORECAST_CALL)
    assert result["content"][0]["text"] == json.dumps(FORECAST, separators=(",", ":"), ensure_ascii=False)
    assert result["structuredContent"] == FORECAST


@pytest.mark.parametrize("era", ["2025", "2026"])
@pytest.mark.parametrize("tail", [f', "note": "{API_TOKEN}", "note": "fine"}}',  # a repeated key: the parse drops it
                                  ', "note": "\\u0067h-secret-token"}'])  # an escape that spells the secret
async def test_a_secret_in_the_apis_text_goes_out_in_no_form(gw: tuple[str, Any], upstream: RecordingServer,
                                                              era: str, tail: str) -> None:
    """The api's text stands for the body only when it showed no secret in any form and no escape: otherwise the
    text and the structured content are written from the (redacted) parse."""
    url, _ = gw
    text = json.dumps(FORECAST, ensure_ascii=False)[:-1] + tail
    upstream.route("/meteo/v1/forecast", Reply(200, text.encode(), headers={"Content-Type": "application/json"}))
    result = await _call(f"{url}/mcp/weather", FORECAST_CALL, era=era)
    wire = json.dumps(result)
    assert API_TOKEN not in wire and "\\u0067h-secret" not in wire
    assert result["structuredContent"]["note"] in ("fine", "[REDACTED]")


TEXTS = ["", "plain", '{"a":1}', "line\nbreak\ttab", "quote \" backslash \\ slash /", "é ü 中文 🎉", "\u2028\u2029",
         "\x00\x1f control", "x" * 5000]


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25", MODERN])
def test_the_kernels_check_gives_a_text_content_back_as_it_was(version: str) -> None:
    """Why the door may set a call's text aside from the SDK kernel's result check: for any string, the check's
    dump of `{"type": "text", "text": s}` is that same dict (the rule holds by construction)."""
    from mcp_types.methods import serialize_server_result

    for text in TEXTS:
        content = [{"type": "text", "text": text}]
        shaped = serialize_server_result("tools/call", version, {"content": content, "isError": False,
                                                                  "resultType": "complete"})
        assert shaped["content"] == content


def test_where_the_door_writes_the_answer_the_text_goes_around_the_kernels_check() -> None:
    """The text content (as the structured content) travels aside: the kernel checks a result without it, and the
    door's answer carries it, as the kernel would have shaped it."""
    from mcp_types.methods import serialize_server_result

    from gateway.catalog import AgentTool
    from gateway.messages import ToolResult
    from gateway.server.mcp.exchange import result_body
    from gateway.server.mcp.results import ResultAside, call_result

    tool = AgentTool(name="t", description="", input_schema={})
    for outcome in (ToolResult(ok=True, status=200, media_type="application/json", body={"a": "é"},
                               body_json=b'{"a":"\xc3\xa9"}'),
                    ToolResult(ok=True, status=200, media_type="text/plain", body="a text"),
                    ToolResult(ok=False, status=500, body="down", error="the api failed", error_type="http_error")):
        aside = ResultAside()
        wire = call_result(tool, outcome, modern=False, aside=aside)
        assert wire["content"] == []  # what the kernel's check sees
        plain = call_result(tool, outcome, modern=False)  # the same call answered by the SDK's transport
        kernel = serialize_server_result("tools/call", "2025-06-18", wire)
        sent = json.loads(result_body(7, kernel, aside))
        assert sent == {"jsonrpc": "2.0", "id": 7, "result": serialize_server_result("tools/call", "2025-06-18", plain)}


async def test_a_failed_call_is_answered_alike_both_ways(gw: tuple[str, Any], upstream: RecordingServer) -> None:
    """A tool error (the api's 500) is the same result whether the door or the SDK's transport answers it."""
    url, _ = gw
    upstream.route("/meteo/v1/forecast", Reply(500, b'{"reason": "down"}',
                                               headers={"Content-Type": "application/json"}))
    door = await _call(f"{url}/mcp/weather", FORECAST_CALL)
    sdk = await _call(f"{url}/mcp/weather", FORECAST_CALL, chunked=True)
    assert door == sdk
    assert door["isError"] is True and "500" in door["content"][0]["text"]
