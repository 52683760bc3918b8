from __future__ import annotations

from typing import Any

import httpx
import pytest
from recording_server import RecordingServer, Reply


def _error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body["error"]) >= {"message", "type", "code"}, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


def test_health_models_and_agents(gw: tuple[str, Any]) -> None:
    url, _ = gw
    health = httpx.get(f"{url}/healthz").json()
    assert health["status"] == "ok" and health["agents"] == 2 and health["tools"] == 5

    models = httpx.get(f"{url}/v1/models").json()
    assert models["object"] == "list"
    assert [m["id"] for m in models["data"]] == ["weather", "triage"]

    agents = {a["name"]: a for a in httpx.get(f"{url}/agents").json()["data"]}
    assert agents["weather"]["tools"] == ["getForecast"]
    assert agents["triage"]["tools"] == ["getRepo", "listIssues", "getIssue", "createIssueComment"]
    assert agents["triage"]["approval"] == "writes"


@pytest.mark.parametrize("format", ["json", "openai", "anthropic", "gemini", "mcp"])
def test_tools_in_every_format(gw: tuple[str, Any], format: str) -> None:
    url, app = gw
    response = httpx.get(f"{url}/agents/weather/tools", params={"format": format})
    assert response.status_code == 200
    tools = response.json()["data"]
    assert len(tools) == 1
    catalog_tool = app.state.gateway.current.runtime.catalog.get("getForecast")
    if format == "json":
        assert tools[0]["input_schema"] == catalog_tool.input_schema
        assert tools[0]["method"] == "GET" and tools[0]["path"] == "/v1/forecast"
    elif format == "openai":
        assert tools[0]["function"]["parameters"] == catalog_tool.input_schema
    elif format == "mcp":
        assert tools[0]["inputSchema"] == catalog_tool.input_schema


def test_tools_of_unknown_agent_or_format(gw: tuple[str, Any]) -> None:
    url, _ = gw
    response = httpx.get(f"{url}/agents/nobody/tools")
    assert response.status_code == 404
    assert "nobody" in _error_of(response)["message"]
    response = httpx.get(f"{url}/agents/weather/tools", params={"format": "yaml"})
    assert response.status_code == 400
    assert _error_of(response)["param"] == "format"


def test_direct_call_sends_the_spec_request(gw: tuple[str, Any], upstream: RecordingServer) -> None:
    url, _ = gw
    response = httpx.post(f"{url}/agents/weather/tools/getForecast",
                          json={"latitude": 52.52, "longitude": 13.41, "current": ["temperature_2m", "is_day"]})
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["ok"] is True and result["status"] == 200
    assert result["body"]["current"]["temperature_2m"] == 3.5
    sent = upstream.last
    assert sent.path == "/meteo/v1/forecast"
    assert dict(sent.query) == {"latitude": "52.52", "longitude": "13.41", "current": "temperature_2m,is_day"}


def test_direct_call_invalid_arguments_is_422_with_the_result(gw: tuple[str, Any],
                                                              upstream: RecordingServer) -> None:
    url, _ = gw
    response = httpx.post(f"{url}/agents/weather/tools/getForecast", json={"latitude": "north"})
    assert response.status_code == 422
    error = _error_of(response)
    assert "latitude" in error["message"] or "longitude" in error["message"]
    assert response.json()["result"]["error_type"] == "invalid_arguments"
    assert upstream.requests == []


def test_direct_call_upstream_failure_is_502(gw: tuple[str, Any], upstream: RecordingServer) -> None:
    url, _ = gw
    upstream.route("/meteo/", Reply(500, {"error": True, "reason": "down"}))
    response = httpx.post(f"{url}/agents/weather/tools/getForecast", json={"latitude": 1, "longitude": 2})
    assert response.status_code == 502
    assert response.json()["result"]["status"] == 500


def test_direct_call_of_a_write_under_approval_does_not_run(gw: tuple[str, Any], upstream: RecordingServer) -> None:
    url, _ = gw
    response = httpx.post(f"{url}/agents/triage/tools/createIssueComment",
                          json={"owner": "acme", "repo": "app", "issue_number": 7, "body": "hi"})
    # this app has no approval queue (the safety layer adds one): the call is refused, never sent
    assert response.status_code == 403
    assert _error_of(response)["code"] == "approval_denied"
    assert not [r for r in upstream.requests if r.method == "POST"]


