"""Configured hooks on every door (chat, direct call, MCP): each kind allows, denies and modifies, as a Python
callable and as an HTTP endpoint; a hook that times out follows `on_error`. The pipeline is shared, so one
hook's verdict is the same wherever the call came in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sample_hooks
from mcp import Client
from recording_server import RecordingServer
from recording_server import Reply as UpstreamReply
from scripted_llm import Call, Reply
from server_support import AGENTS_YAML, FORECAST, LenientLLM, gateway, running

from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app

pytestmark = pytest.mark.anyio

ARGS = {"latitude": 52.52, "longitude": 13.41, "current": ["temperature_2m"]}
DOORS = ["chat", "direct", "mcp"]


def project(hooks: str) -> str:
    """AGENTS_YAML (a `str.format` template) with these `hooks:` (braces escaped for the template)."""
    return AGENTS_YAML + "hooks:\n" + hooks.replace("{", "{{").replace("}", "}}")


@pytest.fixture(autouse=True)
def _seen() -> Iterator[None]:
    sample_hooks.SEEN.clear()
    yield
    sample_hooks.SEEN.clear()


async def call_tool(door: str, url: str, llm: LenientLLM, arguments: dict[str, Any]) -> dict[str, Any]:
    """One getForecast call of agent weather through `door`: {ok, text} as the caller (or the model) sees it."""
    if door == "chat":
        llm.script(Reply(calls=[Call("getForecast", arguments)]), Reply(text="done"))
        async with httpx.AsyncClient(timeout=30) as client:
            answer = await client.post(f"{url}/v1/chat/completions", json={
                "model": "weather", "messages": [{"role": "user", "content": "Weather?"}]})
        assert answer.status_code == 200, answer.text
        step = answer.json()["gateway"]["steps"][0]
        tool_message = [m for m in llm.bodies()[-1]["messages"] if m["role"] == "tool"][0]
        return {"ok": step["ok"], "text": tool_message["content"], "error_type": step["error_type"]}
    if door == "direct":
        async with httpx.AsyncClient(timeout=30) as client:
            answer = await client.post(f"{url}/agents/weather/tools/getForecast", json=arguments)
        body = answer.json()
        result = body if answer.status_code == 200 else body["result"]
        return {"ok": result["ok"], "text": json.dumps(result), "error_type": result["error_type"],
                "status": answer.status_code}
    async with Client(f"{url}/mcp/weather") as client:
        result = await client.call_tool("getForecast", arguments)
    return {"ok": not result.is_error, "text": result.content[0].text, "error_type": None}


@pytest.mark.parametrize("door", DOORS)
async def test_before_tool_call_allows_denies_and_modifies(door: str, tmp_path: Path, llm: LenientLLM,
                                                           upstream: RecordingServer) -> None:
    hooks = """\
  - {on: before_tool_call, call: "sample_hooks:record"}
  - {on: before_tool_call, call: "sample_hooks:pin_latitude"}
"""
    with gateway(tmp_path / "modify", llm.url, upstream.url, agents_yaml=project(hooks)) as (url, _):
        seen = await call_tool(door, url, llm, ARGS)
    assert seen["ok"] is True
    assert dict(upstream.last.query)["latitude"] == "1.5"  # replaced by the hook
    (step,) = sample_hooks.SEEN
    assert (step["event"], step["tool"], step["api"], step["method"]) == (
        "before_tool_call", "getForecast", "open-meteo", "GET")
    assert step["arguments"]["latitude"] == 52.52  # the allowing hook saw the model's arguments

    upstream.requests.clear()
    hooks = '  - {on: before_tool_call, call: "sample_hooks:deny_all", tools: ["get*"]}\n'
    with gateway(tmp_path / "deny", llm.url, upstream.url, agents_yaml=project(hooks)) as (url, _):
        seen = await call_tool(door, url, llm, ARGS)
    assert seen["ok"] is False and "no, by policy" in seen["text"]
    assert seen.get("status", 403) == 403
    assert upstream.requests == []  # nothing was sent


@pytest.mark.parametrize("door", DOORS)
async def test_after_tool_call_masks_and_withholds(door: str, tmp_path: Path, llm: LenientLLM,
                                                   upstream: RecordingServer) -> None:
    upstream.route("/meteo/v1/forecast", UpstreamReply(200, {**FORECAST, "timezone": "ops@example.com"}))
    hooks = '  - {on: after_tool_call, call: "sample_hooks:mask_emails"}\n'
    with gateway(tmp_path / "mask", llm.url, upstream.url, agents_yaml=project(hooks)) as (url, _):
        seen = await call_tool(door, url, llm, ARGS)
    assert seen["ok"] is True
    assert "[email]" in seen["text"] and "ops@example.com" not in seen["text"]

    hooks = '  - {on: after_tool_call, call: "sample_hooks:deny_all"}\n'
    with gateway(tmp_path / "withhold", llm.url, upstream.url, agents_yaml=project(hooks)) as (url, _):
        seen = await call_tool(door, url, llm, ARGS)
    assert seen["ok"] is False and "withheld" in seen["text"] and "ops@example.com" not in seen["text"]
    assert sample_hooks.SEEN[-1]["result"]["status"] == 200  # the hook saw the API's answer


@pytest.mark.parametrize("door", DOORS)
async def test_http_hook(door: str, tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    with RecordingServer() as hook_server:
        hook_server.route("/hook", UpstreamReply(200, {"deny": "the policy service says no"}))
        hooks = f'  - {{on: before_tool_call, url: "{hook_server.url}/hook", headers: {{X-Hook-Key: k1}}}}\n'
        with gateway(tmp_path, llm.url, upstream.url, agents_yaml=project(hooks)) as (url, _):
            seen = await call_tool(door, url, llm, ARGS)
        posted = json.loads(hook_server.last.body)
    assert seen["ok"] is False and "the policy service says no" in seen["text"]
    assert hook_server.last.header("x-hook-key") == "k1"
    assert (posted["event"], posted["agent"], posted["tool"], posted["arguments"]["latitude"]) == (
        "before_tool_call", "weather", "getForecast", 52.52)


@pytest.mark.parametrize(("on_error", "ran"), [("allow", True), ("deny", False)])
async def test_a_late_hook_follows_on_error(on_error: str, ran: bool, tmp_path: Path, llm: LenientLLM,
                                            upstream: RecordingServer) -> None:
    hooks = f'  - {{on: before_tool_call, call: "sample_hooks:sleepy", timeout: 0.2, on_error: {on_error}}}\n'
    with gateway(tmp_path, llm.url, upstream.url, agents_yaml=project(hooks)) as (url, _):
        seen = await call_tool("direct", url, llm, ARGS)
    assert seen["ok"] is ran
    assert bool(upstream.requests) is ran
    if not ran:
        assert "sample_hooks:sleepy timed out" in seen["text"]


async def test_model_hooks_allow_modify_and_deny(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    hooks = """\
  - {on: before_model_call, call: "sample_hooks:record"}
  - {on: after_model_call, call: "sample_hooks:shout"}
