"""Each client key may use only its agents, on every door of a running gateway."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import LenientLLM

from .safety_support import TRIAGE_KEY, WEATHER_KEY, bearer, safe_gateway

COMMENT = Call("createIssueComment", {"owner": "acme", "repo": "app", "issue_number": 7, "body": "On it."})
FORECAST = Call("getForecast", {"latitude": 52.52, "longitude": 13.41, "current": ["temperature_2m"]})
MCP_INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def gw(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Iterator[httpx.Client]:
    with safe_gateway(tmp_path, llm.url, upstream.url) as (url, _), httpx.Client(base_url=url, timeout=30) as client:
        yield client


def _doors(agent: str) -> list[tuple[str, str, dict]]:
    """(method, path, request kwargs) of every door that names an agent."""
    tool = "getForecast" if agent == "weather" else "getIssue"
    return [
        ("POST", "/v1/chat/completions", {"json": {"model": agent, "messages": [{"role": "user", "content": "hi"}]}}),
        ("POST", "/v1/chat/completions", {"json": {"model": agent, "stream": True,
                                                   "messages": [{"role": "user", "content": "hi"}]}}),
        ("GET", f"/agents/{agent}/tools", {}),
        ("GET", f"/agents/{agent}/tools?format=openai", {}),
        ("POST", f"/agents/{agent}/tools/{tool}", {"json": {}}),
        ("POST", f"/mcp/{agent}", {"json": MCP_INIT, "headers": MCP_HEADERS}),
    ]


def test_no_key_is_401_on_every_door(gw: httpx.Client) -> None:
    doors = [*_doors("weather"), ("GET", "/v1/models", {}), ("GET", "/agents", {}), ("GET", "/approvals", {}),
             ("POST", "/approvals/apr_x", {"json": {"decision": "approve"}}), ("GET", "/audit", {})]
    for index, (method, path, kwargs) in enumerate(doors):
        # Each made-up key from an address of its own: one address sending many is slowed (test_wrong_keys.py).
        transport = httpx.HTTPTransport(local_address=f"127.0.1.{index + 1}")
        with httpx.Client(base_url=gw.base_url, timeout=30, transport=transport) as guesser:
            for client, headers in ((gw, {}), (guesser, bearer("ck-made-up-key"))):
                response = client.request(method, path,
                                          **{**kwargs, "headers": {**kwargs.get("headers", {}), **headers}})
                assert response.status_code == 401, (method, path, response.text)
    assert gw.get("/healthz").status_code == 200


def test_a_key_cannot_use_another_agent_on_any_door(gw: httpx.Client, llm: LenientLLM,
                                                    upstream: RecordingServer) -> None:
    for method, path, kwargs in _doors("triage"):
        headers = {**kwargs.get("headers", {}), **bearer(WEATHER_KEY)}
        response = gw.request(method, path, **{**kwargs, "headers": headers})
        assert response.status_code == 403, (method, path, response.text)
    assert llm.requests == [] and upstream.requests == []  # nothing ran for the refused requests


def test_a_key_uses_its_own_agent(gw: httpx.Client, llm: LenientLLM) -> None:
    llm.script(Reply(calls=[FORECAST]), Reply(text="3.5 °C"))
    chat = gw.post("/v1/chat/completions", headers=bearer(WEATHER_KEY),
                   json={"model": "weather", "messages": [{"role": "user", "content": "Berlin?"}]})
    assert chat.status_code == 200 and chat.json()["choices"][0]["message"]["content"] == "3.5 °C"
    assert gw.get("/agents/weather/tools", headers=bearer(WEATHER_KEY)).status_code == 200
    mcp = gw.post("/mcp/weather", json=MCP_INIT, headers={**MCP_HEADERS, **bearer(WEATHER_KEY)})
    assert mcp.status_code == 200


def test_listings_show_only_the_keys_agents(gw: httpx.Client) -> None:
    models = gw.get("/v1/models", headers=bearer(WEATHER_KEY)).json()["data"]
    assert [m["id"] for m in models] == ["weather"]
    agents = gw.get("/agents", headers=bearer(TRIAGE_KEY)).json()["data"]
    assert [a["name"] for a in agents] == ["triage"]


def test_approvals_and_audit_are_per_key(gw: httpx.Client, llm: LenientLLM, upstream: RecordingServer) -> None:
    llm.script(Reply(calls=[COMMENT]))
    paused = gw.post("/v1/chat/completions", headers=bearer(TRIAGE_KEY),
                     json={"model": "triage", "messages": [{"role": "user", "content": "triage #7"}]}).json()
    (pending,) = paused["gateway"]["pending_approvals"]
    assert [a["id"] for a in gw.get("/approvals", headers=bearer(TRIAGE_KEY)).json()["data"]] == [pending["id"]]
    assert gw.get("/approvals", headers=bearer(WEATHER_KEY)).json()["data"] == []
    foreign = gw.post(f"/approvals/{pending['id']}", headers=bearer(WEATHER_KEY), json={"decision": "approve"})
    assert foreign.status_code == 403
    assert not any(r.method == "POST" for r in upstream.requests)  # the write never ran
    rows = gw.get("/audit", headers=bearer(TRIAGE_KEY)).json()["data"]
    assert {r["agent"] for r in rows} == {"triage"} and any(r["approval"] == pending["id"] for r in rows)
    assert gw.get("/audit", headers=bearer(WEATHER_KEY)).json()["data"] == []
    # The right key still can decide it.
    llm.script(Reply(text="Commented."))
    done = gw.post(f"/approvals/{pending['id']}", headers=bearer(TRIAGE_KEY), json={"decision": "approve"})
    assert done.status_code == 200 and done.json()["choices"][0]["message"]["content"] == "Commented."


def test_the_agent_cannot_be_smuggled_past_the_check(gw: httpx.Client, llm: LenientLLM) -> None:
    smuggled = [
        b'{"model": "weather", "model": "triage", "messages": [{"role": "user", "content": "hi"}]}',
        b'{"model": "tri\\u0061ge", "messages": [{"role": "user", "content": "hi"}]}',
    ]
    for body in smuggled:
        response = gw.post("/v1/chat/completions", content=body,
                           headers={**bearer(WEATHER_KEY), "Content-Type": "application/json"})
        assert response.status_code == 403, body
    assert gw.get("//agents/triage/tools", headers=bearer(WEATHER_KEY)).status_code in (403, 404)
    assert llm.requests == []