def test_direct_call_errors(gw: tuple[str, Any]) -> None:
    url, _ = gw
    cases = [
        (f"{url}/agents/nobody/tools/getForecast", b"{}", 404),
        (f"{url}/agents/weather/tools/getIssue", b"{}", 404),  # another agent's tool
        (f"{url}/agents/weather/tools/getForecast", b"{not json", 400),
        (f"{url}/agents/weather/tools/getForecast", b"[1, 2]", 400),
    ]
    for target, body, status in cases:
        response = httpx.post(target, content=body, headers={"content-type": "application/json"})
        assert response.status_code == status, (target, body, response.text)
        _error_of(response)


def test_unknown_route_and_method_are_openai_shaped(gw: tuple[str, Any]) -> None:
    url, _ = gw
    response = httpx.get(f"{url}/nowhere")
    assert response.status_code == 404
    _error_of(response)
    response = httpx.delete(f"{url}/v1/models")
    assert response.status_code == 405
    _error_of(response)


def test_body_over_the_limit_is_413(tmp_path: Any, llm: Any, upstream: RecordingServer) -> None:
    from server_support import gateway

    with gateway(tmp_path, llm.url, upstream.url, max_body_bytes=1000) as (url, _):
        big = {"latitude": 1, "longitude": 2, "timezone": "x" * 2000}
        response = httpx.post(f"{url}/agents/weather/tools/getForecast", json=big)
        assert response.status_code == 413
        assert _error_of(response)["code"] == "request_too_large"

        def chunks():  # no Content-Length: counted as it arrives
            yield b'{"latitude": 1, "longitude": 2, "timezone": "'
            for _ in range(10):
                yield b"y" * 200
            yield b'"}'

        response = httpx.post(f"{url}/agents/weather/tools/getForecast", content=chunks(),
                              headers={"content-type": "application/json"})
        assert response.status_code == 413
        assert upstream.requests == []


def test_with_the_safety_layer_a_held_write_runs_once_approved(tmp_path: Any, llm: Any,
                                                              upstream: RecordingServer) -> None:
    from server_support import running, write_project

    from gateway.runtime import RuntimeHolder, load_runtime
    from gateway.server import create_app
    from gateway.server.supervision import Safety

    specs, agents = write_project(tmp_path, llm.url, upstream.url)
    runtime = load_runtime(specs, agents, use_cache=False)
    app = create_app(RuntimeHolder(runtime), watch=False, **Safety.open(runtime, store="memory:").app_options())
    with running(app) as url:
        arguments = {"owner": "acme", "repo": "app", "issue_number": 7, "body": "On it."}
        held = httpx.post(f"{url}/agents/triage/tools/createIssueComment", json=arguments)
        assert held.status_code == 202
        approval = held.json()["approval_id"]
        assert not [r for r in upstream.requests if r.method == "POST"]

        done = httpx.post(f"{url}/approvals/{approval}", json={"decision": "approve"})
        assert done.status_code == 200
        assert done.json()["result"]["status"] == 201
        sent = [r for r in upstream.requests if r.method == "POST"]
        assert [r.path for r in sent] == ["/github/repos/acme/app/issues/7/comments"]
        assert sent[0].json() == {"body": "On it."}


def test_a_client_sees_only_its_own_models(tmp_path: Any, llm: Any, upstream: RecordingServer) -> None:
    from server_support import AGENTS_YAML, running, write_project

    from gateway.runtime import RuntimeHolder, load_runtime
    from gateway.server import create_app
    from gateway.server.supervision import Safety

    clients = "clients:\n  bot: {{key: bot-key-123456, agents: [weather]}}\n"
    specs, agents = write_project(tmp_path, llm.url, upstream.url, AGENTS_YAML + clients)
    runtime = load_runtime(specs, agents, use_cache=False)
    app = create_app(RuntimeHolder(runtime), watch=False, **Safety.open(runtime, store="memory:").app_options())
    with running(app) as url:
        headers = {"Authorization": "Bearer bot-key-123456"}
        assert httpx.get(f"{url}/v1/models/weather", headers=headers).json()["id"] == "weather"
        hidden = httpx.get(f"{url}/v1/models/triage", headers=headers)
        assert hidden.status_code == 404
        assert "weather" not in hidden.text and "triage" in hidden.text  # names only what was asked
        assert httpx.get(f"{url}/v1/models/weather").status_code == 401
