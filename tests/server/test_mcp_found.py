"""Found tools join an MCP session's listing: `search_tools`, `notifications/tools/list_changed`, a call by name.

Real parts: uvicorn serving the gateway with an agent on all of GitHub (1,223 operations, tool search on), the
official `mcp` client (its Streamable HTTP transport on an `httpx2` client whose response hook tells the test when
the server's notification stream is open), a recording upstream. Skipped without ../shared/corpus.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from recording_server import RecordingServer
from recording_server import Reply as UpstreamReply
from server_support import LenientLLM, github_project, running

from gateway.offer.toolsearch import MAX_TOOLS_PER_REQUEST
from gateway.offer.toolsearch import search as tool_search
from gateway.offer.views import model_view
from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app
from gateway.server.mcp import search
from gateway.server.mcp.found import FoundTools

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.anyio, pytest.mark.corpus]

BASE = ["search_tools", "describe_tool", "call_tool"]


def _runtime(folder: Path, corpus: Path, llm: LenientLLM, upstream: RecordingServer, cache: Path,
             extra: str = "") -> Any:
    return load_runtime(*github_project(folder, corpus, llm.url, upstream.url, extra), cache_dir=cache)


@pytest.fixture
def runtime(tmp_path: Path, corpus: Path, llm: LenientLLM, upstream: RecordingServer, spec_cache: Path) -> Any:
    return _runtime(tmp_path, corpus, llm, upstream, spec_cache)


@pytest.fixture
def served(runtime: Any) -> Iterator[tuple[str, Any]]:
    app = create_app(RuntimeHolder(runtime), watch=False)
    with running(app) as url:
        yield url, app


class Listener:
    """A session's client side: what the server sent unasked, and when its notification stream opened."""

    def __init__(self) -> None:
        self.changed = anyio.Event()
        self.notices: list[str] = []
        self.stream_open = anyio.Event()

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            self.notices.append(message.method)
            if isinstance(message, types.ToolListChangedNotification):
                self.changed.set()

    async def on_response(self, response: httpx2.Response) -> None:
        if response.request.method == "GET" and response.status_code == 200:
            self.stream_open.set()

    def client(self, url: str, mode: str) -> Client:
        http = httpx2.AsyncClient(event_hooks={"response": [self.on_response]}, timeout=30)
        return Client(streamable_http_client(url, http_client=http), mode=mode, message_handler=self.on_message)


def _tool(runtime: Any, operation_id: str) -> str:
    [name] = [t.name for t in runtime.toolset("dev") if t.tool.operation_id == operation_id]
    return name


async def _names(client: Client) -> list[str]:
    return [t.name for t in (await client.list_tools()).tools]


async def test_in_a_session_found_tools_join_the_listing_and_are_called_by_name(
        served: tuple[str, Any], runtime: Any, upstream: RecordingServer) -> None:
    url, app = served
    create = _tool(runtime, "issues/create")
    upstream.route("/gh/", UpstreamReply(201, {"id": 1, "number": 485, "title": "Found"}))
    first, second = Listener(), Listener()
    async with first.client(f"{url}/mcp/dev", "legacy") as client:
        capabilities = client.session.server_capabilities
        assert capabilities is not None and capabilities.tools is not None and capabilities.tools.list_changed
        with anyio.fail_after(30):
            await first.stream_open.wait()
        before = await _names(client)
        assert before[-3:] == BASE and len(before) == 4

        found = await client.call_tool("search_tools", {"query": "create an issue"})
        assert found.is_error is False
        hits = found.structured_content["tools"]
        assert create in [h["name"] for h in hits] and all(h["loaded"] for h in hits)
        with anyio.fail_after(30):
            await first.changed.wait()
        after = await _names(client)
        assert after[:4] == before  # appended, never reordered
        assert after[4:] == [h["name"] for h in hits if h["name"] not in before]

        called = await client.call_tool(create, {"owner": "acme", "repo": "app", "title": "Found"})
        assert '"number":485' in called.content[0].text
        assert upstream.last.method == "POST" and upstream.last.path == "/gh/repos/acme/app/issues"

        again = await client.call_tool("search_tools", {"query": "create an issue"})
        assert again.is_error is False
        assert await _names(client) == after  # nothing new: listed once
        assert first.notices.count("notifications/tools/list_changed") == 1

        async with second.client(f"{url}/mcp/dev", "legacy") as other:
            assert await _names(other) == before  # the first session's finds are its own
            await other.call_tool("search_tools", {"query": "merge a pull request"})
            merge = _tool(runtime, "pulls/merge")
            assert merge in await _names(other) and merge not in await _names(client)
        assert len(app.state.mcp.endpoint.found) == 1  # the second session ended (DELETE): its finds went with it
    assert len(app.state.mcp.endpoint.found) == 0


