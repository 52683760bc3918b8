"""Agent frameworks pointed at the gateway, end to end: the agent's own tool runs upstream, the framework's tool
is handed back to it, and its result is used (OpenAI Agents SDK, pydantic-ai, LangChain)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import LenientLLM

pytestmark = pytest.mark.anyio

FORECAST_CALL = Call("getForecast", {"latitude": 52.52, "longitude": 13.41, "current": ["temperature_2m"]})


def _tool_results(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


@pytest.mark.parametrize("stream", [False, True])
async def test_openai_agents_sdk_default_model_with_a_function_tool(
        gw: tuple[str, Any], llm: LenientLLM, upstream: RecordingServer, stream: bool) -> None:
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.models.openai_provider import OpenAIProvider
    from openai import AsyncOpenAI

    url, _ = gw
    texts: list[tuple[str, str]] = []

    @function_tool
    def send_sms(to: str, text: str) -> str:
        """Send a text message."""
        texts.append((to, text))
        return "delivered"

    llm.script(Reply(calls=[FORECAST_CALL, Call("send_sms", {"to": "ann", "text": "3.5 °C"}, id="call_sms")]),
               Reply(text="Texted Ann: 3.5 °C."))
    paths: list[str] = []

    async def record(request: httpx.Request) -> None:
        paths.append(request.url.path)

    client = AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0,
                         http_client=httpx.AsyncClient(event_hooks={"request": [record]}))
    config = RunConfig(model_provider=OpenAIProvider(openai_client=client), tracing_disabled=True)
    agent = Agent(name="assistant", instructions="Help the user.", model="weather", tools=[send_sms])
    async with client:
        if stream:
            run = Runner.run_streamed(agent, "Text Ann the Berlin weather.", run_config=config)
            kinds = [event.type async for event in run.stream_events()]
            assert "raw_response_event" in kinds
            output = run.final_output
        else:
            output = (await Runner.run(agent, "Text Ann the Berlin weather.", run_config=config)).final_output

    assert output == "Texted Ann: 3.5 °C."
    assert paths == ["/v1/responses", "/v1/responses"]  # the SDK's default model speaks the Responses API
    assert texts == [("ann", "3.5 °C")]
    assert upstream.last.path == "/meteo/v1/forecast" and len(upstream.requests) == 1
    first, second = llm.bodies()
    assert [t["function"]["name"] for t in first["tools"]] == ["getForecast", "send_sms"]
    results = _tool_results(second)
    assert results["call_sms"] == "delivered"
    assert len(results) == 2  # the gateway's own result of that turn went back to the model too


@pytest.mark.parametrize("stream", [False, True])
async def test_pydantic_ai_openai_model_string_with_structured_output_and_a_tool(
        gw: tuple[str, Any], llm: LenientLLM, upstream: RecordingServer, monkeypatch: pytest.MonkeyPatch,
        stream: bool) -> None:
    from pydantic import BaseModel
    from pydantic_ai import Agent

    url, _ = gw
    monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "unused")

    class Report(BaseModel):
        city: str
        celsius: float
        phone: str

    agent = Agent("openai:weather", output_type=Report, retries=0)  # `openai:` is pydantic-ai's Responses model
    looked_up: list[str] = []

    @agent.tool_plain
    def phone_of(name: str) -> str:
        """A contact's phone number."""
        looked_up.append(name)
        return "+49 30 1234"

    report = {"city": "Berlin", "celsius": 3.5, "phone": "+49 30 1234"}
    llm.script(Reply(calls=[FORECAST_CALL, Call("phone_of", {"name": "Ann"}, id="call_phone")]),
               Reply(calls=[Call("final_result", report, id="call_final")]))
    if stream:
        async with agent.run_stream("Berlin weather, and Ann's phone.") as run:
            output = await run.get_output()
    else:
        output = (await agent.run("Berlin weather, and Ann's phone.")).output

    assert output == Report(**report)
    assert looked_up == ["Ann"]
    assert upstream.last.path == "/meteo/v1/forecast" and len(upstream.requests) == 1
    first, second = llm.bodies()
    assert {t["function"]["name"] for t in first["tools"]} == {"getForecast", "phone_of", "final_result"}
    assert first.get("tool_choice") == "required"  # pydantic-ai asks for a tool call: honoured on every turn
    results = _tool_results(second)
    assert results["call_phone"] == "+49 30 1234" and len(results) == 2


