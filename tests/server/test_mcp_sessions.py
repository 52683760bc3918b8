"""MCP sessions (2025 protocol) on a running gateway: a cap per client, an idle timeout, a session bound to the
key and agent that opened it, and the agent check under a URL prefix."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from recording_server import RecordingServer
from server_support import AGENTS_YAML, FORECAST, LenientLLM, gateway, running, write_project

from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app
from gateway.server.mcp.sessions import SessionLedger, SessionLimits
from gateway.server.supervision import Safety

WEATHER_KEY = "ck-weather-5f1e2d3c4b5a6978"
SECOND_KEY = "ck-second-0a9b8c7d6e5f4031"
TRIAGE_KEY = "ck-triage-a1b2c3d4e5f60718"
CLIENTS = f"""\
clients:
  weather-bot: {{{{key: {WEATHER_KEY}, agents: [weather]}}}}
  second-bot: {{{{key: {SECOND_KEY}, agents: [weather]}}}}
  triage-bot: {{{{key: {TRIAGE_KEY}, agents: [triage]}}}}
"""
HEADERS = {"accept": "application/json, text/event-stream"}
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "getForecast", "arguments": {"latitude": 52.52, "longitude": 13.41}}}


def _settings(**mcp: Any) -> str:
    """A `gateway.mcp` section, its braces doubled for the `str.format` that fills in the URLs."""
    return "gateway:\n  mcp: {{" + ", ".join(f"{k}: {v}" for k, v in mcp.items()) + "}}\n" if mcp else ""


@contextmanager
def keyed_gateway(folder: Path, llm: LenientLLM, upstream: RecordingServer, *, root_path: str = "",
                  **mcp: Any) -> Iterator[str]:
    """A gateway with client keys (the safety layer's auth) and `gateway.mcp` settings."""
    write_project(folder, llm.url, upstream.url, AGENTS_YAML + CLIENTS + _settings(**mcp))
    runtime = load_runtime(folder / "specs", folder / "agents.yaml", use_cache=False)
    safety = Safety.open(runtime, store=str(folder / "state.db"))
    app = create_app(RuntimeHolder(runtime), watch=False, **safety.app_options())
    try:
        with running(app, root_path=root_path) as url:
            yield url
    finally:
        safety.store.close()  # type: ignore[attr-defined]


def _key(key: str) -> dict[str, str]:
    return {**HEADERS, "authorization": f"Bearer {key}"}


def _open(client: httpx.Client, url: str, headers: dict[str, str]) -> httpx.Response:
    return client.post(url, json=INITIALIZE, headers=headers)


def _session(opened: httpx.Response, headers: dict[str, str]) -> dict[str, str]:
    assert opened.status_code == 200, opened.text
    return {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}


def test_a_client_holds_at_most_its_cap_of_sessions(tmp_path: Path, llm: LenientLLM,
                                                    upstream: RecordingServer) -> None:
    with keyed_gateway(tmp_path, llm, upstream, max_sessions_per_client=2) as url, httpx.Client(timeout=10) as client:
        weather = f"{url}/mcp/weather"
        first = _session(_open(client, weather, _key(WEATHER_KEY)), _key(WEATHER_KEY))
        _session(_open(client, weather, _key(WEATHER_KEY)), _key(WEATHER_KEY))
        refused = _open(client, weather, _key(WEATHER_KEY))
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "too_many_sessions"
        assert "max_sessions_per_client" in refused.json()["error"]["message"]
        assert int(refused.headers["retry-after"]) > 0
        # Other clients are not affected, even on the same agent.
        _session(_open(client, weather, _key(SECOND_KEY)), _key(SECOND_KEY))
        _session(_open(client, f"{url}/mcp/triage", _key(TRIAGE_KEY)), _key(TRIAGE_KEY))
        # The client's open sessions still work, and ending one makes room for a new one.
        assert client.post(weather, json=CALL, headers=first).json()["result"]["structuredContent"] == FORECAST
        assert client.delete(weather, headers=first).status_code == 200
        _session(_open(client, weather, _key(WEATHER_KEY)), _key(WEATHER_KEY))
        assert _open(client, weather, _key(WEATHER_KEY)).status_code == 429


def test_without_keys_the_cap_is_per_peer_address(tmp_path: Path, llm: LenientLLM,
                                                  upstream: RecordingServer) -> None:
    yaml = AGENTS_YAML + _settings(max_sessions_per_client=1)
    with gateway(tmp_path, llm.url, upstream.url, agents_yaml=yaml) as (url, _), httpx.Client(timeout=10) as client:
        _session(_open(client, f"{url}/mcp/weather", HEADERS), HEADERS)
        assert _open(client, f"{url}/mcp/triage", HEADERS).status_code == 429
        # The stateless 2026-07-28 protocol opens no session: never refused for it.
        listed = client.post(f"{url}/mcp/weather", headers={
            **HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {}}}})
        assert listed.status_code == 200 and listed.json()["result"]["tools"][0]["name"] == "getForecast"


