"""OpenTelemetry traces in the GenAI semantic conventions: a run, its model calls, its tool calls, their requests.

Spans, parent first: `invoke_agent {agent}` (one run of the loop) -> `chat {model}` (one model call, with
`gen_ai.provider.name`, `gen_ai.request.model`, token usage and finish reasons) and `execute_tool {tool}` (one
tool call, with `gen_ai.tool.call.id`) -> `{METHOD}` (the upstream HTTP request, which carries a `traceparent`).
A model request carries its `chat` span's `traceparent` too (`propagate_to`).
MCP's own spans (`tools/call {tool}`) come from the MCP SDK's middleware, which the gateway keeps when tracing is on.
A caller's `traceparent` is continued (by the request envelope, `gateway.server.envelope`).

Configuration is OpenTelemetry's own: `configure_from_environment` installs the SDK's tracer provider with an
OTLP exporter when an `OTEL_EXPORTER_OTLP_*ENDPOINT` or `OTEL_TRACES_EXPORTER` is set (the `otel` install
extra brings the SDK). Without a tracer provider every helper here is a no-op that opens nothing. Arguments and
results become span attributes only with `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`, and then
redacted as in the audit log.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind, StatusCode

from . import __version__
from .redaction import url_without_credentials

logger = logging.getLogger("gateway.observe")

CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER")


_installed: trace.TracerProvider | None = None


def install(provider: trace.TracerProvider | None) -> None:
    """Use `provider` for the gateway's spans (an embedding host, a test); None: back to the global one.

    OpenTelemetry's global provider can be set once per process; this one can be changed and removed.
    """
    global _installed
    _installed = provider


GLOBAL_RECHECK_SECONDS = 1.0
"""How long OpenTelemetry's answer "no global provider yet" is trusted before it is asked again."""
_global_set = False
_global_unset_until = 0.0


def enabled() -> bool:
    """A tracer provider is installed (by `install`, `configure_from_environment`, opentelemetry-instrument or
    the host).

    Asked several times per tool call. OpenTelemetry's `get_tracer_provider` looks up an environment variable on
    every call while no global provider is set, and offers no way to learn that one was set, so its "not yet" is
    kept for `GLOBAL_RECHECK_SECONDS` (a provider a host sets later is used from then on); its "set" is kept
    for good (the global provider can be set once per process)."""
    global _global_set, _global_unset_until
    if _installed is not None or _global_set:
        return True
    now = time.monotonic()
    if now < _global_unset_until:
        return False
    _global_set = not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    _global_unset_until = now + GLOBAL_RECHECK_SECONDS
    return _global_set


def tracer() -> trace.Tracer:
    if _installed is not None:
        return _installed.get_tracer("gateway", __version__)
    return trace.get_tracer("gateway", __version__)


def capture_content(environ: Mapping[str, str] | None = None) -> bool:
    return (environ if environ is not None else os.environ).get(CAPTURE_CONTENT, "").lower() == "true"


def configure_from_environment(environ: Mapping[str, str] | None = None) -> bool:
    """Install the SDK's tracer provider with an OTLP exporter when the `OTEL_*` variables ask for one.

    Returns whether traces are recorded. Nothing happens when a provider is already installed, when
    `OTEL_SDK_DISABLED=true`, when no exporter is configured, or (logged) when the SDK is not installed.
    """
    env = environ if environ is not None else os.environ
    if enabled():
        return True
    if env.get("OTEL_SDK_DISABLED", "").lower() == "true" or not any(env.get(v) for v in _ENDPOINT_VARIABLES):
        return False
    if env.get("OTEL_TRACES_EXPORTER", "otlp").lower() in ("none", ""):
        return False
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        logger.warning("OTEL_* variables are set but the OpenTelemetry SDK is not installed: "
                       "pip install 'gateway[otel]' to export traces")
        return False
    # The SDK reads OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and the exporter's
    # OTEL_EXPORTER_OTLP_* (endpoint, headers, timeout) itself.
    resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or "gateway"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _forget_global_answer()
    return True


