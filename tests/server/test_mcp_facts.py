"""What a call's handler reads of its request: the facts the endpoint made once (`server.MessageFacts`), the aside of
a door that writes the answer itself, and the client's capabilities, asked only by a call that needs them."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from recording_server import RecordingServer
from server_support import write_project

from gateway.assembly import GatewayState
from gateway.runtime import RuntimeHolder, load_runtime
from gateway.safety.serving import ServingSafeguards
from gateway.server.mcp.answering import answer_call
from gateway.server.mcp.routing import FACTS_SCOPE_KEY
from gateway.server.mcp.server import MessageFacts, aside_for, facts_from_request
from gateway.store import MemoryStore


def test_a_handler_reads_the_facts_the_endpoint_made_and_the_doors_aside() -> None:
    facts = MessageFacts("weather", "ci-bot", "session-1", None, None)
    scope: dict[str, Any] = {"type": "http", FACTS_SCOPE_KEY: facts}
    ctx: Any = SimpleNamespace(request=SimpleNamespace(scope=scope))
    assert facts_from_request(ctx) is facts and facts.aside is None  # answered by the SDK: nothing aside
    aside = aside_for(scope)  # the door writes this request's answer
    assert facts_from_request(ctx).aside is aside


def test_a_request_without_the_endpoints_facts_is_refused() -> None:
    for request in (None, SimpleNamespace(scope={"type": "http"})):
        with pytest.raises(MCPError, match="No agent"):
            facts_from_request(SimpleNamespace(request=request))  # type: ignore[arg-type]
    assert aside_for({"type": "http"}) is not None  # a server that is not the gateway's: the door's aside only


@pytest.mark.anyio
async def test_the_clients_capabilities_are_asked_only_of_a_call_that_needs_them(
        tmp_path: Path, upstream: RecordingServer) -> None:
    specs, agents = write_project(tmp_path, "http://127.0.0.1:9", upstream.url)
    runtime = load_runtime(specs, agents, use_cache=False)
    safety = ServingSafeguards(MemoryStore(), runtime.manifest, redact_log_records=False)
    state = GatewayState(RuntimeHolder(runtime), safety=safety, metrics=False, calls_on_first_use=True)
    asked: list[bool] = []

    def takes_url_elicitation() -> bool:
        asked.append(True)
        return True

    try:
        answer = await answer_call(state, "weather", "getForecast", {"latitude": 52.52, "longitude": 13.41},
                                   "2025-06-18", None, takes_url_elicitation=takes_url_elicitation)
    finally:
        await state.aclose()
        await safety.aclose()
    assert answer is not None and answer["isError"] is False
    assert asked == []  # a call that succeeded never reads them (a not_connected one does: tests/identity)
