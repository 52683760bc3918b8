"""End to end on 127.0.0.1: specs + agents.yaml -> runtime -> loop -> ToolRunner -> real executor -> upstream,
with the scripted LLM as provider; delegation runs the sub-agent's loop."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import recording_server as upstream_mod
from loop_support import agent_tool
from scripted_llm import Call, Reply, ScriptedLLM

from gateway.assembly import build_pipeline
from gateway.execution.executor import Executor
from gateway.execution.runner import ToolRunner, merge_arguments
from gateway.loop import run
from gateway.messages import Message, ToolCall
from gateway.providers import AdapterPool
from gateway.runtime import load_runtime

pytestmark = pytest.mark.anyio

SPEC = """
openapi: 3.1.0
info: {title: shop, version: "1"}
paths:
  /weather/{city}:
    get:
      operationId: getWeather
      parameters:
        - {name: city, in: path, required: true, schema: {type: string}}
        - {name: units, in: query, required: true, schema: {type: string, enum: [metric, imperial]}}
        - {name: days, in: query, schema: {type: integer, minimum: 1}}
      responses:
        "200": {description: ok, content: {application/json: {schema: {type: object}}}}
"""

AGENTS = """
providers:
  llm: {kind: openai, base_url: "{llm}/v1", api_key: k}
apis:
  shop: {base_url: "{upstream}"}
agents:
  lead:
    model: llm/model-x
    instructions: You lead.
    tools:
      - api: shop
        args: {units: metric}
    delegates: [helper]
  helper:
    model: llm/model-x
    instructions: You help.
    tools:
      - api: shop
        args: {units: imperial}