async def test_a_stateless_client_keeps_the_listing_and_hears_nothing(served: tuple[str, Any], runtime: Any) -> None:
    url, app = served
    listener = Listener()
    async with listener.client(f"{url}/mcp/dev", "auto") as client:  # auto: the 2026-07-28 protocol, no session
        assert client.session.protocol_version not in ("2025-06-18", "2025-11-25", "2025-03-26")
        before = await _names(client)
        found = await client.call_tool("search_tools", {"query": "create an issue"})
        assert _tool(runtime, "issues/create") in [h["name"] for h in found.structured_content["tools"]]
        assert await _names(client) == before
        called = await client.call_tool("call_tool", {"name": _tool(runtime, "users/get-authenticated")})
        assert called.content  # call_tool stays the way in
    assert listener.notices == [] and len(app.state.mcp.endpoint.found) == 0


async def test_a_session_listing_stays_within_the_request_cap(tmp_path: Path, corpus: Path, llm: LenientLLM,
                                                               upstream: RecordingServer, spec_cache: Path) -> None:
    # A definitions budget no listing reaches: the tool count is what stops the session's listing here.
    runtime = _runtime(tmp_path, corpus, llm, upstream, spec_cache, "gateway: {tool_definitions_budget: 100000000}\n")
    config, toolset = runtime.manifest.agents["dev"], runtime.toolset("dev")
    found = [t.name for t in toolset if "issue" not in t.name][1:MAX_TOOLS_PER_REQUEST - 4]  # 4 listed: room for 1
    assert len(found) == MAX_TOOLS_PER_REQUEST - 5

    async def no_call(name: str, arguments: dict[str, Any]) -> None:
        raise AssertionError("search_tools calls no tool")

    answer = await search.answer_meta(config, toolset, "search_tools", {"query": "create an issue", "limit": 5},
                                      no_call, found)
    assert answer is not None and answer["isError"] is False
    assert 4 + len(found) == MAX_TOOLS_PER_REQUEST
    hits = answer["structuredContent"]["tools"]
    assert [t["loaded"] for t in hits] == [True, False, False, False, False]
    assert all(t["note"] == f"not loaded: a listing carries at most {MAX_TOOLS_PER_REQUEST} tools" for t in hits[1:])


async def test_a_session_listing_stays_within_the_definitions_budget_as_listed(
        tmp_path: Path, corpus: Path, llm: LenientLLM, upstream: RecordingServer, spec_cache: Path) -> None:
    """The budget counts the listing's entries (output schemas included, which a chat request does not carry), and
    `call_tool` with them: searches fill it as far as found tools fit, no further."""
    runtime = _runtime(tmp_path, corpus, llm, upstream, spec_cache, "gateway: {tool_definitions_budget: 6000}\n")
    config, toolset = runtime.manifest.agents["dev"], runtime.toolset("dev")
    found: list[str] = []
    left_out = []

    async def no_call(name: str, arguments: dict[str, Any]) -> None:
        raise AssertionError("search_tools calls no tool")

    for query in ("list pull requests", "create a release", "list workflow runs"):
        answer = await search.answer_meta(config, toolset, "search_tools", {"query": query, "limit": 20}, no_call,
                                          found)
        assert answer is not None and answer["isError"] is False
        left_out += [t for t in answer["structuredContent"]["tools"] if not t["loaded"]]
    listed = [*search.listing(config, toolset), *(model_view(toolset.tools[name], 4000) for name in found)]
    assert found and left_out
    assert sum(search.listed_tokens(tool) for tool in listed) <= 6000
    assert all(t["note"] == "not loaded: the definitions would pass 6000 tokens" for t in left_out)


