"""The two doors every tool call takes are ordinary Starlette routes: the same answers at the root and under a
root path, and the route is in the scope (for tracing and middleware)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from recording_server import RecordingServer
from server_support import LenientLLM, gateway

# (agent, tool, body): success, invalid arguments, upstream failure, success, unknown agent and tool, not JSON, not an
# object, empty body, a write refused for want of an approval queue.
CASES = [
    ("weather", "getForecast", b'{"latitude": 52.52, "longitude": 13.41}'),
    ("weather", "getForecast", b'{"latitude": "north"}'),
    ("triage", "getRepo", b'{"owner": "acme", "repo": "app"}'),  # the upstream answers 404
    ("triage", "getIssue", b'{"owner": "acme", "repo": "app", "issue_number": 7}'),
    ("nobody", "getForecast", b"{}"),
    ("weather", "getIssue", b"{}"),
    ("weather", "getForecast", b"{not json"),
    ("weather", "getForecast", b"[1, 2]"),
    ("weather", "getForecast", b""),
    ("triage", "createIssueComment", b'{"owner": "acme", "repo": "app", "issue_number": 7, "body": "hi"}'),
]


@pytest.fixture
def two_gateways(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Iterator[tuple[str, str]]:
    """The same project served at the root and under a root path (as behind a proxy at /gw)."""
    with gateway(tmp_path / "plain", llm.url, upstream.url) as (plain, _), \
            gateway(tmp_path / "rooted", llm.url, upstream.url, root_path="/gw") as (rooted, _):
        yield plain, rooted


def _answer(response: httpx.Response) -> tuple[int, str | None, Any]:
    body = response.json()
    for result in (body, body.get("result") or {}):
        result.pop("duration_ms", None)  # the one field two calls never share
    return response.status_code, response.headers.get("content-type"), body


def test_direct_calls_answer_alike_at_the_root_and_under_a_root_path(two_gateways: tuple[str, str],
                                                                    upstream: RecordingServer) -> None:
    plain, rooted = two_gateways
    statuses = []
    for agent, tool, body in CASES:
        answers, sent = [], []
        for base in (plain, rooted):
            before = len(upstream.requests)
            response = httpx.post(f"{base}/agents/{agent}/tools/{tool}", content=body,
                                  headers={"content-type": "application/json"})
            answers.append(_answer(response))
            sent.append([(r.method, r.path, sorted(r.query)) for r in upstream.requests[before:]])
        assert answers[0] == answers[1], (agent, tool, body)
        assert sent[0] == sent[1]
        statuses.append(answers[0][0])
    assert statuses == [200, 422, 502, 200, 404, 404, 400, 400, 422, 403]


def test_a_direct_calls_body_in_pieces_or_blank_is_read_as_a_whole_body(two_gateways: tuple[str, str]) -> None:
    # The door reads a body of one message in its own frame, and a body of several (chunked) through a helper: both
    # are the same arguments; a body of whitespace alone is the empty arguments object, as an empty one is.
    plain, _ = two_gateways
    url = f"{plain}/agents/weather/tools/getForecast"
    whole = httpx.post(url, content=b'{"latitude": 52.52, "longitude": 13.41}',
                       headers={"content-type": "application/json"})

    def pieces() -> Iterator[bytes]:
        yield b'{"latitude": 52.52, '
        yield b'"longitude": 13.41}'

    chunked = httpx.post(url, content=pieces(), headers={"content-type": "application/json"})
    assert chunked.request.headers.get("transfer-encoding") == "chunked"
    assert _answer(chunked) == _answer(whole) and whole.status_code == 200
    blank = httpx.post(url, content=b" \r\n\t ", headers={"content-type": "application/json"})
    empty = httpx.post(url, content=b"", headers={"content-type": "application/json"})
    assert _answer(blank) == _answer(empty) and blank.status_code == 422


def test_other_methods_and_paths_get_the_routers_answers(two_gateways: tuple[str, str]) -> None:
    plain, _ = two_gateways
    response = httpx.get(f"{plain}/agents/weather/tools/getForecast")  # the door's path, another method
    assert response.status_code == 405 and response.json()["error"]["code"] == "method_not_allowed"
    assert httpx.get(f"{plain}/agents/weather/tools").status_code == 200
    response = httpx.post(f"{plain}/agents/weather/tools/getForecast/extra", json={})  # not the door's path
    assert response.status_code == 404


def _mcp_exchange(base: str) -> list[tuple[int, Any]]:
    """initialize, initialized, a tool call, a bad one, the session's end, and an unknown agent's endpoint."""
    answers: list[tuple[int, Any]] = []
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        def post(path: str, message: dict[str, Any]) -> httpx.Response:
            response = client.post(path, json=message)
            answers.append((response.status_code, response.json() if response.content else None))
            return response

        opened = post("/mcp/weather", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}})
        client.headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
        client.headers["Mcp-Protocol-Version"] = "2025-06-18"
        post("/mcp/weather", {"jsonrpc": "2.0", "method": "notifications/initialized"})
        post("/mcp/weather", {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "getForecast", "arguments": {"latitude": 52.52, "longitude": 13.41}}})
        post("/mcp/weather", {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "getForecast", "arguments": {"latitude": "north"}}})
        answers.append((client.delete("/mcp/weather").status_code, None))
        del client.headers["Mcp-Session-Id"]
        post("/mcp/nobody", {"jsonrpc": "2.0", "id": 4, "method": "tools/list"})
    return answers


def test_mcp_answers_alike_at_the_root_and_under_a_root_path(two_gateways: tuple[str, str]) -> None:
    plain, rooted = two_gateways
    answers = _mcp_exchange(plain)
    assert answers == _mcp_exchange(rooted)
    assert [status for status, _ in answers] == [200, 202, 200, 200, 200, 404]
    assert answers[2][1]["result"]["structuredContent"]["current"]["temperature_2m"] == 3.5
    assert answers[3][1]["result"]["isError"] is True


def test_the_direct_call_is_routed_by_starlette() -> None:
    """The router, not a shortcut before it, hands the door its request: the route and endpoint are in the scope."""
    from starlette.routing import Route

    from gateway.runtime import RuntimeHolder, load_runtime
    from gateway.server import create_app
    from gateway.server.cut_doors import answer_cut
    from gateway.server.direct_call import DirectCall

    seen: list[Any] = []

    class Spy:
        def __init__(self, app: Any) -> None:
            self.app = app

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            await self.app(scope, receive, send)
            if scope["type"] == "http":
                seen.append((scope.get("route"), scope.get("endpoint"), scope.get("path_params")))

    from starlette.middleware import Middleware

    root = Path(__file__).resolve().parents[2]
    runtime = load_runtime(root / "specs", root / "agents.yaml", use_cache=False)
    app = create_app(RuntimeHolder(runtime), watch=False, middleware=[Middleware(Spy)])
    from server_support import running

    with running(app) as url:
        response = httpx.post(f"{url}/agents/nobody/tools/x", json={})
    assert response.status_code == 404
    route, endpoint, params = seen[-1]
    assert isinstance(route, Route) and route.path == "/agents/{agent}/tools/{tool}"
    # the door itself, unwrapped: a call the stopping instance cuts is answered by the envelope with its answer
    assert isinstance(endpoint, DirectCall) and endpoint.answer_cut is answer_cut
    assert params == {"agent": "nobody", "tool": "x"}