def test_idle_sessions_end_after_the_configured_timeout_and_free_their_slot(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    with keyed_gateway(tmp_path, llm, upstream, session_idle_timeout=0.3, max_sessions_per_client=1) as url, \
            httpx.Client(timeout=10) as client:
        weather = f"{url}/mcp/weather"
        session = _session(_open(client, weather, _key(WEATHER_KEY)), _key(WEATHER_KEY))
        assert _open(client, weather, _key(WEATHER_KEY)).status_code == 429
        time.sleep(0.8)
        assert client.post(weather, json=CALL, headers=session).status_code == 404  # the SDK closed it
        _session(_open(client, weather, _key(WEATHER_KEY)), _key(WEATHER_KEY))  # and the slot is free again


def test_an_idle_session_untouched_since_is_ended_in_the_sdk_too(tmp_path: Path, llm: LenientLLM,
                                                                   upstream: RecordingServer) -> None:
    """The SDK counts a session in its total (`max_sessions`) until it is ended there: an idle one nobody uses again
    is ended by the endpoint, so the slot is free for anyone."""
    with keyed_gateway(tmp_path, llm, upstream, session_idle_timeout=0.3, max_sessions=1) as url, \
            httpx.Client(timeout=10) as client:
        weather = f"{url}/mcp/weather"
        _session(_open(client, weather, _key(WEATHER_KEY)), _key(WEATHER_KEY))
        assert _open(client, weather, _key(SECOND_KEY)).status_code == 503  # the SDK's total, another client
        time.sleep(0.8)
        _session(_open(client, weather, _key(SECOND_KEY)), _key(SECOND_KEY))


def test_a_session_is_bound_to_the_key_that_opened_it(tmp_path: Path, llm: LenientLLM,
                                                      upstream: RecordingServer) -> None:
    with keyed_gateway(tmp_path, llm, upstream) as url, httpx.Client(timeout=10) as client:
        weather = f"{url}/mcp/weather"
        session = _session(_open(client, weather, _key(WEATHER_KEY)), _key(WEATHER_KEY))
        sent = len(upstream.requests)
        borrowed = {**session, "authorization": f"Bearer {SECOND_KEY}"}  # another key allowed the same agent
        stolen = client.post(weather, json=CALL, headers=borrowed)
        assert stolen.status_code == 404  # as if the session did not exist
        assert client.delete(weather, headers=borrowed).status_code == 404
        assert len(upstream.requests) == sent
        own = client.post(weather, json=CALL, headers=session)
        assert own.status_code == 200 and own.json()["result"]["structuredContent"] == FORECAST


def test_a_session_is_bound_to_its_agent(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    with gateway(tmp_path, llm.url, upstream.url) as (url, _), httpx.Client(timeout=10) as client:
        session = _session(_open(client, f"{url}/mcp/weather", HEADERS), HEADERS)
        listed = client.post(f"{url}/mcp/triage", headers=session,
                             json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert listed.status_code == 404
        again = client.post(f"{url}/mcp/weather", headers=session,
                            json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
        assert again.status_code == 200  # the other agent's 404 did not end it


def test_under_a_url_prefix_a_key_reaches_only_its_agents(tmp_path: Path, llm: LenientLLM,
                                                          upstream: RecordingServer) -> None:
    with keyed_gateway(tmp_path, llm, upstream, root_path="/gw") as url, httpx.Client(timeout=10) as client:
        for path in ("/mcp/triage", "/mcp/triage/mcp", "/mcp?agent=triage"):  # the proxy strips /gw
            refused = _open(client, url + path, _key(WEATHER_KEY))
            assert refused.status_code == 403, (path, refused.text)
            assert refused.json()["error"]["code"] == "agent_forbidden"
            assert "its agents are: weather." in refused.json()["error"]["message"], refused.text
        _session(_open(client, f"{url}/mcp/weather", _key(WEATHER_KEY)), _key(WEATHER_KEY))
    assert not upstream.requests


def test_the_agent_query_parameter_is_checked_against_the_key(tmp_path: Path, llm: LenientLLM,
                                                              upstream: RecordingServer) -> None:
    with keyed_gateway(tmp_path, llm, upstream) as url, httpx.Client(timeout=10) as client:
        assert _open(client, f"{url}/mcp?agent=triage", _key(WEATHER_KEY)).status_code == 403
        assert _open(client, f"{url}/mcp?agent=weather", {}).status_code == 401
        session = _session(_open(client, f"{url}/mcp?agent=weather", _key(WEATHER_KEY)), _key(WEATHER_KEY))
        called = client.post(f"{url}/mcp?agent=weather", json=CALL, headers=session)
        assert called.json()["result"]["structuredContent"] == FORECAST


def test_the_ledger_counts_what_is_open_and_in_flight() -> None:
    now = [0.0]
    ledger = SessionLedger(SessionLimits(session_idle_timeout=10, max_sessions_per_client=2), clock=lambda: now[0])
    assert ledger.reserve("a") and ledger.reserve("a")
    assert not ledger.reserve("a")  # two being opened at once count already
    ledger.opened("s1", "a", "weather")
    ledger.release("a")
    ledger.release("a")  # the second opening failed: no session
    assert ledger.open_count("a") == 1
    ledger.request_started("s1")
    now[0] = 100.0  # a long call: in flight, so not idle
    assert ledger.open_count("a") == 1
    ledger.request_ended("s1", "b", "weather", gone=True)  # another owner's 404 is no news about s1
    assert ledger.open_count("a") == 1
    now[0] = 105.0
    assert ledger.open_count("a") == 1  # idle 5 s of 10
    now[0] = 111.0
    assert ledger.open_count("a") == 0 and len(ledger) == 0


def test_the_ledger_says_which_sessions_it_ended_for_idleness() -> None:
    """The SDK keeps no idle timeout of its own (requests answered inline never reach its transport): the ledger
    names each session it ends for idleness, so the endpoint ends it in the SDK too, and only those."""
    now = [0.0]
    idle: list[str] = []
    ended: list[str] = []
    ledger = SessionLedger(SessionLimits(session_idle_timeout=10), clock=lambda: now[0], on_end=ended.append,
                           on_idle=idle.append)
    for session in ("s1", "s2", "s3"):
        ledger.opened(session, "a", "weather")
    ledger.request_started("s2")  # in flight: not idle however long it takes
    ledger.request_started("s3")
    ledger.request_ended("s3", "a", "weather", gone=True)  # ended by its own DELETE (or a 404): not idle
    now[0] = 5.0
    assert not ledger.expire("s1") and idle == []
    now[0] = 11.0
    assert ledger.expire("s1") and not ledger.expire("s1")  # once
    ledger.sweep()
    assert idle == ["s1"] and ended == ["s3", "s1"] and len(ledger) == 1
    ledger.request_ended("s2", "a", "weather", gone=False)
    now[0] = 22.0
    ledger.sweep()
    assert idle == ["s1", "s2"] and len(ledger) == 0


def test_a_bad_mcp_setting_is_reported_with_its_line_when_the_manifest_loads() -> None:
    import textwrap

    from gateway.config.loader import parse_manifest

    _, diagnostics = parse_manifest(textwrap.dedent("""
        gateway:
          mcp: {max_sessions_per_client: 0}
        """), catalog=None, environ={})
    errors = [(d.line, d.message) for d in diagnostics if d.level == "error"]
    assert errors == [(3, "must be at least 1, got 0")]


def test_a_request_on_an_idle_session_ends_it_in_the_same_lookup() -> None:
    """`request_started` is what `expire` then counting in flight were: a session idle past its timeout is ended
    (and named for the SDK) and says so; any other is counted in flight."""
    now = [0.0]
    idle: list[str] = []
    ledger = SessionLedger(SessionLimits(session_idle_timeout=10), clock=lambda: now[0], on_idle=idle.append)
    ledger.opened("s1", "a", "weather")
    ledger.opened("s2", "a", "weather")
    now[0] = 5.0
    assert ledger.request_started("s1") is False  # counted in flight
    now[0] = 20.0
    assert ledger.request_started("s1") is False  # in flight since: not idle
    assert ledger.request_started("s2") is True and idle == ["s2"] and len(ledger) == 1
    assert ledger.request_started("s2") is False  # over: nothing to count
    assert ledger.request_started("unknown") is False
