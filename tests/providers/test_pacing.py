"""gateway.providers.pacing: a hostile model server that keeps its stream open with keep-alives (SSE comments,
Ollama's blank lines), or trickles data for ever, is cut off by the stream's idle and whole bounds, and the caller
is told which setting did it. Real servers on 127.0.0.1 (raw sockets: an endless chunked answer); what a chat caller
sees: tests/server/test_model_streams.py."""

from __future__ import annotations

import time

import pytest
from endless_server import endless

from gateway.config.model import ProviderConfig
from gateway.errors import ProviderError
from gateway.messages import Message
from gateway.providers import get_adapter

pytestmark = pytest.mark.anyio

_DELTA = b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":""}}]}\n\n'


async def _stream(kind: str, base_url: str, **settings: float) -> str:
    adapter = get_adapter(ProviderConfig(name="llm", kind=kind, base_url=base_url, **settings))  # type: ignore[arg-type]
    texts: list[str] = []

    async def on_text(text: str) -> None:
        texts.append(text)

    try:
        with pytest.raises(ProviderError) as caught:
            await adapter.complete("m", [Message(role="user", content="hi")], on_text=on_text)
    finally:
        await adapter.aclose()
    return str(caught.value)


@pytest.mark.parametrize(("kind", "path", "media", "beat"), [
    ("openai", "/v1", "text/event-stream", b": keep-alive\n\n"),
    ("anthropic", "", "text/event-stream", b": ping\n\n"),
    ("anthropic", "", "text/event-stream", b'event: ping\ndata: {"type": "ping"}\n\n'),
    ("ollama", "", "application/x-ndjson", b"\n"),
])
async def test_a_stream_of_keep_alives_ends_at_the_idle_bound(kind: str, path: str, media: str, beat: bytes) -> None:
    with endless(media, beat) as url:
        started = time.monotonic()
        message = await _stream(kind, url + path, timeout=30, stream_idle_timeout=0.5)
    assert "nothing but keep-alives for 0.5 s" in message and "providers.llm.stream_idle_timeout" in message
    assert time.monotonic() - started < 25  # not the per-read timeout's 30 s: the keep-alives reset that one


async def test_data_trickled_for_ever_ends_at_the_whole_bound() -> None:
    with endless("text/event-stream", _DELTA) as url:
        message = await _stream("openai", url + "/v1", timeout=30, stream_idle_timeout=5, stream_timeout=1)
    assert "went on past 1 s" in message and "providers.llm.stream_timeout" in message
