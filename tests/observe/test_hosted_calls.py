"""A delegation (`ask_<agent>`) and a `run_code` script are observed as every tool call is: an `execute_tool {tool}`
span (the sub-agent's run, or the script's own tool calls, nested in it) and the tool-call metrics
(`gateway_tool_calls_total`, `gateway_tool_call_duration_seconds`, under the api "": they call none themselves).

Before, their audit rows were their only trace: the sub-agent's `invoke_agent` span hung from the lead's run, the
script's calls likewise, and `/metrics` counted neither. Real parts: a uvicorn gateway (with and without a store),
the scripted LLM for every agent, a recording upstream, the official `mcp` client, OpenTelemetry's SDK with an
in-memory exporter, `/metrics` parsed by prometheus_client's own parser."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import AGENTS_YAML, LenientLLM, gateway
from test_metrics import samples, value

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "safety"))
from safety_support import TRIAGE_KEY, bearer, delegating_yaml, safe_gateway  # noqa: E402

GET_ISSUE = Call("getIssue", {"owner": "acme", "repo": "app", "issue_number": 7})
SCRIPT = 'getIssue(owner="acme", repo="app", issue_number=7)["title"]'
ADMIN_KEY = "ck-hosted-admin-4b3a2918"


def _one(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    (span,) = [s for s in spans if s.name == name]
    return span


def _parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def test_a_delegation_has_its_span_with_the_sub_run_inside_and_its_metrics(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, exporter: InMemorySpanExporter) -> None:
    """A gateway without a store (the hosted call's way without the audit stages)."""
    llm.script(Reply(calls=[Call("ask_worker", {"task": "Read issue 7 of acme/app"}, id="call_ask_1")]),
               Reply(calls=[GET_ISSUE]), Reply(text="It crashes on start."), Reply(text="Issue 7 crashes."))
    yaml = delegating_yaml("lead", "").removesuffix("clients:\n")  # no keys: /metrics is open on loopback
    with gateway(tmp_path, llm.url, upstream.url, agents_yaml=yaml) as (url, _):
        answer = httpx.post(f"{url}/v1/chat/completions", timeout=30, json={
            "model": "lead", "messages": [{"role": "user", "content": "What about issue 7?"}]})
        found = samples(httpx.get(f"{url}/metrics", timeout=30).text)
    assert answer.status_code == 200, answer.text
    spans = exporter.get_finished_spans()
    lead, worker = _one(spans, "invoke_agent lead"), _one(spans, "invoke_agent worker")
    delegation, issue = _one(spans, "execute_tool ask_worker"), _one(spans, "execute_tool getIssue")
    assert _parent_of(delegation) == lead.context.span_id
    assert _parent_of(worker) == delegation.context.span_id  # the sub-agent's run inside the delegation's span
    assert _parent_of(issue) == worker.context.span_id
    assert delegation.attributes is not None and dict(delegation.attributes) == {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "ask_worker", "gen_ai.tool.type": "function",
        "gen_ai.agent.name": "lead", "gen_ai.tool.call.id": "call_ask_1"}
    assert value(found, "gateway_tool_calls_total", api="", tool="ask_worker", outcome="ok") == 1
    assert value(found, "gateway_tool_call_duration_seconds_count", api="", tool="ask_worker") == 1
    assert value(found, "gateway_tool_calls_total", api="github", tool="getIssue", outcome="ok") == 1


def test_a_script_has_its_span_with_its_calls_inside_and_its_metrics_on_the_chat_and_mcp_doors(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, exporter: InMemorySpanExporter) -> None:
    """A gateway with a store (the hosted call's way through the audit stages); a refused script counts too."""
    yaml = AGENTS_YAML.replace("    approval: writes\n", "    approval: writes\n    code_mode: on\n") + \
        f"clients:\n  triage-bot: {{{{key: {TRIAGE_KEY}, agents: [triage]}}}}\n" + \
        f"  ops: {{{{key: {ADMIN_KEY}, admin: true}}}}\n"
    llm.script(Reply(calls=[Call("run_code", {"code": SCRIPT})]), Reply(text="Crash on start."))

    async def over_mcp(url: str) -> list[bool]:
        async with httpx2.AsyncClient(headers=bearer(TRIAGE_KEY), timeout=30) as http, \
                Client(streamable_http_client(f"{url}/mcp/triage", http_client=http)) as session:
            ran = await session.call_tool("run_code", {"code": SCRIPT})
            refused = await session.call_tool("run_code", {"code": "  "})
            return [bool(ran.is_error), bool(refused.is_error)]

    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=yaml) as (url, _):
        answer = httpx.post(f"{url}/v1/chat/completions", headers=bearer(TRIAGE_KEY), timeout=30, json={
            "model": "triage", "messages": [{"role": "user", "content": "What is issue 7 called?"}]})
        in_chat = exporter.get_finished_spans()
        exporter.clear()
        errors = anyio.run(over_mcp, url)
        over_mcp_spans = exporter.get_finished_spans()
        found = samples(httpx.get(f"{url}/metrics", headers=bearer(ADMIN_KEY), timeout=30).text)
    assert answer.status_code == 200, answer.text
    run, script = _one(in_chat, "invoke_agent triage"), _one(in_chat, "execute_tool run_code")
    assert _parent_of(script) == run.context.span_id
    assert _parent_of(_one(in_chat, "execute_tool getIssue")) == script.context.span_id  # the script's call inside
    assert script.attributes is not None and script.attributes["gen_ai.agent.name"] == "triage"
    assert errors == [False, True]
    scripts = sorted((s for s in over_mcp_spans if s.name == "execute_tool run_code"), key=lambda s: s.start_time or 0)
    assert len(scripts) == 2 and scripts[1].attributes is not None
    assert scripts[1].attributes["error.type"] == "invalid_arguments"
    assert _parent_of(_one(over_mcp_spans, "execute_tool getIssue")) == scripts[0].context.span_id
    assert value(found, "gateway_tool_calls_total", api="", tool="run_code", outcome="ok") == 2
    assert value(found, "gateway_tool_calls_total", api="", tool="run_code", outcome="invalid_arguments") == 1
    assert value(found, "gateway_tool_call_duration_seconds_count", api="", tool="run_code") == 3
    assert value(found, "gateway_tool_calls_total", api="github", tool="getIssue", outcome="ok") == 2