"""


@pytest.fixture
def servers():
    with ScriptedLLM() as llm, upstream_mod.RecordingServer() as upstream:
        upstream.route("/weather/", lambda r: upstream_mod.Reply(200, {"temp": 20, "path": r.target}))
        yield llm, upstream


@pytest.fixture
def runtime(tmp_path: Path, servers):
    llm, upstream = servers
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "shop.yaml").write_text(textwrap.dedent(SPEC))
    agents = AGENTS.replace("{llm}", llm.url).replace("{upstream}", upstream.url)
    (tmp_path / "agents.yaml").write_text(agents)
    return load_runtime(tmp_path / "specs", tmp_path / "agents.yaml", use_cache=False)


async def _chat(runtime, agent: str, text: str, **runner_options):
    executor = Executor(runtime.manifest, runtime.catalog)
    pool = AdapterPool(runtime.manifest)
    try:
        runner = ToolRunner(runtime, build_pipeline(executor), pool, **runner_options)
        return await run(runtime.agent(agent), [Message(role="user", content=text)],
                         adapter=pool(runtime.agent(agent)), toolset=runtime.toolset(agent), invoke=runner)
    finally:
        await executor.aclose()
        await pool.aclose()


async def test_a_call_reaches_the_upstream_with_fixed_args(runtime, servers) -> None:
    llm, upstream = servers
    llm.script(Reply(calls=[Call("getWeather", {"city": "Paris Nord", "days": 2})]), Reply(text="20 degrees."))
    result = await _chat(runtime, "lead", "weather in Paris Nord?")
    assert result.message.content == "20 degrees."
    [request] = upstream.requests
    assert request.path == "/weather/Paris%20Nord" and dict(request.query) == {"units": "metric", "days": "2"}
    assert result.steps[0].ok and result.steps[0].status == 200
    tool_message = llm.requests[1].body["messages"][-1]
    assert json.loads(tool_message["content"])["temp"] == 20
    # The fixed argument is hidden from the model.
    [tool] = [t for t in llm.requests[0].body["tools"] if t["function"]["name"] == "getWeather"]
    assert "units" not in tool["function"]["parameters"].get("properties", {})


async def test_invalid_arguments_go_back_to_the_model_and_nothing_is_sent(runtime, servers) -> None:
    llm, upstream = servers
    llm.script(Reply(calls=[Call("getWeather", {"city": "Oslo", "days": 0})]),
               Reply(calls=[Call("getWeather", {"city": "Oslo", "days": 1})]), Reply(text="ok"))
    result = await _chat(runtime, "lead", "weather?")
    error = json.loads(llm.requests[1].body["messages"][-1]["content"])
    assert error["error_type"] == "invalid_arguments" and "days" in error["error"]
    assert len(upstream.requests) == 1 and dict(upstream.requests[0].query)["days"] == "1"
    assert [s.ok for s in result.steps] == [False, True]


async def test_delegation_runs_the_sub_agents_loop(runtime, servers) -> None:
    llm, upstream = servers
    llm.script(
        Reply(calls=[Call("ask_helper", {"task": "Get the weather in Rome."})]),  # lead
        Reply(calls=[Call("getWeather", {"city": "Rome"})]),  # helper
        Reply(text="Rome: 20 degrees."),  # helper's answer
        Reply(text="The helper says Rome is at 20 degrees."),  # lead's answer
    )
    result = await _chat(runtime, "lead", "weather in Rome?")
    assert result.message.content == "The helper says Rome is at 20 degrees."
    helper_first = llm.requests[1].body["messages"]
    assert helper_first == [{"role": "system", "content": "You help."},
                            {"role": "user", "content": "Get the weather in Rome."}]
    assert dict(upstream.requests[0].query) == {"units": "imperial"}  # the helper's own fixed args
    assert llm.requests[3].body["messages"][-1]["content"] == "Rome: 20 degrees."
    assert [s.tool for s in result.steps] == ["ask_helper"]


async def test_a_sub_agents_steps_reach_the_lead_live_and_in_its_steps(runtime, servers) -> None:
    # What the helper called is visible to whoever watches the lead: as step events while it happens, marked
    # with the helper's name (its text stays between it and the lead), and nested under the delegation step.
    llm, upstream = servers
    llm.script(Reply(calls=[Call("ask_helper", {"task": "Rome and Oslo?"})]),
               Reply(calls=[Call("getWeather", {"city": "Rome"}), Call("getWeather", {"city": "Oslo", "days": 0})]),
               Reply(text="Rome 20, Oslo unknown."), Reply(text="Rome is at 20."))
    events: list[tuple[str, str | None, str]] = []

    async def on_event(event) -> None:  # type: ignore[no-untyped-def]
        events.append((event.type, event.step.agent if event.step else None, event.step.tool if event.step else
                       event.text))

    executor = Executor(runtime.manifest, runtime.catalog)
    pool = AdapterPool(runtime.manifest)
    try:
        result = await run(runtime.agent("lead"), [Message(role="user", content="weather?")],
                           adapter=pool(runtime.agent("lead")), toolset=runtime.toolset("lead"),
                           invoke=ToolRunner(runtime, build_pipeline(executor), pool), on_event=on_event)
    finally:
        await executor.aclose()
        await pool.aclose()
    assert events[0] == ("step_started", None, "ask_helper") and events[-1] == ("step_finished", None, "ask_helper")
    inner = events[1:-1]
    assert sorted(inner) == sorted([("step_started", "helper", "getWeather")] * 2
                                   + [("step_finished", "helper", "getWeather")] * 2)
    [delegation] = result.steps
    assert [(s.agent, s.arguments["city"], s.ok) for s in delegation.steps] == [
        ("helper", "Rome", True), ("helper", "Oslo", False)]
    assert delegation.steps[1].error_type == "invalid_arguments" and len(upstream.requests) == 1
    as_dict = delegation.to_dict()
    assert [s["agent"] for s in as_dict["steps"]] == ["helper", "helper"]
    assert "steps" not in as_dict["steps"][0] and "agent" not in as_dict  # plain steps keep their shape
    assert type(delegation).from_dict(as_dict).to_dict() == as_dict  # a paused run's state carries them


async def test_a_sub_agents_calls_are_made_in_its_own_name(runtime, servers) -> None:
    from gateway.kernel.caller import bind_caller, current_caller

    llm, _ = servers
    llm.script(Reply(calls=[Call("ask_helper", {"task": "Rome?"}), Call("getWeather", {"city": "Oslo"})]),
               Reply(calls=[Call("getWeather", {"city": "Rome"})]), Reply(text="20."), Reply(text="done"))
    executor = Executor(runtime.manifest, runtime.catalog)
    seen: list[tuple[str | None, str | None, str]] = []
    execute = executor.execute

    async def recording_execute(tool, arguments, **options):
        caller = current_caller()
        seen.append((caller.client, caller.agent, arguments["city"]))
        return await execute(tool, arguments, **options)

    executor.execute = recording_execute  # type: ignore[method-assign]
    pool = AdapterPool(runtime.manifest)
    try:
        with bind_caller(client="ci-bot", agent="lead"):
            await run(runtime.agent("lead"), [Message(role="user", content="hi")], adapter=pool(runtime.agent("lead")),
                      toolset=runtime.toolset("lead"), invoke=ToolRunner(runtime, build_pipeline(executor), pool))
    finally:
        await executor.aclose()
        await pool.aclose()
    assert sorted(seen, key=lambda s: s[2]) == [("ci-bot", "lead", "Oslo"), ("ci-bot", "helper", "Rome")]


async def test_delegation_depth_is_bounded(runtime, servers) -> None:
    llm, _ = servers
    llm.script(Reply(calls=[Call("ask_helper", {"task": "x"})]), Reply(text="I will do it myself."))
    result = await _chat(runtime, "lead", "hi", max_depth=0)
    assert result.steps[0].error_type == "delegate_error" and "limit 0" in result.steps[0].error
    assert len(llm.requests) == 2  # no sub-run happened


async def test_delegation_needs_a_task(runtime) -> None:
    runner = ToolRunner(runtime, build_pipeline(Executor(runtime.manifest, runtime.catalog)), lambda name: None,
                        max_depth=3)
    result = await runner(agent_tool("ask_x", delegate="x"), ToolCall(id="1", name="ask_x", arguments={}))
    assert result.error_type == "invalid_arguments" and "task" in result.error


async def test_sub_agent_approval_is_refused_not_waited_for(runtime, servers) -> None:
    llm, _ = servers
    runtime.toolsets["helper"].tools["getWeather"].approval = "always"
    llm.script(Reply(calls=[Call("ask_helper", {"task": "x"})]), Reply(calls=[Call("getWeather", {"city": "A"})]),
               Reply(text="ok"))
    result = await _chat(runtime, "lead", "hi")
    assert result.steps[0].error_type == "delegate_error" and "approval" in result.steps[0].error


def test_fixed_arguments_win() -> None:
    assert merge_arguments({"units": "imperial", "city": "A"}, {"units": "metric"}) == {"units": "metric", "city": "A"}
    assert merge_arguments(None, {"a": 1}) == {"a": 1}
