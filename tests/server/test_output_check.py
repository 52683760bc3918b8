"""`output_check: enforce | warn | off`, per api and per tool: a body that breaks the spec's output schema is a
failure, a success with a warning, or not looked at, on every door; MCP declares only an enforced schema."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from recording_server import RecordingServer, Reply
from safety.safety_support import safe_gateway
from scripted_llm import Call
from scripted_llm import Reply as LLMReply
from server_support import LenientLLM

pytestmark = pytest.mark.anyio

AGENTS = """\
providers:
  openai: {{kind: openai, base_url: "{llm}/v1", api_key: test-key}}
apis:
  open-meteo: {{base_url: "{upstream}/meteo", output_check: warn}}
agents:
  weather:
    model: openai/gpt-test
    tools: [{{api: open-meteo}}]
  checked:
    model: openai/gpt-test
    tools:
      - api: open-meteo
        override: {{getForecast: {{output_check: enforce}}}}
  unchecked:
    model: openai/gpt-test
    tools:
      - api: open-meteo
        override: {{getForecast: {{output_check: off}}}}
"""
ARGS = {"latitude": 52.52, "longitude": 13.41, "current": ["temperature_2m"]}
DRIFTED = {"latitude": "north", "note": "the API changed"}  # a text latitude, no longitude: breaks the schema


@pytest.fixture
def served(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Iterator[str]:
    upstream.route("/meteo/v1/forecast", Reply(200, DRIFTED))
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=AGENTS) as (url, _):
        yield url


def _direct(url: str, agent: str) -> dict[str, Any]:
    answer: dict[str, Any] = httpx.post(f"{url}/agents/{agent}/tools/getForecast", json=ARGS, timeout=30).json()
    return answer


async def test_warn_passes_the_body_on_with_a_warning_in_the_result_the_audit_and_the_metrics(served: str) -> None:
    result = _direct(served, "weather")
    assert result["ok"] is True and result["body"] == DRIFTED and result["error_type"] is None
    assert "does not match the spec's output schema" in result["warning"]
    assert "output_check: warn" in result["warning"]
    [row] = httpx.get(f"{served}/audit", params={"tool": "getForecast"}).json()["data"]
    assert row["status"] == "ok" and row["error"].startswith("warning: the body does not match")
    metrics = httpx.get(f"{served}/metrics").text
    assert 'gateway_tool_output_warnings_total{api="open-meteo",tool="getForecast"} 1.0' in metrics


async def test_an_override_enforces_or_switches_the_check_off_for_one_tool(served: str) -> None:
    enforced = _direct(served, "checked")  # a failure answer (502) carrying the result
    assert enforced["result"]["ok"] is False and enforced["result"]["error_type"] == "invalid_output"
    unchecked = _direct(served, "unchecked")  # `off` unquoted: YAML's boolean is read as the word
    assert unchecked["ok"] is True and unchecked["body"] == DRIFTED and "warning" not in unchecked
    statuses = [r["status"] for r in httpx.get(f"{served}/audit").json()["data"]]
    assert sorted(statuses) == ["invalid_output", "ok"]


async def test_the_model_and_the_step_see_the_warning(served: str, llm: LenientLLM) -> None:
    llm.script(LLMReply(calls=[Call("getForecast", ARGS)]), LLMReply(text="Berlin, it says north."))
    answer = httpx.post(f"{served}/v1/chat/completions", timeout=30, json={
        "model": "weather", "messages": [{"role": "user", "content": "Weather in Berlin?"}]}).json()
    [step] = answer["gateway"]["steps"]
    assert step["ok"] is True and step["status"] == 200 and "output schema" in step["warning"]
    tool_message = llm.bodies()[1]["messages"][-1]
    assert tool_message["role"] == "tool"
    assert '"the API changed"' in tool_message["content"] and "[warning: the body does not match" in \
        tool_message["content"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_mcp_declares_only_an_enforced_output_schema(served: str, mode: str) -> None:
    for agent, declared in (("weather", False), ("unchecked", False), ("checked", True)):
        async with Client(f"{served}/mcp/{agent}", mode=mode) as client:
            [tool] = (await client.list_tools()).tools
            assert (tool.output_schema is not None) is declared, agent
            result = await client.call_tool("getForecast", ARGS)  # the SDK checks structured content it declared
        assert result.is_error is declared, agent
        if not declared:
            assert '"the API changed"' in result.content[0].text
    async with Client(f"{served}/mcp/weather", mode=mode) as client:
        result = await client.call_tool("getForecast", ARGS)
        assert "[warning: the body does not match" in result.content[0].text


CUT = """\
providers:
  openai: {{kind: openai, base_url: "{llm}/v1", api_key: test-key}}
apis:
  open-meteo: {{base_url: "{upstream}/meteo"}}
agents:
  checked:
    model: openai/gpt-test
    tools:
      - api: open-meteo
        override: {{getForecast: {{output_check: enforce, max_result_bytes: 600}}}}
  plain:
    model: openai/gpt-test
    tools:
      - api: open-meteo
        override: {{getForecast: {{output_check: off, max_result_bytes: 600}}}}
"""
LONG = {"latitude": 52.52, "longitude": 13.41, "hourly": {"time": [f"2026-12-07T{h % 24:02d}:00" for h in range(300)]}}


async def test_a_cut_answer_tells_the_model_to_ask_for_a_smaller_page_on_every_door(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    from gateway.truncation import CUT_NOTE

    upstream.route("/meteo/v1/forecast", Reply(200, LONG))
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=CUT) as (url, _):
        read: dict[str, str] = {}
        for agent in ("checked", "plain"):
            async with Client(f"{url}/mcp/{agent}") as client:
                result = await client.call_tool("getForecast", ARGS)
            read[f"mcp {agent}"] = result.content[0].text
            assert result.is_error is (agent == "checked")  # an enforced schema cannot check a cut body
            llm.script(LLMReply(calls=[Call("getForecast", ARGS)]), LLMReply(text="done"))
            httpx.post(f"{url}/v1/chat/completions", timeout=30, json={
                "model": agent, "messages": [{"role": "user", "content": "Weather?"}]}).raise_for_status()
            read[f"chat {agent}"] = llm.bodies()[-1]["messages"][-1]["content"]
        assert httpx.post(f"{url}/agents/plain/tools/getForecast", json=ARGS, timeout=30).json()["truncated"] is True
    for door, text in read.items():
        assert CUT_NOTE in text, (door, text)  # the same words on each
