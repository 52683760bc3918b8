"""`gateway serve` configured by the standard OTEL_* variables exports its spans over OTLP/HTTP: a real receiver
on 127.0.0.1 decodes them (opentelemetry-proto). A chat yields the run, model, tool and request spans in one
trace; an MCP `tools/call` yields the MCP SDK's server span with the tool span under it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp import Client
from otlp_receiver import OTLPReceiver
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import ROOT, LenientLLM, write_project

pytestmark = pytest.mark.anyio


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as running:
        yield running


@pytest.fixture
def served(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, receiver: OTLPReceiver) -> Iterator[str]:
    specs, agents = write_project(tmp_path, llm.url, upstream.url)
    port = _free_port()
    env = {**os.environ, "GATEWAY_CACHE_DIR": str(tmp_path / "cache"), "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
           "OTEL_SERVICE_NAME": "gateway-under-test", "OTEL_BSP_SCHEDULE_DELAY": "50",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    log = tmp_path / "serve.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--port", str(port), "--specs", str(specs), "--agents",
         str(agents)], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"gateway serve did not start: {log.read_text()}") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(30)


async def test_chat_and_mcp_spans_reach_an_otlp_receiver(served: str, receiver: OTLPReceiver, llm: LenientLLM,
                                                          upstream: RecordingServer) -> None:
    llm.script(Reply(calls=[Call("getForecast", {"latitude": 52.52, "longitude": 13.41}, id="call_1")]),
               Reply(text="3.5 °C"))
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(f"{served}/v1/chat/completions", json={
            "model": "weather", "messages": [{"role": "user", "content": "Weather?"}]})
    assert response.status_code == 200, response.text

    run = receiver.wait_for("invoke_agent weather")
    tool = receiver.wait_for("execute_tool getForecast")
    request = receiver.wait_for("GET")
    chats = [s for s in receiver.spans if s.name == "chat gpt-test"]
    assert run.service == "gateway-under-test"
    assert len(chats) == 2 and all(c.parent_id == run.span_id for c in chats)
    assert tool.parent_id == run.span_id and tool.attributes["gen_ai.tool.call.id"] == "call_1"
    assert request.parent_id == tool.span_id
    assert {run.trace_id, tool.trace_id, request.trace_id, *(c.trace_id for c in chats)} == {run.trace_id}
    assert chats[0].attributes["gen_ai.usage.input_tokens"] == 10
    traceparent = upstream.last.header("traceparent") or ""
    assert traceparent.startswith(f"00-{run.trace_id}-{request.span_id}-")  # flags: sampled (and random id)

    async with Client(f"{served}/mcp/weather") as mcp:
        result = await mcp.call_tool("getForecast", {"latitude": 52.52, "longitude": 13.41})
    assert result.is_error is False
    server_span = receiver.wait_for("tools/call getForecast")
    assert server_span.attributes["mcp.method.name"] == "tools/call"
    assert server_span.attributes["gen_ai.tool.name"] == "getForecast"
    deadline = time.monotonic() + 20
    while not any(s.name == "execute_tool getForecast" and s.parent_id == server_span.span_id
                  for s in receiver.spans):
        assert time.monotonic() < deadline, [(s.name, s.parent_id) for s in receiver.spans]
        time.sleep(0.05)
