"""Traces of one chat with a tool call: run, model and tool spans with the right parents and attributes, the
upstream request as the tool span's child, the caller's traceparent continued and the upstream's carrying one.

The gateway's spans go to a provider of its own (`tracing.install`), so no test leaves OpenTelemetry's
once-per-process global provider set for the others.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from executor_helpers import executor_for, make_tool
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from recording_server import RecordingServer
from recording_server import Reply as Answer
from scripted_llm import Call, Reply
from server_support import LenientLLM

from gateway.kernel import tracing

FORECAST_CALL = Call("getForecast", {"latitude": 52.52, "longitude": 13.41, "current": ["temperature_2m"]},
                     id="call_forecast_1")
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


@pytest.fixture
def traced_gw(exporter: InMemorySpanExporter, gw: tuple[str, Any]) -> tuple[str, Any]:
    return gw  # the exporter first: the gateway is built while a provider is installed


def _chat(url: str, **headers: str) -> dict[str, Any]:
    response = httpx.post(f"{url}/v1/chat/completions", headers=headers, timeout=30, json={
        "model": "weather", "messages": [{"role": "user", "content": "Weather in Berlin?"}]})
    assert response.status_code == 200, response.text
    return response.json()


def _by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    named: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        named.setdefault(span.name, []).append(span)
    return named


def test_one_chat_with_a_tool_call(traced_gw: tuple[str, Any], exporter: InMemorySpanExporter, llm: LenientLLM,
                                   upstream: RecordingServer) -> None:
    url, _ = traced_gw
    llm.script(Reply(calls=[FORECAST_CALL], usage=(12, 7)), Reply(text="3.5 °C.", usage=(20, 4)))
    _chat(url, traceparent=f"00-{CALLER_TRACE}-{CALLER_SPAN}-01")

    spans = _by_name(exporter.get_finished_spans())
    (run,) = spans["invoke_agent weather"]
    first, second = sorted(spans["chat gpt-test"], key=lambda s: s.start_time or 0)
    (tool,) = spans["execute_tool getForecast"]
    (request,) = spans["GET"]

    # One trace, the caller's; the run is the caller's span's child, everything else under the run.
    assert {s.context.trace_id for s in (run, first, second, tool, request)} == {int(CALLER_TRACE, 16)}
    assert run.parent is not None and run.parent.span_id == int(CALLER_SPAN, 16)
    for child in (first, second, tool):
        assert child.parent is not None and child.parent.span_id == run.context.span_id
    assert request.parent is not None and request.parent.span_id == tool.context.span_id

    assert run.attributes is not None and dict(run.attributes) == {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather",
        "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-test"}
    assert first.kind == SpanKind.CLIENT and first.attributes is not None
    assert dict(first.attributes) == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-test",
        "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 7,
        "gen_ai.response.finish_reasons": ("tool_calls",)}
    assert second.attributes is not None and second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert tool.attributes is not None and dict(tool.attributes) == {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "getForecast", "gen_ai.tool.type": "function",
        "gen_ai.agent.name": "weather", "gen_ai.tool.call.id": "call_forecast_1"}
    assert request.kind == SpanKind.CLIENT and request.attributes is not None
    assert request.attributes["http.response.status_code"] == 200
    assert str(request.attributes["url.full"]).endswith("/meteo/v1/forecast")

    # The upstream request carried the trace on, its parent being the request's own span.
    traceparent = upstream.last.header("traceparent")
    assert traceparent == f"00-{CALLER_TRACE}-{request.context.span_id:016x}-01"

    # Each model request carried its `chat` span on, so an LLM proxy that traces joins the same trace.
    model_requests = [r.headers.get("traceparent") for r in llm.requests]
    assert model_requests == [f"00-{CALLER_TRACE}-{first.context.span_id:016x}-01",
                              f"00-{CALLER_TRACE}-{second.context.span_id:016x}-01"]


def test_arguments_and_results_are_attributes_only_when_enabled_and_redacted(
        traced_gw: tuple[str, Any], exporter: InMemorySpanExporter, llm: LenientLLM,
        monkeypatch: pytest.MonkeyPatch) -> None:
    url, app = traced_gw
    llm.script(Reply(calls=[FORECAST_CALL]), Reply(text="ok"))
    _chat(url)
    (tool,) = _by_name(exporter.get_finished_spans())["execute_tool getForecast"]
    assert tool.attributes is not None and "gen_ai.tool.call.arguments" not in tool.attributes
    assert "gen_ai.tool.call.result" not in tool.attributes


def test_content_capture_redacts(exporter: InMemorySpanExporter, tmp_path: Any, llm: LenientLLM,
                                 upstream: RecordingServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from server_support import gateway

    monkeypatch.setenv(tracing.CAPTURE_CONTENT, "true")
    secret_call = Call("getForecast", {"latitude": 52.52, "longitude": 13.41, "timezone": "gh-secret-token"})
    with gateway(tmp_path, llm.url, upstream.url) as (url, _):
        llm.script(Reply(calls=[secret_call]), Reply(text="ok"))
        _chat(url)
    (tool,) = _by_name(exporter.get_finished_spans())["execute_tool getForecast"]
    assert tool.attributes is not None
    arguments = str(tool.attributes["gen_ai.tool.call.arguments"])
    assert '"latitude": 52.52' in arguments and "gh-secret-token" not in arguments
    # A call carrying the gateway's credential is refused unsent (`credential_in_arguments`): its span says so.
    assert "carry a credential the gateway holds" in str(tool.attributes["gen_ai.tool.call.result"])


def test_nothing_is_opened_without_a_provider(gw: tuple[str, Any], llm: LenientLLM,
                                              upstream: RecordingServer) -> None:
    url, _ = gw
    llm.script(Reply(calls=[FORECAST_CALL]), Reply(text="ok"))
    _chat(url, traceparent=f"00-{CALLER_TRACE}-{CALLER_SPAN}-01")
    assert not tracing.enabled()
    assert upstream.last.header("traceparent") is None
    assert all("traceparent" not in r.headers for r in llm.requests)


def test_a_global_provider_set_after_start_is_used() -> None:
    """OpenTelemetry's global provider, set by a host after the gateway asked (in a process of its own: it can be
    set once per process), is used from the next look on; `configure_from_environment` sees its own at once."""
    import os
    import subprocess
    import sys

    script = """
