"""No token shows anywhere but on the wire: not the caller's own, not the per-user one the api received, even when
the api echoes it back (in what the model reads, the direct call's answer, the audit, trace attributes, the logs)."""

from __future__ import annotations

import json
import logging

import httpx
import openai
import pytest
from identity_support import Setup
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from recording_server import Recorded, Reply
from scripted_llm import Call
from scripted_llm import Reply as LLMReply

from gateway.kernel import tracing


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch, exporter: InMemorySpanExporter) -> InMemorySpanExporter:
    """tests/conftest.py's, with tool arguments and results as span attributes."""
    monkeypatch.setenv(tracing.CAPTURE_CONTENT, "true")
    return exporter


def test_an_api_echoing_the_users_token_shows_it_nowhere(exporter: InMemorySpanExporter, setup: Setup,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    def echo(request: Recorded) -> Reply:
        return Reply(401 if request.method == "POST" else 200, {"you sent": request.header("authorization")})

    setup.upstream.route("/repos-api/", echo)
    alice = setup.token("alice")
    direct = httpx.post(f"{setup.url}/agents/coder/tools/getRepo", json={"name": "app"},
                        headers={"Authorization": f"Bearer {alice}"}, timeout=20)
    assert direct.status_code == 200
    sent = setup.upstream.requests[0].header("authorization")[len("Bearer "):]  # type: ignore[index]
    assert "[REDACTED]" in direct.text

    setup.llm.script(LLMReply(calls=[Call("getRepo", {"name": "app"}), Call("createIssue", {"name": "a"})]),
                     LLMReply(text="done"))
    client = openai.OpenAI(base_url=setup.url + "/v1", api_key=alice)
    client.chat.completions.create(model="coder", messages=[{"role": "user", "content": "go"}])
    write_token = setup.upstream.requests[-1].header("authorization")[len("Bearer "):]  # type: ignore[index]

    audit = httpx.get(setup.url + "/audit", headers={"Authorization": "Bearer ops-key"}, timeout=10).text
    spans = json.dumps([dict(span.attributes or {}) for span in exporter.get_finished_spans()], default=str)
    assert "gen_ai.tool.call.result" in spans  # results are captured: the check below is not vacuous
    seen = "\n".join([direct.text, json.dumps(setup.llm.bodies()), audit, spans,
                      *(record.getMessage() for record in caplog.records)])
    for token in (alice, sent, write_token):
        assert token not in seen
