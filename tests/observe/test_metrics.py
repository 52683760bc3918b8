"""`/metrics` after a known sequence of calls, parsed with prometheus_client's own parser: exact counts."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
from prometheus_client.parser import text_string_to_metric_families
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import LenientLLM

import gateway

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "safety"))
from safety_support import SAFE_AGENTS_YAML, TRIAGE_KEY, WEATHER_KEY, bearer, safe_gateway  # noqa: E402

FORECAST = Call("getForecast", {"latitude": 52.52, "longitude": 13.41, "current": ["temperature_2m"]})
COMMENT = Call("createIssueComment", {"owner": "acme", "repo": "app", "issue_number": 7, "body": "On it."})


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


ADMIN_KEY = "ck-metrics-admin-4b3a2918"


def test_counts_after_a_known_sequence(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    admin_yaml = SAFE_AGENTS_YAML + f"  ops: {{{{key: {ADMIN_KEY}, admin: true}}}}\n"
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=admin_yaml) as (url, safety):
        with httpx.Client(base_url=url, timeout=30) as client:
            assert client.get("/metrics").status_code == 401  # the doors' caller check

            llm.script(Reply(calls=[FORECAST]), Reply(text="3.5 °C", usage=(10, 5)))
            chat = client.post("/v1/chat/completions", headers=bearer(WEATHER_KEY), json={
                "model": "weather", "messages": [{"role": "user", "content": "Weather?"}]})
            assert chat.status_code == 200
            llm.script(Reply(calls=[COMMENT], usage=(7, 3)))
            paused = client.post("/v1/chat/completions", headers=bearer(TRIAGE_KEY), json={
                "model": "triage", "messages": [{"role": "user", "content": "Ack issue 7"}]})
            assert paused.status_code == 200 and len(paused.json()["gateway"]["pending_approvals"]) == 1
            invalid = client.post("/agents/weather/tools/getForecast", headers=bearer(WEATHER_KEY),
                                  json={"latitude": "north"})
            assert invalid.status_code >= 400

            # Another tenant's agents, tools and client names are the operator's to see, not a plain key's.
            for key in (WEATHER_KEY, TRIAGE_KEY):  # a plain key, and an approver
                refused = client.get("/metrics", headers=bearer(key))
                assert refused.status_code == 403 and "triage" not in refused.text and "weather" not in refused.text
            scraped = client.get("/metrics", headers=bearer(ADMIN_KEY))
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    found = samples(scraped.text)

    assert value(found, "gateway_requests_total", door="chat", status="200") == 2
    assert value(found, "gateway_requests_total", door="metrics", status="401") == 1
    assert value(found, "gateway_requests_total", door="metrics", status="403") == 2
    assert value(found, "gateway_requests_total", door="direct", status=str(invalid.status_code)) == 1
    assert value(found, "gateway_tool_calls_total", api="open-meteo", tool="getForecast", outcome="ok") == 1
    assert value(found, "gateway_tool_calls_total", api="open-meteo", tool="getForecast",
                 outcome="invalid_arguments") == 1
    assert value(found, "gateway_tool_call_duration_seconds_count", api="open-meteo", tool="getForecast") == 2
    assert value(found, "gateway_tokens_total", agent="weather", model="openai/gpt-test", type="input") == 20
    assert value(found, "gateway_tokens_total", agent="weather", model="openai/gpt-test", type="output") == 10
    assert value(found, "gateway_tokens_total", agent="triage", model="ollama/llama-test", type="input") == 7
    assert value(found, "gateway_model_call_duration_seconds_count", agent="weather", model="openai/gpt-test") == 2
    assert value(found, "gateway_run_duration_seconds_count", agent="weather") == 1
    assert value(found, "gateway_run_duration_seconds_count", agent="triage") == 1
    assert value(found, "gateway_run_tokens_sum", agent="weather") == 30
    assert value(found, "gateway_pending_approvals") == 1
    assert value(found, "gateway_breaker_state", api="open-meteo", group="weather-bot", state="closed") == 1
    assert value(found, "gateway_reloads_total") == 0 and value(found, "gateway_reloads_refused_total") == 0
    assert value(found, "gateway_build_info", version=gateway.__version__) == 1
    assert 0 < value(found, "process_start_time_seconds") <= time.time()


def test_refused_and_applied_reloads_are_counted(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    from server_support import gateway

    with gateway(tmp_path, llm.url, upstream.url) as (url, app):
        holder: Any = app.state.gateway.holder
        agents = tmp_path / "agents.yaml"
        good = agents.read_text()
        agents.write_text(good + "\nagents_typo: {}\n")
        assert anyio.run(holder.reload) is False
        agents.write_text(good.replace("max_iterations: 4", "max_iterations: 5"))
        assert anyio.run(holder.reload) is True
        found = samples(httpx.get(f"{url}/metrics").text)
    assert value(found, "gateway_reloads_refused_total") == 1
    assert value(found, "gateway_reloads_total") == 1


def test_repeated_label_values_count_on_one_series() -> None:
    from gateway.observe.metrics import Metrics

    metrics = Metrics()
    for status in (200, 200, 404):
        metrics.count_request("direct", status)
    for outcome in ("ok", "ok", "timeout"):
        metrics.record_tool_call("bench", "listIssues", outcome, 0.002)
    text = metrics.render().decode()
    assert 'gateway_requests_total{door="direct",status="200"} 2.0' in text
    assert 'gateway_requests_total{door="direct",status="404"} 1.0' in text
    assert 'gateway_tool_calls_total{api="bench",outcome="ok",tool="listIssues"} 2.0' in text
    assert 'gateway_tool_calls_total{api="bench",outcome="timeout",tool="listIssues"} 1.0' in text
    assert 'gateway_tool_call_duration_seconds_count{api="bench",tool="listIssues"} 3.0' in text


def test_every_reading_of_the_registry_sees_every_count_made_before_it_once() -> None:
    """The request and tool-call counts wait in a dict between collections and are handed to their counters as each
    collection starts: a scrape, prometheus_client's `get_sample_value` and `generate_latest` on the registry all
    see every count made before them, none twice."""
    from prometheus_client import generate_latest

    from gateway.observe.metrics import Metrics

    metrics = Metrics()
    requests = {"door": "direct", "status": "200"}
    calls = {"api": "bench", "tool": "listIssues", "outcome": "ok"}
    for reading in range(1, 4):
        for _ in range(reading):
            metrics.count_request("direct", 200)
            metrics.record_tool_call("bench", "listIssues", "ok", 0.002)
        done = reading * (reading + 1) / 2
        assert metrics.registry.get_sample_value("gateway_requests_total", requests) == done
        assert metrics.registry.get_sample_value("gateway_tool_calls_total", calls) == done
        found = samples(metrics.render().decode())  # read again: nothing handed over twice
        assert value(found, "gateway_requests_total", **requests) == done
        assert value(found, "gateway_tool_calls_total", **calls) == done
        text = generate_latest(metrics.registry).decode()
        assert f'gateway_requests_total{{door="direct",status="200"}} {done}' in text


def test_a_tools_own_observe_stage_counts_what_the_general_one_counts() -> None:
    """The stage compiled for one tool keeps its labelled children: the same series, the same counts, and none
    before the first count (a failure first makes no `ok` series)."""
    from loop_support import agent_tool

    from gateway.kernel.calls import Invocation
    from gateway.messages import ToolCall, ToolResult
    from gateway.observe.metrics import Metrics
    from gateway.observe.toolcalls import ObserveToolCall

    metrics = Metrics()
    forecast = agent_tool("getForecast")
    stage = ObserveToolCall(metrics, None, capture=False).for_tool(forecast)
    assert stage is not None
    outcomes = iter([ToolResult.failure("timeout", "slow"), ToolResult(ok=True), ToolResult(ok=True),
                     ToolResult(ok=True, warning="the body breaks the output schema"),
                     ToolResult.failure("upstream_error", "502"), ToolResult(ok=True)])

    async def proceed(invocation: Invocation) -> ToolResult:
        return next(outcomes)

    async def calls() -> None:
        assert forecast.tool is not None
        invocation = Invocation(agent="weather", agent_tool=forecast, tool=forecast.tool,
                                call=ToolCall(id="1", name="getForecast"), arguments={})
        await stage(invocation, proceed)
        assert 'outcome="ok"' not in metrics.render().decode()  # no series before its first count
        for _ in range(5):
            await stage(invocation, proceed)

    anyio.run(calls)
    found = samples(metrics.render().decode())
    assert value(found, "gateway_tool_calls_total", api="test", tool="getForecast", outcome="ok") == 4
    assert value(found, "gateway_tool_calls_total", api="test", tool="getForecast", outcome="timeout") == 1
    assert value(found, "gateway_tool_calls_total", api="test", tool="getForecast", outcome="upstream_error") == 1
    assert value(found, "gateway_tool_output_warnings_total", api="test", tool="getForecast") == 1
    assert value(found, "gateway_tool_call_duration_seconds_count", api="test", tool="getForecast") == 6


def test_a_calls_metrics_land_after_the_step_that_answers_it_every_call_in_order() -> None:
    """The door writes its answer in the step in which the pipeline returned; the call's counts land on the loop's
    next turn (off the caller's wait), every call's, in order. A count that fails is the loop's exception handler's
    to report, and the caller still has its answer."""
    from loop_support import agent_tool

    from gateway.kernel.calls import Invocation
    from gateway.messages import ToolCall, ToolResult
    from gateway.observe.metrics import Metrics
    from gateway.observe.toolcalls import ObserveToolCall

    metrics = Metrics()
    forecast = agent_tool("getForecast")
    outcomes = [ToolResult(ok=True), ToolResult.failure("timeout", "slow"), ToolResult(ok=True), ToolResult(ok=True)]
    results = iter(outcomes)

    async def proceed(invocation: Invocation) -> ToolResult:
        return next(results)

    def counted() -> float:
        found = samples(metrics.render().decode())
        return value(found, "gateway_tool_call_duration_seconds_count", api="test", tool="getForecast")

    async def calls() -> tuple[list[float], list[float], list[Any]]:
        assert forecast.tool is not None
        invocation = Invocation(agent="weather", agent_tool=forecast, tool=forecast.tool,
                                call=ToolCall(id="1", name="getForecast"), arguments={})
        reported: list[Any] = []
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(context))
        at_answer, next_turn = [], []
        for stage in (ObserveToolCall(metrics, None, capture=False).for_tool(forecast),
                      ObserveToolCall(metrics, None, capture=False)):  # the tool's own stage, the general one
            assert stage is not None
            for _ in range(2):
                await stage(invocation, proceed)
                at_answer.append(counted())  # where the door writes its answer
                await asyncio.sleep(0)
                next_turn.append(counted())

        class Broken(Metrics):
            def record_tool_call(self, api: str, tool: str, outcome: str, seconds: float) -> None:
                raise RuntimeError("the registry is gone")

        broken = ObserveToolCall(Broken(), None, capture=False)
        assert (await broken(invocation, lambda _: _ok())).ok  # the caller has its answer
        await asyncio.sleep(0)
        return at_answer, next_turn, reported

    async def _ok() -> ToolResult:
        return ToolResult(ok=True)

    at_answer, next_turn, reported = asyncio.run(calls())
    assert at_answer == [0, 1, 2, 3]
    assert next_turn == [1, 2, 3, 4]
    found = samples(metrics.render().decode())
    assert value(found, "gateway_tool_calls_total", api="test", tool="getForecast", outcome="ok") == 3
    assert value(found, "gateway_tool_calls_total", api="test", tool="getForecast", outcome="timeout") == 1
    assert [str(context.get("exception")) for context in reported] == ["the registry is gone"]


def test_the_version_and_the_process_start_are_served() -> None:
    # user47's trial: /metrics said neither which version answered nor when the process started.
    from gateway.observe.metrics import Metrics, process_start_time

    found = samples(Metrics().render().decode())
    assert value(found, "gateway_build_info", version=gateway.__version__) == 1
    assert [name for name, _ in found if name == "gateway_build_info"] == ["gateway_build_info"]  # one version
    started = value(found, "process_start_time_seconds")
    assert started == process_start_time() and 0 < started <= time.time()
