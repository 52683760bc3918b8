"""What a trace exports holds no credential: an api's `base_url` may carry one in its userinfo
(`https://user:password@host`, `https://TOKEN@host`), which the gateway redacts everywhere else; the upstream
request's client span named it in `url.full`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from executor_helpers import executor_for, make_tool
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from recording_server import RecordingServer

from gateway.kernel import tracing

pytestmark = pytest.mark.anyio


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    try:
        yield exporter
    finally:
        tracing.install(None)
        provider.shutdown()


@pytest.mark.parametrize("userinfo", ["apiuser:s3cret-pass-123", "tok-0123456789abcdef"])
async def test_the_upstream_span_names_the_url_without_its_credentials(
        exporter: InMemorySpanExporter, upstream: RecordingServer, userinfo: str) -> None:
    tool = make_tool()
    executor = executor_for(upstream.url.replace("http://", f"http://{userinfo}@") + "/v1", tool)
    result = await executor.execute(tool, {"unused": None})
    await executor.aclose()
    assert result.ok and upstream.last.header("Authorization") is not None  # the credential did go upstream
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "GET"]
    assert span.attributes is not None
    assert span.attributes["url.full"] == upstream.url + "/v1/items"
    secret = userinfo.split(":")[-1]
    assert all(secret not in str(value) for value in span.attributes.values())
