"""`tool_search: native` through the chat door: all of GitHub (1,223 operations) deferred to the provider's search.

On an `anthropic` and an `openai-responses` provider. Real parts: uvicorn serving the gateway, the scripted LLM
speaking the Messages API or the Responses API (it refuses a reference to a tool the request did not defer, and
a search block not passed back), a recording upstream, the official `openai` client as the caller. Skipped
without ../shared/corpus.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from recording_server import RecordingServer
from recording_server import Reply as UpstreamReply
from scripted_llm import Call, Reply, ToolSearch
from server_support import LenientLLM, running

from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app

pytestmark = [pytest.mark.corpus]

AGENTS = """\
providers:
  claude: {{kind: {kind}, base_url: "{llm}", api_key: test-key}}
apis:
  github: {{base_url: "{upstream}/gh", auth: {{type: bearer, token: gh-token}}}}
agents:
  dev:
    model: claude/claude-test
    tools: [{{api: github}}]
    tool_search: native
    pinned: [users/get-authenticated]
"""


SEARCH_TOOL = {"anthropic": {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
               "openai-responses": {"type": "tool_search"}}


@pytest.fixture(params=["anthropic", "openai-responses"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def served(tmp_path: Path, corpus: Path, llm: LenientLLM, upstream: RecordingServer, kind: str,
           spec_cache: Path) -> Iterator[tuple[str, Any]]:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "github.json").symlink_to(corpus / "github" / "api.github.com.json")
    agents = tmp_path / "agents.yaml"
    base = llm.url if kind == "anthropic" else f"{llm.url}/v1"
    agents.write_text(AGENTS.format(kind=kind, llm=base, upstream=upstream.url))
    runtime = load_runtime(specs, agents, cache_dir=spec_cache)
    with running(create_app(RuntimeHolder(runtime), watch=False)) as url:
        yield url, runtime


def _names(runtime: Any, *operations: str) -> list[str]:
    by_operation = {t.tool.operation_id: t.name for t in runtime.toolset("dev")}
    return [by_operation[o] for o in operations]


@pytest.mark.parametrize("stream", [False, True])
def test_the_model_searches_natively_and_issues_create_reaches_the_upstream(
        served: tuple[str, Any], llm: LenientLLM, upstream: RecordingServer, stream: bool, kind: str) -> None:
    url, runtime = served
    create, update, me = _names(runtime, "issues/create", "issues/update", "users/get-authenticated")
    upstream.route("/gh/", UpstreamReply(201, {"id": 1, "number": 483, "title": "Login fails"}))
    llm.script(
        Reply(text="Searching. ", tool_search=ToolSearch("create an issue", found=[create, update]),
              calls=[Call(create, {"owner": "acme", "repo": "app", "title": "Login fails"})]),
        Reply(text="Opened issue #483."),
    )
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    ask = {"model": "dev", "messages": [{"role": "user", "content": "Open an issue in acme/app: Login fails"}]}
    if stream:
        chunks = list(client.chat.completions.create(**ask, stream=True))  # type: ignore[call-overload]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        completion = client.chat.completions.create(**ask)  # type: ignore[call-overload]
        text = completion.choices[0].message.content
        assert [s["tool"] for s in completion.model_extra["gateway"]["steps"]] == [create]
    assert text.endswith("Opened issue #483.")

    assert upstream.last.method == "POST" and upstream.last.path == "/gh/repos/acme/app/issues"
    assert upstream.last.header("Authorization") == "Bearer gh-token"
    assert upstream.last.json() == {"title": "Login fails"}

    first, second = llm.bodies()
    functions = [f for t in first["tools"] for f in (t["tools"] if t.get("type") == "namespace" else [t])]
    deferred = [t["name"] for t in functions if t.get("defer_loading")]
    kept = [t.get("name") or t["type"] for t in first["tools"]
            if not t.get("defer_loading") and t.get("type") != "namespace"]
    search = SEARCH_TOOL[kind].get("name") or "tool_search"
    assert kept == [me, search] or kept == ["describe_tool", me, search]
    assert SEARCH_TOOL[kind] in first["tools"]
    assert len(deferred) == len(runtime.toolset("dev")) - 1 and create in deferred
    assert second["tools"] == first["tools"]
    if kind == "anthropic":
        [assistant] = [m["content"] for m in second["messages"] if m["role"] == "assistant"]
        assert [b["type"] for b in assistant] == ["text", "server_tool_use", "tool_search_tool_result", "tool_use"]
        assert assistant[1]["input"] == {"query": "create an issue"}
        assert [r["tool_name"] for r in assistant[2]["content"]["tool_references"]] == [create, update]
        [results] = [m["content"] for m in second["messages"][2:] if m["role"] == "user"]
        assert results[0]["type"] == "tool_result" and results[0]["tool_use_id"] == assistant[3]["id"]
    else:
        items = second["input"]
        assert [i["type"] for i in items[-5:]] == ["message", "tool_search_call", "tool_search_output",
                                                   "function_call", "function_call_output"]
        assert items[-4]["arguments"] == {"query": "create an issue"}
        [space] = [t for t in first["tools"] if t.get("type") == "namespace"]
        assert space["name"] == "github" and "GitHub" in space["description"]
        [loaded] = items[-3]["tools"]
        assert loaded["name"] == "github" and [t["name"] for t in loaded["tools"]] == [create, update]
        assert items[-2]["namespace"] == "github" and items[-1]["call_id"] == items[-2]["call_id"]
