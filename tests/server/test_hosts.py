"""Cross-site requests and DNS rebinding on the REST doors: foreign Host, foreign Origin, non-JSON bodies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from recording_server import RecordingServer
from server_support import AGENTS_YAML, LenientLLM, running, write_project

from gateway.config.settings import GatewaySettings
from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app
from gateway.server.hosts import HostPolicy
from gateway.server.supervision import Safety

WEATHER_KEY = "ck-weather-5f1e2d3c4b5a6978"
TRIAGE_KEY = "ck-triage-a1b2c3d4e5f60718"
SAFE_AGENTS_YAML = AGENTS_YAML + f"""\
clients:
  weather-bot: {{{{key: {WEATHER_KEY}, agents: [weather]}}}}
  triage-bot: {{{{key: {TRIAGE_KEY}, agents: [triage]}}}}
"""
FORECAST_ARGS = {"latitude": 52.52, "longitude": 13.41}
COMMENT_ARGS = {"owner": "acme", "repo": "app", "issue_number": 7, "body": "hi"}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def build_app(folder: Path, *, store: Path) -> tuple[Any, Safety]:
    runtime = load_runtime(folder / "specs", folder / "agents.yaml", use_cache=False)
    safety = Safety.open(runtime, store=str(store))
    return create_app(RuntimeHolder(runtime), watch=False, **safety.app_options()), safety


@pytest.fixture
def served(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Iterator[str]:
    """The default setup: no `clients`, loopback only, the safety layer (approvals) on."""
    write_project(tmp_path, llm.url, upstream.url, AGENTS_YAML + "gateway: {{allowed_hosts: [gw.internal]}}\n")
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    try:
        with running(app) as url:
            yield url
    finally:
        safety.store.close()  # type: ignore[attr-defined]


def _pending_approval(url: str) -> str:
    answer = httpx.post(f"{url}/agents/triage/tools/createIssueComment", json=COMMENT_ARGS)
    assert answer.status_code == 202
    return str(answer.json()["approval_id"])


def test_a_foreign_host_is_refused_on_every_door(served: str, upstream: RecordingServer) -> None:
    approval = _pending_approval(served)
    foreign = {"Host": "attacker.example:8080"}  # a rebinding page: its own name, resolved to 127.0.0.1
    requests: list[tuple[str, str, Any]] = [
        ("POST", "/agents/weather/tools/getForecast", FORECAST_ARGS),
        ("POST", "/v1/chat/completions", {"model": "weather", "messages": [{"role": "user", "content": "hi"}]}),
        ("GET", "/agents", None),
        ("GET", "/approvals", None),
        ("POST", f"/approvals/{approval}", {"decision": "approve"}),
        ("GET", "/v1/models", None),
    ]
    before = len(upstream.requests)
    for method, path, body in requests:
        response = httpx.request(method, served + path, json=body, headers=foreign)
        assert response.status_code == 421, (method, path)
        assert response.json()["error"]["code"] == "host_not_allowed"
    assert len(upstream.requests) == before  # nothing ran
    assert approval in httpx.get(f"{served}/approvals").text  # and nothing was approved
    # The loopback names on any port and the configured host are the gateway's own.
    port = served.rsplit(":", 1)[1]
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "gw.internal", "GW.internal:443"):
        assert httpx.get(f"{served}/agents", headers={"Host": host}).status_code == 200, host


def test_a_foreign_origin_may_not_change_state(served: str, upstream: RecordingServer) -> None:
    approval = _pending_approval(served)
    before = len(upstream.requests)
    for origin in ("https://evil.example", "null", "http://127.0.0.1.evil.example"):
        headers = {"Origin": origin}
        call = httpx.post(f"{served}/agents/weather/tools/getForecast", json=FORECAST_ARGS, headers=headers)
        assert call.status_code == 403 and call.json()["error"]["code"] == "origin_not_allowed"
        decided = httpx.post(f"{served}/approvals/{approval}", json={"decision": "approve"}, headers=headers)
        assert decided.status_code == 403
        chat = httpx.post(f"{served}/v1/chat/completions", headers=headers,
                          json={"model": "weather", "messages": [{"role": "user", "content": "hi"}]})
        assert chat.status_code == 403
    assert len(upstream.requests) == before
    # The gateway's own origin (a console served by it) and reads are fine.
    port = served.rsplit(":", 1)[1]
    same = httpx.post(f"{served}/agents/weather/tools/getForecast", json=FORECAST_ARGS,
                      headers={"Origin": f"http://localhost:{port}"})
    assert same.status_code == 200
    assert httpx.get(f"{served}/agents", headers={"Origin": "https://evil.example"}).status_code == 200


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", None])
def test_a_body_must_be_declared_json(served: str, upstream: RecordingServer, content_type: str | None) -> None:
    """What a cross-site form or `fetch` sends without a preflight is refused before anything reads it."""
    approval = _pending_approval(served)
    before = len(upstream.requests)
    headers = {"Content-Type": content_type} if content_type else {}
    for path, body in (("/agents/weather/tools/getForecast", FORECAST_ARGS),
                       (f"/approvals/{approval}", {"decision": "approve"}),
                       ("/v1/chat/completions", {"model": "weather", "messages": [{"role": "user", "content": "x"}]})):
        response = httpx.post(served + path, content=json.dumps(body), headers=headers)
        assert response.status_code == 415, path
        assert response.json()["error"]["code"] == "unsupported_media_type"
    assert len(upstream.requests) == before
    # JSON with a charset or a +json type is JSON; an empty call needs no type.
    ok = httpx.post(f"{served}/agents/weather/tools/getForecast", content=b'{"latitude": 1, "longitude": 2}',
                    headers={"Content-Type": "application/json; charset=utf-8"})
    assert ok.status_code == 200
    assert httpx.post(f"{served}/agents/triage/tools/listIssues").status_code != 415


def _settings(**settings: Any) -> GatewaySettings:
    return GatewaySettings.model_validate(settings)


def test_policy_on_other_binds() -> None:
    assert HostPolicy.build("0.0.0.0").host_allowed("anything.example")  # keys guard a public bind
    policy = HostPolicy.build("0.0.0.0", _settings(allowed_hosts=["*.example.com", "gw.example.org:8443"]))
    assert policy.host_allowed("a.example.com") and policy.host_allowed("gw.example.org:8443")
    assert not policy.host_allowed("gw.example.org") and not policy.host_allowed("example.com.evil")
    assert HostPolicy.build("127.0.0.1", _settings(allowed_hosts=["*"])).host_allowed("x")
    assert HostPolicy.build("::1").host_allowed("[::1]:8080")
    origins = HostPolicy.build("127.0.0.1", _settings(allowed_origins=["https://console.example"]))
    assert origins.origin_allowed("https://console.example", "127.0.0.1:1")
    assert not origins.origin_allowed("https://other.example", "127.0.0.1:1")


def test_behind_a_url_prefix_keys_still_only_reach_their_agents(tmp_path: Path, llm: LenientLLM,
                                                                upstream: RecordingServer) -> None:
    """Served under a root path (a reverse proxy at /gw): weather-bot may not use triage on any door."""
    write_project(tmp_path, llm.url, upstream.url, SAFE_AGENTS_YAML)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    try:
        with running(app, root_path="/gw") as url:
            base = url  # the proxy strips /gw; uvicorn puts the root path back in front of each path
            key = bearer(WEATHER_KEY)
            before = len(upstream.requests)
            call = httpx.post(f"{base}/agents/triage/tools/getIssue", headers=key,
                              json={"owner": "acme", "repo": "app", "issue_number": 7})
            assert call.status_code == 403 and call.json()["error"]["code"] == "agent_forbidden"
            queued = httpx.post(f"{base}/agents/triage/tools/createIssueComment", headers=key, json=COMMENT_ARGS)
            assert queued.status_code == 403
            chat = httpx.post(f"{base}/v1/chat/completions", headers=key,
                              json={"model": "triage", "messages": [{"role": "user", "content": "hi"}]})
            assert chat.status_code == 403
            responses = httpx.post(f"{base}/v1/responses", headers=key, json={"model": "triage", "input": "hi"})
            assert responses.status_code == 403
            assert httpx.get(f"{base}/agents/triage/tools", headers=key).status_code == 403
            mcp = httpx.post(f"{base}/mcp/triage", headers={**key, "Accept": "application/json, text/event-stream"},
                             json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                                 "protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "t", "version": "1"}}})
            assert mcp.status_code == 403
            for path in ("/mcp?agent=triage", "/mcp/triage/mcp"):  # the MCP Inspector's forms
                other = httpx.post(f"{base}{path}", headers={**key, "Accept": "application/json, text/event-stream"},
                                   json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
                assert other.status_code == 403, path
            assert len(upstream.requests) == before
            assert [a["name"] for a in httpx.get(f"{base}/agents", headers=key).json()["data"]] == ["weather"]
            assert [m["id"] for m in httpx.get(f"{base}/v1/models", headers=key).json()["data"]] == ["weather"]
            assert httpx.get(f"{base}/approvals", headers=bearer(TRIAGE_KEY)).json()["data"] == []
            ok = httpx.post(f"{base}/agents/weather/tools/getForecast", headers=key, json=FORECAST_ARGS)
            assert ok.status_code == 200
            assert httpx.get(f"{base}/healthz").status_code == 200
    finally:
        safety.store.close()  # type: ignore[attr-defined]


def test_a_public_bind_without_keys_answers_local_names_only() -> None:
    # `--allow-public` without keys (the Docker example, published on the host's loopback): a page whose own domain
    # rebinds to 127.0.0.1 reaches the port, so a domain name is refused; an address or a compose service is not.
    policy = HostPolicy.build("0.0.0.0", keyless=True)
    for host in ("127.0.0.1:8080", "localhost:8080", "[::1]:8080", "172.18.0.3:8080", "gateway-a:8080", "gateway-a"):
        assert policy.host_allowed(host), host
    for host in ("rebind.attacker.example:8080", "attacker.example", "localhost.attacker.example", ""):
        assert not policy.host_allowed(host), host
    configured = HostPolicy.build("0.0.0.0", _settings(allowed_hosts=["gw.example.com"]), keyless=True)
    assert configured.host_allowed("gw.example.com") and not configured.host_allowed("gateway-a")


def test_the_served_policy_knows_whether_keys_guard_the_gateway() -> None:
    from gateway.config.model import Manifest
    from gateway.server.hosts import PolicySource

    keyed = Manifest.model_validate({"clients": {"bot": {"key": "ck-0123456789abcdef"}}})
    assert PolicySource("0.0.0.0", keyed).current.host_allowed("gw.example.com")
    assert not PolicySource("0.0.0.0", Manifest.model_validate({})).current.host_allowed("gw.example.com")


MCP_ACCEPT = "application/json, text/event-stream"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def test_the_mcp_door_refuses_a_rebinding_page_and_a_cross_site_request(served: str,
                                                                       upstream: RecordingServer) -> None:
    """redteam45: the MCP door's every form (/mcp/AGENT, /mcp/AGENT/mcp, ?agent=, a session's requests, the
    stateless protocol) under a foreign Host, a foreign Origin or a body a cross-site form can send."""
    opened = httpx.post(f"{served}/mcp/weather", json=INITIALIZE, headers={"Accept": MCP_ACCEPT})
    assert opened.status_code == 200
    session = opened.headers["mcp-session-id"]
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "getForecast", "arguments": FORECAST_ARGS}}
    before = len(upstream.requests)
    port = served.rsplit(":", 1)[1]
    refusals: list[tuple[dict[str, str], int]] = [
        ({"Host": "attacker.example"}, 421), ({"Host": f"attacker.example:{port}"}, 421),
        ({"Host": "localhost.attacker.example"}, 421),
        ({"Origin": "https://evil.example"}, 403), ({"Origin": "null"}, 403),
        ({"Origin": f"http://127.0.0.1.evil.example:{port}"}, 403),
    ]
    for path in ("/mcp/weather", "/mcp/weather/mcp", "/mcp?agent=weather"):
        for extra, status in refusals:
            for headers, body in (({"Accept": MCP_ACCEPT}, INITIALIZE),
                                  ({"Accept": MCP_ACCEPT, "mcp-session-id": session,
                                    "mcp-protocol-version": "2025-06-18"}, call),
                                  ({"Accept": MCP_ACCEPT, "mcp-protocol-version": "2026-07-28"}, call)):
                answer = httpx.post(served + path, json=body, headers={**headers, **extra})
                assert answer.status_code == status, (path, extra, headers, answer.status_code, answer.text[:200])
            ended = httpx.delete(served + path, headers={"mcp-session-id": session, **extra})
            assert ended.status_code == status, (path, extra, ended.status_code)
        plain = httpx.post(served + path, content=json.dumps(call), headers={
            "Accept": MCP_ACCEPT, "Content-Type": "text/plain", "mcp-session-id": session})
        assert plain.status_code == 415, (path, plain.status_code)
    assert len(upstream.requests) == before  # nothing ran
    # the session lives on for its own client
    ok = httpx.post(f"{served}/mcp/weather", json=call, headers={
        "Accept": MCP_ACCEPT, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"})
    assert ok.status_code == 200 and len(upstream.requests) == before + 1
