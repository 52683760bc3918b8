"""The MCP door on the wire, as raw HTTP: what each kind of `tools/call` answers in both protocol eras, and the
SDK's transport checks (Host/Origin, Accept, sessions, idle timeout, cancellation) made before any tool runs."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from recording_server import RecordingServer, Reply
from server_support import FORECAST

pytestmark = pytest.mark.anyio

ACCEPT = {"accept": "application/json, text/event-stream"}


async def _open(client: httpx.AsyncClient, url: str, version: str = "2025-06-18") -> dict[str, str]:
    opened = await client.post(url, headers=ACCEPT, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    assert opened.status_code == 200, opened.text
    headers = {**ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": version}
    done = await client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert done.status_code == 202
    return headers


CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("weather", "getForecast", {"arguments": {"latitude": 52.52, "longitude": 13.41}}),
    ("triage", "listIssues", {"arguments": {"owner": "acme", "repo": "app"}}),  # an array, wrapped for 2025
    ("weather", "getForecast", {"arguments": {"latitude": "north"}}),  # invalid: isError, nothing sent
    ("triage", "getIssue", {"arguments": {"owner": "acme", "repo": "app", "issue_number": 1}}),
    ("triage", "createIssueComment",  # under approval: refused, isError
     {"arguments": {"owner": "acme", "repo": "app", "issue_number": 7, "body": "hi"}}),
    ("weather", "getForecast", {}),  # no arguments at all: the schema's required fields are missing
    ("weather", "getIssue", {"arguments": {}}),  # not this agent's tool: a protocol error
    ("weather", "getForecast", {"arguments": {"latitude": 1, "longitude": 2}, "_meta": {"progressToken": 5}}),
    ("weather", "getForecast", {"arguments": ["not", "an", "object"]}),  # malformed: a protocol error
    # (after these, what the door's plain rule reads otherwise than plain, or plain in another way: `plain`)
    ("weather", "getForecast", {"name": 5, "arguments": {}}),  # a name not a string: the kernel's error
    ("weather", "getForecast", {"arguments": None}),  # null arguments: plain, none given
    ("weather", "getForecast", {"arguments": {"latitude": 1, "longitude": 2}, "other": True}),  # an unknown key
]


@pytest.mark.parametrize("version", ["2025-06-18", "2024-11-05"])
async def test_session_answers(gw: tuple[str, Any], upstream: RecordingServer, version: str) -> None:
    url, _ = gw
    upstream.route("/github/repos/acme/app/issues/1", Reply(200, {"id": "not-a-number"}))  # breaks the output schema
    answers = []
    async with httpx.AsyncClient(timeout=10) as client:
        sessions = {agent: await _open(client, f"{url}/mcp/{agent}", version) for agent in ("weather", "triage")}
        for index, (agent, tool, params) in enumerate(CALLS):
            response = await client.post(f"{url}/mcp/{agent}", headers=sessions[agent], json={
                "jsonrpc": "2.0", "id": f"call-{index}" if index % 2 else index, "method": "tools/call",
                "params": {"name": tool, **params}})
            assert response.headers["content-type"] == "application/json"  # JSON answers, not SSE streams
            answers.append(response.json())
    results = [answer.get("result") for answer in answers]
    assert [a["id"] for a in answers] == [f"call-{i}" if i % 2 else i for i in range(len(CALLS))]
    assert results[0]["isError"] is False and results[0]["structuredContent"] == FORECAST
    assert "resultType" not in results[0]  # a 2026 field, not sent to a 2025 session
    assert results[1]["structuredContent"]["result"][0]["number"] == 7
    assert results[2]["isError"] is True and "invalid_arguments" in results[2]["content"][0]["text"]
    assert results[3]["isError"] is True and "output schema" in results[3]["content"][0]["text"]
    assert results[4]["isError"] is True and "approval" in results[4]["content"][0]["text"].lower()
    assert results[5]["isError"] is True
    assert "error" in answers[6] and "getIssue" in answers[6]["error"]["message"]
    assert results[7]["isError"] is False  # a progress token changes nothing for a tool that sends no progress
    assert "error" in answers[8]
    assert "error" in answers[9]
    assert results[10]["isError"] is True and "invalid_arguments" in results[10]["content"][0]["text"]
    assert results[11]["isError"] is False  # a key the surface ignores changes nothing
    assert not [r for r in upstream.requests if r.method == "POST"]


async def test_answered_inline_as_the_sdks_transport_answers(gw: tuple[str, Any], upstream: RecordingServer) -> None:
    """A session's plain requests are answered in their own task (`inline`); a body sent in chunks, without a
    Content-Length, still goes through the SDK's transport: both answer every kind of request alike."""
    url, _ = gw
    upstream.route("/github/repos/acme/app/issues/1", Reply(200, {"id": "not-a-number"}))
    messages = [("weather", {"method": "ping"}), ("triage", {"method": "tools/list"}),
                ("weather", {"method": "tools/list", "params": {"cursor": "nope"}}),
                ("weather", {"method": "resources/list"}),  # not served: the SDK's own error
                *((agent, {"method": "tools/call", "params": {"name": tool, **params}})
                  for agent, tool, params in CALLS)]
    async with httpx.AsyncClient(timeout=10) as client:
        sessions = {agent: await _open(client, f"{url}/mcp/{agent}") for agent in ("weather", "triage")}
        # ... and without Mcp-Protocol-Version (2024-11-05 clients never send it): the session's version all the same
        bare = {agent: {k: v for k, v in headers.items() if k != "mcp-protocol-version"}
                for agent, headers in sessions.items()}
        for index, (agent, message) in enumerate(messages * 2):
            if index == len(messages):
                sessions = bare
            body = json.dumps({"jsonrpc": "2.0", "id": index, **message}).encode()

            async def chunks(body: bytes = body) -> Any:
                yield body[:30]
                yield body[30:]

            inline = await client.post(f"{url}/mcp/{agent}", content=body,
                                       headers={**sessions[agent], "content-type": "application/json"})
            sdk = await client.post(f"{url}/mcp/{agent}", content=chunks(),
                                    headers={**sessions[agent], "content-type": "application/json"})
            assert "content-length" not in sdk.request.headers
            assert (inline.status_code, inline.headers["content-type"], inline.headers["mcp-session-id"]) == \
                (sdk.status_code, sdk.headers["content-type"], sdk.headers["mcp-session-id"]), message
            assert inline.json() == sdk.json(), message
        odd = [{"jsonrpc": "2.0", "id": 1, "method": 5}, {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]},
               {"jsonrpc": "2.0", "id": True, "method": "ping"}, {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
               {"jsonrpc": "1.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 1, "result": {}},
               [{"jsonrpc": "2.0", "id": 1, "method": "ping"}], "ping"]
        for raw in odd:  # what is not one well-formed request is the SDK's to answer, whichever way it comes
            body = json.dumps(raw).encode()

            async def chunked(body: bytes = body) -> Any:
                yield body

            answers = [await client.post(f"{url}/mcp/weather", content=content,
                                         headers={**sessions["weather"], "content-type": "application/json"})
                       for content in (body, chunked())]
            assert answers[0].status_code == answers[1].status_code and answers[0].text == answers[1].text, raw


async def test_the_sdks_checks_still_come_first(gw: tuple[str, Any], upstream: RecordingServer) -> None:
    url, _ = gw
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


async def test_a_call_in_flight_keeps_its_session_alive(gw: tuple[str, Any], upstream: RecordingServer) -> None:
    url, app = gw
    async with httpx.AsyncClient(timeout=10) as client:
        await client.get(f"{url}/mcp/weather")
        endpoint = app.state.mcp.endpoint  # the ledger ends idle sessions (in the SDK too)
        endpoint.sessions.limits = endpoint.limits.model_copy(update={"session_idle_timeout": 0.2})
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


MODERN_CALLS: list[tuple[str, tuple[dict[str, str], Any]]] = [
    ("weather", _modern("getForecast", {"arguments": {"latitude": 52.52, "longitude": 13.41}})),
    ("triage", _modern("listIssues", {"arguments": {"owner": "acme", "repo": "app"}})),  # an array, as it is
    ("weather", _modern("getForecast", {"arguments": {"latitude": "north"}})),
    ("triage", _modern("getIssue", {"arguments": {"owner": "acme", "repo": "app", "issue_number": 1}})),
    ("weather", _modern("getForecast", {})),
    ("weather", _modern("getIssue", {"arguments": {}})),  # not this agent's tool
    ("weather", _modern("getForecast", {"arguments": {"latitude": 1, "longitude": 2}}, meta=None)),
    ("weather", _modern("getForecast", {"arguments": {"latitude": 1, "longitude": 2}},
                        meta={"io.modelcontextprotocol/protocolVersion": MODERN})),  # half an envelope
    ("weather", _modern("getForecast", {"arguments": {"latitude": 1, "longitude": 2}},
                        **{"mcp-name": "getIssue"})),  # the routing header disagrees with the body
    ("weather", _modern("getForecast", {"arguments": {"latitude": 1, "longitude": 2}},
                        meta={**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": "none"})),
    ("weather", _modern("getForecast", {"arguments": ["not", "an", "object"]})),
]


async def test_stateless_era_answers(gw: tuple[str, Any], upstream: RecordingServer) -> None:
    url, _ = gw
    upstream.route("/github/repos/acme/app/issues/1", Reply(200, {"id": "not-a-number"}))
    answers: list[tuple[int, Any]] = []
    async with httpx.AsyncClient(timeout=10) as client:
        for index, (agent, (headers, params)) in enumerate(MODERN_CALLS):
            response = await client.post(f"{url}/mcp/{agent}", headers=headers, json={
                "jsonrpc": "2.0", "id": index, "method": "tools/call", "params": params})
            answers.append((response.status_code, response.json()))
            assert "mcp-session-id" not in response.headers
    first = answers[0][1]["result"]
    assert first["structuredContent"] == FORECAST and first["resultType"] == "complete"
    assert first["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "gateway"
    assert answers[1][1]["result"]["structuredContent"][0]["number"] == 7  # any schema at the root
    assert answers[2][1]["result"]["isError"] is True
    assert "output schema" in answers[3][1]["result"]["content"][0]["text"]
    refused = answers[5:]  # what the SDK refuses, each with its JSON-RPC error and HTTP status
    assert all("error" in answer for _, answer in refused), refused
    assert {status for status, _ in refused} - {200}


class _Counted:
    """The endpoint's SDK session manager, counting the requests handed to it."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self.handed = 0

    async def handle_request(self, scope: Any, receive: Any, send: Any) -> None:
        self.handed += 1
        await self.manager.handle_request(scope, receive, send)


def _envelope_request(method: str, params: dict[str, Any] | None = None, *, meta: Any = ENVELOPE,
                      **headers: str) -> tuple[dict[str, str], dict[str, Any]]:
    body = dict(params or {})
    if meta is not None:
        body["_meta"] = meta
    name = body.get("name")
    routing = {"mcp-protocol-version": MODERN, "mcp-method": method, **({"mcp-name": name} if name else {})}
    return {**ACCEPT, **routing, **headers}, {"method": method, "params": body}


async def test_stateless_answered_as_the_sdks_transport_answers(gw: tuple[str, Any],
                                                                upstream: RecordingServer) -> None:
    """A 2026-07-28 request the SDK would answer with one JSON message is answered by the door (`stateless`);
    a body sent in chunks, without a Content-Length, goes to the SDK's transport: both answer every kind of
    request alike, errors and HTTP statuses included."""
    url, app = gw
    upstream.route("/github/repos/acme/app/issues/1", Reply(200, {"id": "not-a-number"}))
    kinds: list[tuple[str, tuple[dict[str, str], Any]]] = [
        *((agent, (headers, {"method": "tools/call", "params": params})) for agent, (headers, params) in MODERN_CALLS),
        ("weather", _envelope_request("tools/list")),
        ("triage", _envelope_request("tools/list", {"cursor": "nope"})),
        ("weather", _envelope_request("ping")),
        ("weather", _envelope_request("server/discover")),
        ("weather", _envelope_request("resources/list")),  # not served: 404 with the SDK's error
        ("weather", _envelope_request("tools/call", {"name": "getForecast", "arguments": {"latitude": 1,
                                                     "longitude": 2}}, **{"mcp-param-latitude": "1"})),
        ("weather", _envelope_request("tools/list", **{"mcp-protocol-version": "2099-01-01"})),
        ("weather", _envelope_request("tools/list", meta={**ENVELOPE, "io.modelcontextprotocol/protocolVersion":
                                                          "2099-01-01"}, **{"mcp-protocol-version": "2099-01-01"})),
        ("weather", _envelope_request("tools/list", **{"mcp-method": "tools/call"})),
        ("weather", _envelope_request("initialize", {"protocolVersion": MODERN, "capabilities": {},
                                                     "clientInfo": {"name": "t", "version": "1"}})),
        ("weather", _envelope_request("tools/list", **{"accept": "text/event-stream"})),  # 406
        ("weather", _envelope_request("tools/list", **{"origin": "http://evil.example"})),  # 403
        ("weather", _envelope_request("subscriptions/listen")),  # a stream: 406 without text/event-stream
    ]
    odd = [{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
           {"jsonrpc": "2.0", "id": 1, "method": 5}, {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]},
           {"jsonrpc": "2.0", "id": True, "method": "ping"}, {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
           {"jsonrpc": "1.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 1, "result": {}},
           [{"jsonrpc": "2.0", "id": 1, "method": "ping"}], "ping"]
    async with httpx.AsyncClient(timeout=10) as client:
        await client.get(f"{url}/mcp/weather")  # the endpoint is built on first use
        endpoint = app.state.mcp.endpoint
        endpoint.manager = counted = _Counted(endpoint.manager)
        answers = []
        for index, (agent, (headers, message)) in enumerate(kinds):
            answers.append(await _both_ways(client, f"{url}/mcp/{agent}", headers, json.dumps(
                {"jsonrpc": "2.0", "id": index, **message}).encode(), counted))
        for raw in odd:
            headers = _envelope_request("ping")[0]
            answers.append(await _both_ways(client, f"{url}/mcp/weather", headers, json.dumps(raw).encode(), counted))
        headers = _envelope_request("ping")[0]
        for body in (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", ', "\ufeff{}".encode(), b"\xff"):
            answers.append(await _both_ways(client, f"{url}/mcp/weather", headers, body, counted))
    inline = [index for index, (by_door, _) in enumerate(answers) if by_door]
    # what the SDK answers with one JSON message (a mis-shaped capabilities value degrades to none declared)
    assert inline == [0, 1, 2, 3, 4, 5, 9, 10, 11, 12, 13, 14, 15, 16, 20], inline
    assert not [r for r in upstream.requests if r.method == "POST"]


async def _both_ways(client: httpx.AsyncClient, url: str, headers: dict[str, str], body: bytes,
                     counted: _Counted) -> tuple[bool, int]:
    """Send `body` whole and in chunks; assert both answers alike. (Whether the door answered it, the status.)"""

    async def chunks() -> Any:
        yield body[:30]
        yield body[30:]

    headers = {**headers, "content-type": "application/json"}
    before = counted.handed
    whole = await client.post(url, content=body, headers=headers)
    middle = counted.handed
    sdk = await client.post(url, content=chunks(), headers=headers)
    assert "content-length" not in sdk.request.headers
    by_door = middle == before and counted.handed == middle + 1  # (the gateway itself refuses a foreign origin)
    assert (whole.status_code, whole.headers.get("content-type")) == (sdk.status_code, sdk.headers.get("content-type"))
    assert "mcp-session-id" not in whole.headers, body
    if whole.headers.get("content-type") == "application/json":
        assert whole.json() == sdk.json(), body
    else:
        assert whole.text == sdk.text, body
    return by_door, whole.status_code


async def test_a_stateless_call_in_chunks_is_read_whole(
        gw: tuple[str, Any], upstream: RecordingServer) -> None:
    url, _ = gw
    headers, params = _modern("getForecast", {"arguments": {"latitude": 1, "longitude": 2}})
    async with httpx.AsyncClient(timeout=10) as client:
        foreign = await client.post(f"{url}/mcp/weather", headers={**headers, "origin": "http://evil.example"},
                                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        assert foreign.status_code == 403
        # A body in several chunks: the SDK gets it whole and words the error about the tool the body names.
        params = _modern("getIssue", {"arguments": {}})[1]
        text = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}).encode()

        async def body() -> Any:
            yield text[:40]
            yield text[40:]

        unknown = await client.post(f"{url}/mcp/weather", content=body(), headers={
            **_modern("getIssue", {})[0], "content-type": "application/json"})
    assert unknown.status_code < 500, unknown.text
    assert "getIssue" in unknown.json()["error"]["message"]


# "7" and 7 name one request, as the SDK's dispatcher correlates ids
@pytest.mark.parametrize(("call_id", "cancelled_id"), [(7, 7), ("call-7", "call-7"), ("7", 7)])
async def test_a_cancelled_notification_cancels_the_running_call(gw: tuple[str, Any], upstream: RecordingServer,
                                                                 call_id: Any, cancelled_id: Any) -> None:
    url, _ = gw
    async with httpx.AsyncClient(timeout=10) as client:  # shorter than the upstream's delay: a call left running fails
        headers = await _open(client, f"{url}/mcp/weather")
        upstream.route("/meteo/", Reply(200, FORECAST, delay=20))
        call = {"jsonrpc": "2.0", "id": call_id, "method": "tools/call",
                "params": {"name": "getForecast", "arguments": {"latitude": 1, "longitude": 2}}}
        running = asyncio.create_task(client.post(f"{url}/mcp/weather", headers=headers, json=call))
        while not any(r.path.startswith("/meteo/") for r in upstream.requests):  # the call has reached the API
            await asyncio.sleep(0.02)
        notice = await client.post(f"{url}/mcp/weather", headers=headers, json={
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": cancelled_id, "reason": "user"}})
        answer = await running
        upstream.route("/meteo/", Reply(200, FORECAST))
        after = await client.post(f"{url}/mcp/weather", headers=headers, json={**call, "id": 8})
    assert notice.status_code == 202
    assert answer.status_code == 200
    assert answer.json() == {"jsonrpc": "2.0", "id": call_id,
                             "error": {"code": -32800, "message": "Request cancelled"}}
    assert after.json()["result"]["structuredContent"] == FORECAST  # the session goes on