@pytest.mark.parametrize("stream", [False, True])
async def test_langchain_chat_openai_with_bound_tools(
        gw: tuple[str, Any], llm: LenientLLM, upstream: RecordingServer, stream: bool) -> None:
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    url, _ = gw

    @tool
    def send_sms(to: str, text: str) -> str:
        """Send a text message."""
        return f"delivered to {to}"

    model = ChatOpenAI(model="weather", base_url=f"{url}/v1", api_key="unused", max_retries=0,
                       streaming=stream).bind_tools([send_sms])
    llm.script(Reply(calls=[FORECAST_CALL, Call("send_sms", {"to": "ann", "text": "3.5 °C"}, id="call_sms")]),
               Reply(text="Texted Ann."))
    history: list[Any] = [HumanMessage("Text Ann the Berlin weather.")]
    answer = await model.ainvoke(history)
    assert [(c["name"], c["args"], c["id"]) for c in answer.tool_calls] == [
        ("send_sms", {"to": "ann", "text": "3.5 °C"}, "call_sms")]
    assert upstream.last.path == "/meteo/v1/forecast"

    history += [answer, ToolMessage(send_sms.invoke(answer.tool_calls[0]["args"]), tool_call_id="call_sms")]
    final = await model.ainvoke(history)
    assert final.content == "Texted Ann."
    results = _tool_results(llm.bodies()[1])
    assert results["call_sms"] == "delivered to ann" and len(results) == 2


@pytest.mark.parametrize("stream", [False, True])
async def test_openai_agents_sdk_with_the_gateway_as_model_and_its_mcp_server_as_tools(
        gw: tuple[str, Any], llm: LenientLLM, upstream: RecordingServer, stream: bool) -> None:
    """The SDK declares the MCP server's tools to the model: the agent's own tool again, same name and schema.
    That is the agent's tool (it runs in the gateway, once), not a 400 `tool_name_taken`."""
    from agents import Agent, RunConfig, Runner
    from agents.mcp import MCPServerStreamableHttp
    from agents.models.openai_provider import OpenAIProvider
    from openai import AsyncOpenAI

    url, _ = gw
    llm.script(Reply(calls=[FORECAST_CALL]), Reply(text="It is 3.5 °C in Berlin."))
    client = AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    config = RunConfig(model_provider=OpenAIProvider(openai_client=client), tracing_disabled=True)
    async with client, MCPServerStreamableHttp({"url": f"{url}/mcp/weather"}) as server:
        agent = Agent(name="assistant", instructions="Help the user.", model="weather", mcp_servers=[server])
        if stream:
            run = Runner.run_streamed(agent, "Weather in Berlin?", run_config=config)
            async for _ in run.stream_events():
                pass
            output = run.final_output
        else:
            output = (await Runner.run(agent, "Weather in Berlin?", run_config=config)).final_output
    assert output == "It is 3.5 °C in Berlin."
    assert upstream.last.path == "/meteo/v1/forecast" and len(upstream.requests) == 1
    [first, _] = llm.bodies()
    assert [t["function"]["name"] for t in first["tools"]] == ["getForecast"]  # offered once


async def test_a_caller_tool_with_an_agent_tools_name_but_another_schema_is_refused(gw: tuple[str, Any]) -> None:
    url, _ = gw
    tool = {"type": "function", "function": {"name": "getForecast", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}
    answer = httpx.post(f"{url}/v1/chat/completions", json={
        "model": "weather", "messages": [{"role": "user", "content": "hi"}], "tools": [tool]})
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "tool_name_taken"
    assert "another input schema" in answer.json()["error"]["message"]


@pytest.mark.parametrize("stream", [False, True])
async def test_pydantic_ai_with_the_gateway_as_model_and_its_mcp_server_as_a_toolset(
        gw: tuple[str, Any], llm: LenientLLM, upstream: RecordingServer, monkeypatch: pytest.MonkeyPatch,
        stream: bool) -> None:
    """pydantic-ai declares the MCP server's tools (its own rendering of the same schema): the agent's tool, run
    once in the gateway."""
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset

    url, _ = gw
    monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    llm.script(Reply(calls=[FORECAST_CALL]), Reply(text="It is 3.5 °C in Berlin."))
    agent = Agent("openai:weather", toolsets=[MCPToolset(f"{url}/mcp/weather")], retries=0)
    async with agent:
        if stream:
            async with agent.run_stream("Weather in Berlin?") as run:
                output = await run.get_output()
        else:
            output = (await agent.run("Weather in Berlin?")).output
    assert output == "It is 3.5 °C in Berlin."
    assert upstream.last.path == "/meteo/v1/forecast" and len(upstream.requests) == 1
    [first, _] = llm.bodies()
    assert [t["function"]["name"] for t in first["tools"]] == ["getForecast"]  # offered once