async def test_a_stateless_search_counts_call_tool_as_a_session_does(runtime: Any) -> None:
    """A stateless listing carries `call_tool` too: with a budget one token short of the listing and the best hit,
    that hit is not marked loaded (it was, while the stateless count left `call_tool` out), and what is marked
    loaded fits the budget with the listing."""
    config, toolset = runtime.manifest.agents["dev"], runtime.toolset("dev")
    base = sum(search.listed_tokens(tool) for tool in search.listing(config, toolset))
    listed = {tool.name for tool in search.listing(config, toolset)}
    hits = tool_search(None, toolset, "list pull requests", 20)
    best = next(hit["name"] for hit in hits if hit["name"] not in listed)
    cost = search.listed_tokens(model_view(toolset.tools[best], 4000))
    toolset.settings = toolset.settings.model_copy(update={"tool_definitions_budget": base + cost - 1})

    async def no_call(name: str, arguments: dict[str, Any]) -> None:
        raise AssertionError("search_tools calls no tool")

    answer = await search.answer_meta(config, toolset, "search_tools", {"query": "list pull requests", "limit": 20},
                                      no_call)
    assert answer is not None and answer["isError"] is False
    hits = {t["name"]: t for t in answer["structuredContent"]["tools"]}
    assert hits[best]["loaded"] is False
    assert hits[best]["note"] == f"not loaded: the definitions would pass {base + cost - 1} tokens"
    loaded = [model_view(toolset.tools[name], 4000) for name, t in hits.items() if t["loaded"] and name not in listed]
    assert base + sum(search.listed_tokens(tool) for tool in loaded) <= base + cost - 1


def test_the_registry_keeps_at_most_its_cap_of_sessions() -> None:
    found = FoundTools(max_sessions=2)
    found.of("a").append("x")
    found.of("b").append("y")
    found.of("a")  # used: b is now the oldest
    found.of("c").append("z")
    assert len(found) == 2 and found.listed("b") == () and found.listed("a") == ("x",)
    assert found.listed("never") == () and len(found) == 2  # looking does not create an entry
    found.forget("a")
    assert found.listed("a") == () and len(found) == 1


@pytest.mark.slow
async def test_over_stdio_the_one_session_hears_of_found_tools(tmp_path: Path, runtime: Any,
                                                              spec_cache: Path) -> None:
    listener = Listener()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway", "mcp", "dev", "--specs", str(tmp_path / "specs"), "--agents",
              str(tmp_path / "agents.yaml")],
        cwd=str(ROOT), env={**os.environ, "GATEWAY_CACHE_DIR": str(spec_cache)},  # compiled by `runtime`
    )
    async with Client(params, mode="legacy", message_handler=listener.on_message) as client:
        assert await _names(client) == [_tool(runtime, "users/get-authenticated"), *BASE]
        await client.call_tool("search_tools", {"query": "create an issue"})
        with anyio.fail_after(30):
            await listener.changed.wait()
        assert _tool(runtime, "issues/create") in await _names(client)


async def test_with_embeddings_the_door_searches_with_the_hybrid(tmp_path: Path, llm: LenientLLM,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The search runs in a worker thread then (it waits for the endpoint): same answer in both eras."""
    from test_search_embeddings import HYBRID_ORDER, QUERY, embedded_runtime, openai_embeddings

    monkeypatch.setenv("GATEWAY_CACHE_DIR", str(tmp_path / "cache"))
    runtime = embedded_runtime(tmp_path, llm, openai_embeddings(llm))
    runtime.manifest.agents["clerk"].tool_search = "on"
    with running(create_app(RuntimeHolder(runtime), watch=False)) as url:
        for mode in ("legacy", "auto"):
            async with Client(f"{url}/mcp/clerk", mode=mode) as client:
                found = await client.call_tool("search_tools", {"query": QUERY, "limit": 3})
            assert [t["name"] for t in found.structured_content["tools"]] == HYBRID_ORDER
    assert any(r.path == "/v1/embeddings" for r in llm.requests)