import os, time
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from gateway.kernel import tracing
assert not tracing.enabled()
if os.environ.get("HOW") == "host":
    trace.set_tracer_provider(TracerProvider())
    time.sleep(tracing.GLOBAL_RECHECK_SECONDS)
else:
    assert tracing.configure_from_environment({"OTEL_TRACES_EXPORTER": "otlp"})
assert tracing.enabled()
print("traced")
"""
    for how in ("host", "environment"):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "HOW": how})
        assert done.returncode == 0 and "traced" in done.stdout, done.stderr[-2000:]


@pytest.mark.anyio
@pytest.mark.parametrize("userinfo", ["apiuser:s3cret-pass-123", "tok-0123456789abcdef"])
async def test_the_upstream_span_names_the_url_without_its_credentials(
        exporter: InMemorySpanExporter, upstream: RecordingServer, userinfo: str) -> None:
    # A base_url may carry a credential in its userinfo, a secret the gateway redacts everywhere else: url.full named
    # it, so every traced call exported it to the collector.
    tool = make_tool()
    executor = executor_for(upstream.url.replace("http://", f"http://{userinfo}@") + "/v1", tool)
    result = await executor.execute(tool, {})
    await executor.aclose()
    assert result.ok and upstream.last.header("Authorization") is not None  # the credential did go upstream
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "GET"]
    assert span.attributes is not None and span.attributes["url.full"] == upstream.url + "/v1/items"
    assert all(userinfo.split(":")[-1] not in str(value) for value in span.attributes.values())


@pytest.mark.anyio
async def test_the_upstream_span_counts_the_requests_sent_again(exporter: InMemorySpanExporter,
                                                               upstream: RecordingServer) -> None:
    answers = iter([Answer(502, "bad gateway", headers={"Retry-After": "0"}), Answer(200, {"ok": True})])
    upstream.route("/v1/items", lambda request: next(answers))
    tool = make_tool()
    executor = executor_for(upstream.url + "/v1", tool)
    result = await executor.execute(tool, {})
    await executor.aclose()
    assert result.ok and len(upstream.requests) == 2
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "GET"]
    assert span.attributes is not None and span.attributes["http.request.resend_count"] == 1