def _forget_global_answer() -> None:
    """The next `enabled()` asks OpenTelemetry again (this process just set the global provider)."""
    global _global_unset_until
    _global_unset_until = 0.0


@contextmanager
def run_span(agent: str, *, provider: str, model: str) -> Iterator[Span]:
    """`invoke_agent {agent}`: one run of the loop (`provider`: its `gen_ai.provider.name`)."""
    if not enabled():
        yield trace.INVALID_SPAN
        return
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
                  "gen_ai.provider.name": provider, "gen_ai.request.model": model}
    with tracer().start_as_current_span(f"invoke_agent {agent}", kind=SpanKind.INTERNAL,
                                        attributes=attributes) as span:
        yield span


@contextmanager
def model_span(*, provider: str, model: str) -> Iterator[Span]:
    """`chat {model}`: one model call (usage and finish reasons are set by `record_turn`)."""
    if not enabled():
        yield trace.INVALID_SPAN
        return
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
                  "gen_ai.request.model": model}
    with tracer().start_as_current_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes) as span:
        yield span


def record_turn(span: Span, *, input_tokens: int, output_tokens: int, finish_reason: str | None,
                response_model: str | None = None) -> None:
    if not span.is_recording():
        return
    span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
    if finish_reason:
        span.set_attribute("gen_ai.response.finish_reasons", [finish_reason])
    if response_model:
        span.set_attribute("gen_ai.response.model", response_model)


@contextmanager
def tool_span(tool: str, *, call_id: str | None, agent: str, arguments: Any = None) -> Iterator[Span]:
    """`execute_tool {tool}`: one tool call through the pipeline (`arguments` already redacted, or None)."""
    if not enabled():
        yield trace.INVALID_SPAN
        return
    attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                                  "gen_ai.tool.type": "function", "gen_ai.agent.name": agent}
    if call_id:
        attributes["gen_ai.tool.call.id"] = call_id
    if arguments is not None:
        attributes["gen_ai.tool.call.arguments"] = _json(arguments)
    with tracer().start_as_current_span(f"execute_tool {tool}", kind=SpanKind.INTERNAL,
                                        attributes=attributes) as span:
        yield span


def record_tool_result(span: Span, *, ok: bool, error_type: str | None, result: Any = None) -> None:
    if not span.is_recording():
        return
    if not ok:
        span.set_attribute("error.type", error_type or "tool_error")
        span.set_status(StatusCode.ERROR, error_type or "tool_error")
    if result is not None:
        span.set_attribute("gen_ai.tool.call.result", _json(result))


@contextmanager
def upstream_span(method: str, url: str, headers: MutableMapping[str, str]) -> Iterator[Span]:
    """`{METHOD}`: the upstream request, a client span; `headers` get its `traceparent`."""
    if not enabled():
        yield trace.INVALID_SPAN
        return
    # Neither the query (`?key=`) nor a base URL's userinfo (`https://user:password@host`): credentials, both.
    attributes = {"http.request.method": method, "url.full": url_without_credentials(url)}
    with tracer().start_as_current_span(method, kind=SpanKind.CLIENT, attributes=attributes) as span:
        propagate.inject(headers)
        yield span


def propagate_to(headers: MutableMapping[str, str]) -> None:
    """Put the current span's `traceparent` (and `tracestate`) in `headers`: a model request carries its `chat`
    span on, so an LLM proxy or server that traces (LiteLLM, vLLM, an API gateway) joins the run's trace."""
    if enabled():
        propagate.inject(headers)


def record_resends(count: int) -> None:
    """The current upstream span's request was sent `count` more times (OpenTelemetry's HTTP convention)."""
    if enabled():
        trace.get_current_span().set_attribute("http.request.resend_count", count)


def record_status(span: Span, status: int | None) -> None:
    if span.is_recording() and status is not None:
        span.set_attribute("http.response.status_code", status)
        if status >= 400:
            span.set_attribute("error.type", str(status))
            span.set_status(StatusCode.ERROR)


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