"""
    with gateway(tmp_path / "modify", llm.url, upstream.url, agents_yaml=project(hooks)) as (url, _):
        llm.script(Reply(text="it is cold"))
        answer = httpx.post(f"{url}/v1/chat/completions", timeout=30, json={
            "model": "weather", "messages": [{"role": "user", "content": "Weather?"}]})
    assert answer.json()["choices"][0]["message"]["content"] == "IT IS COLD"
    (step,) = sample_hooks.SEEN
    assert step["event"] == "before_model_call" and step["model"] == "openai/gpt-test"
    assert step["messages"][-1] == {"role": "user", "content": "Weather?"}

    hooks = '  - {on: before_model_call, call: "sample_hooks:deny_all"}\n'
    with gateway(tmp_path / "deny", llm.url, upstream.url, agents_yaml=project(hooks)) as (url, _):
        before = len(llm.requests)
        answer = httpx.post(f"{url}/v1/chat/completions", timeout=30, json={
            "model": "weather", "messages": [{"role": "user", "content": "Weather?"}]})
    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == "hook_denied"
    assert "no, by policy" in answer.json()["error"]["message"]
    assert len(llm.requests) == before  # the model was never asked


async def test_a_hooks_arguments_meet_the_schema(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    hooks = '  - {on: before_tool_call, call: "sample_hooks:break_latitude"}\n'
    with gateway(tmp_path, llm.url, upstream.url, agents_yaml=project(hooks)) as (url, _):
        seen = await call_tool("direct", url, llm, ARGS)
    assert seen["ok"] is False and "replaced the arguments with invalid ones" in seen["text"]
    assert "latitude" in seen["text"] and upstream.requests == []


KEYED_SPEC = """\
openapi: 3.0.3
info: {title: Keyed, version: "1"}
paths:
  /search:
    get:
      operationId: search
      parameters:
        - {name: X-Api-Key, in: header, required: true, schema: {type: string}}
        - {name: q, in: query, required: true, schema: {type: string}}
      responses:
        "200": {description: ok}
"""
KEYED_AGENTS = """\
providers:
  openai: {{kind: openai, base_url: "{llm}/v1", api_key: test-key}}
apis:
  keyed:
    base_url: "{upstream}/keyed"
    auth: {{type: api_key, in: header, name: X-Api-Key, value: key-from-the-manifest}}
agents:
  finder:
    model: openai/gpt-test
    tools: [{{api: keyed}}]
"""


@pytest.mark.parametrize("hooked", [False, True])
async def test_a_hook_rewriting_arguments_meets_the_same_validation(hooked: bool, tmp_path: Path, llm: LenientLLM,
                                                                    upstream: RecordingServer) -> None:
    """The required header argument that `apis.<name>.auth` fills may be left out, with or without a hook that
    rewrites the arguments: the hook's arguments meet the pipeline's own validation, not a second copy of it."""
    upstream.route("/keyed/search", UpstreamReply(200, {"hits": []}))
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "keyed.yaml").write_text(KEYED_SPEC)
    agents = KEYED_AGENTS + ('hooks:\n  - {{on: before_tool_call, call: "sample_hooks:narrow_search"}}\n'
                             if hooked else "")
    (tmp_path / "agents.yaml").write_text(agents.format(llm=llm.url, upstream=upstream.url))
    app = create_app(RuntimeHolder(load_runtime(specs, tmp_path / "agents.yaml", use_cache=False)), watch=False)
    with running(app) as url:
        async with httpx.AsyncClient(timeout=30) as client:
            answer = await client.post(f"{url}/agents/finder/tools/search", json={"q": "bug"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["ok"] is True
    assert upstream.last.header("x-api-key") == "key-from-the-manifest"
    assert dict(upstream.last.query)["q"] == ("bug is:open" if hooked else "bug")
