"""Tool search says when nothing it found is close to the request (`gateway.offer.closeness`), on every door.

Real parts: Docker Engine's spec from ../shared/corpus (105 operations, the smallest API the threshold was measured
on; skipped without it), a small spec shaped as GitHub's (nine operations: under `MIN_SCOPE_TOOLS`, where nothing is
said), the packaged local model as `pip install '.[local-search]'` installs it (skipped without it; `.ci/run`
installs it), uvicorn serving the gateway, the official `mcp` client, a scripted LLM (an OpenAI-compatible server on
127.0.0.1) for the loop and as an embeddings endpoint. The off-topic request is one of bench/search_offtopic.yaml's
kind; the in-API one is answered by Docker's `ContainerDelete` first, and both are marked as they are with the
shipped delta at the shipped threshold.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from scripted_llm import Call, Reply
from server_support import LenientLLM, running

from gateway.config.embeddings_endpoint import (
    PACKAGED_MODEL,
    SearchEmbeddings,
    local_model_problem,
    packaged_delta_sha256,
)
from gateway.offer import embeddings as search_embeddings
from gateway.offer.closeness import MEASURED_DELTA, MIN_SCOPE_TOOLS, WEAK_COSINE, closeness
from gateway.offer.toolsearch import WEAK_NOTE, ToolOffer, search
from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app

pytestmark = pytest.mark.usefixtures("fresh_embeddings")
needs_model = pytest.mark.skipif(local_model_problem(PACKAGED_MODEL) is not None,
                                 reason=f"{local_model_problem(PACKAGED_MODEL)} (.ci/run does)")

SPEC = """\
openapi: 3.0.3
info: {title: Code hosting, version: "1"}
servers: [{url: "http://127.0.0.1:9/api"}]
paths:
  /repos/{owner}/{repo}/issues:
    parameters:
      - {name: owner, in: path, required: true, schema: {type: string}}
      - {name: repo, in: path, required: true, schema: {type: string}}
    get:
      operationId: issues/list-for-repo
      summary: List repository issues
      tags: [issues]
      parameters:
        - name: state
          in: query
          schema: {type: string, enum: [open, closed, all]}
          description: Indicates the state of the issues to return.
      responses: {"200": {description: ok}}
    post:
      operationId: issues/create
      summary: Create an issue
      tags: [issues]
      requestBody:
        content:
          application/json:
            schema: {type: object, required: [title], properties: {title: {type: string}, body: {type: string}}}
      responses: {"201": {description: created}}
  /repos/{owner}/{repo}/issues/{issue_number}:
    parameters:
      - {name: owner, in: path, required: true, schema: {type: string}}
      - {name: repo, in: path, required: true, schema: {type: string}}
      - {name: issue_number, in: path, required: true, schema: {type: integer}}
    patch:
      operationId: issues/update
      summary: Update an issue
      description: Issue owners and users with push access can edit an issue, and close or reopen it.
      tags: [issues]
      requestBody:
        content:
          application/json:
            schema: {type: object, properties: {state: {type: string, enum: [open, closed]}, title: {type: string}}}
      responses: {"200": {description: ok}}
  /repos/{owner}/{repo}/pulls:
    parameters:
      - {name: owner, in: path, required: true, schema: {type: string}}
      - {name: repo, in: path, required: true, schema: {type: string}}
    get:
      operationId: pulls/list
      summary: List pull requests
      tags: [pulls]
      responses: {"200": {description: ok}}
  /repos/{owner}/{repo}/pulls/{pull_number}/merge:
    parameters:
      - {name: owner, in: path, required: true, schema: {type: string}}
      - {name: repo, in: path, required: true, schema: {type: string}}
      - {name: pull_number, in: path, required: true, schema: {type: integer}}
    put:
      operationId: pulls/merge
      summary: Merge a pull request
      tags: [pulls]
      responses: {"200": {description: ok}}
  /repos/{owner}/{repo}/branches:
    parameters:
      - {name: owner, in: path, required: true, schema: {type: string}}
      - {name: repo, in: path, required: true, schema: {type: string}}
    get:
      operationId: repos/list-branches
      summary: List branches
      tags: [repos]
      responses: {"200": {description: ok}}
  /user/repos:
    post:
      operationId: repos/create-for-authenticated-user
      summary: Create a repository for the authenticated user
      tags: [repos]
      requestBody:
        content:
          application/json:
            schema: {type: object, required: [name], properties: {name: {type: string}, private: {type: boolean}}}
      responses: {"201": {description: created}}
  /repos/{owner}/{repo}/releases:
    parameters:
      - {name: owner, in: path, required: true, schema: {type: string}}
      - {name: repo, in: path, required: true, schema: {type: string}}
    post:
      operationId: repos/create-release
      summary: Create a release
      tags: [repos]
      responses: {"201": {description: created}}
"""
AGENTS = """\
providers:
  openai: {{kind: openai, base_url: "{llm}/v1", api_key: test-key}}
gateway:
  search_embeddings: {embeddings}
agents:
  dev: {{model: openai/gpt-test, tools: [{{api: {api}}}], tool_search: "on"}}
"""
LOCAL = "{kind: local, timeout: 600}"
DOCKER = Path("apis-guru") / "docker.com" / "engine.json"
OFF_TOPIC = "what's the weather going to be in Paris tomorrow"
IN_API = "delete the container web-old, it is not needed any more"
KEY = "ck-dev-0a1b2c3d4e5f6789"


def _runtime(folder: Path, llm: LenientLLM, embeddings: str = LOCAL, clients: str = "",
             corpus: Path | None = None) -> Any:
    """A gateway's runtime over Docker Engine's spec from `corpus`, or the small spec without one."""
    (folder / "specs").mkdir(parents=True)
    if corpus is not None:
        api = "docker"
        (folder / "specs" / "docker.json").symlink_to(corpus / DOCKER)
    else:
        api = "code"
        (folder / "specs" / "code.yaml").write_text(SPEC)
    (folder / "agents.yaml").write_text(AGENTS.format(llm=llm.url, embeddings=embeddings, api=api) + clients)
    runtime = load_runtime(folder / "specs", folder / "agents.yaml", cache_dir=folder / "compiled")
    settings = runtime.manifest.gateway.search_embeddings
    for pending in search_embeddings.prepare(settings, runtime.catalog, [api]) if settings is not None else []:
        if isinstance(pending, search_embeddings.Computation):
            pending.wait()  # the tools' vectors first: until they are there a search answers BM25 alone
    return runtime


@pytest.fixture
def served(tmp_path: Path, llm: LenientLLM, corpus: Path) -> Iterator[tuple[str, Any]]:
    runtime = _runtime(tmp_path, llm, corpus=corpus)
    with running(create_app(RuntimeHolder(runtime), watch=False)) as url:
        yield url, runtime


@needs_model
@pytest.mark.corpus
def test_the_http_answer_marks_an_off_topic_request_weak_and_still_lists_the_closest(
        served: tuple[str, Any]) -> None:
    url, runtime = served
    off = httpx.get(f"{url}/agents/dev/tools/search", params={"q": OFF_TOPIC, "limit": 5}).json()
    assert off["match"] == "weak"
    # the ranking and its scores are the search's own, marked or not: the mark only adds a field beside them
    assert off["data"] == search(runtime.catalog, runtime.toolset("dev"), OFF_TOPIC, 5) and len(off["data"]) >= 3
    close = httpx.get(f"{url}/agents/dev/tools/search", params={"q": IN_API}).json()
    assert close["match"] == "close" and close["data"][0]["operation_id"] == "ContainerDelete"
    schema = httpx.get(f"{url}/openapi.json").json()["components"]["schemas"]["ToolSearch"]  # the gateway's own API
    assert schema["properties"]["match"]["enum"] == ["weak", "close"]
    for answer in (off, close):
        jsonschema.validate(answer, schema)


@needs_model
@pytest.mark.corpus
def test_docker_requests_it_never_saw_are_close_and_other_trades_weak(served: tuple[str, Any]) -> None:
    """The threshold decided on direct counts (bench/README.md, "The weak mark's rule decided again on direct
    counts"): two of Docker's own requests from `round33`/`round34` (spent sets the delta never saw), answered in
    five, come closest at cosines 0.336 and 0.288, which rank50's pooled cut (0.337) marked weak, false flags among
    the 2.6% it cost; at the direct rule's threshold they are close, and requests of another trade (0.204, 0.246) are
    still weak. (A refund and a reminder, at 0.277 and 0.321, are close again: the price of that.)"""
    url, _ = served
    for request, right in (("I published the database with random ports; which host port did docker give its 5432",
                            "ContainerInspect"),
                           ("a swarm replica ships its output through gelf and reading that task's log errors out; "
                            "is gelf supported there at all", "TaskLogs")):
        answer = httpx.get(f"{url}/agents/dev/tools/search", params={"q": request, "limit": 5}).json()
        assert answer["match"] == "close", request
        assert right in [hit["operation_id"] for hit in answer["data"]], request
    for request in ("which wine goes well with salmon", OFF_TOPIC):
        assert httpx.get(f"{url}/agents/dev/tools/search", params={"q": request}).json()["match"] == "weak", request


@pytest.mark.corpus
def test_without_a_measured_scale_the_answer_says_nothing(tmp_path: Path, llm: LenientLLM, corpus: Path) -> None:
    """BM25 alone, and an embeddings endpoint (the scripted LLM's vectors: a scale nobody measured), carry no
    `match` over an API as large as those measured: nothing is said rather than a guess (a request some of whose
    words the spec has, so BM25 answers)."""
    endpoint = f'{{kind: openai, model: m, base_url: "{llm.url}/v1", timeout: 10}}'
    for folder, embeddings in (("bm25", "null"), ("endpoint", endpoint)):
        runtime = _runtime(tmp_path / folder, llm, embeddings, corpus=corpus)
        assert len(runtime.toolset("dev")) >= MIN_SCOPE_TOOLS
        with running(create_app(RuntimeHolder(runtime), watch=False)) as url:
            answer = httpx.get(f"{url}/agents/dev/tools/search",
                               params={"q": "plan the release party and order pizza for the network"}).json()
        assert "match" not in answer and answer["data"], folder
    assert llm.embedding_inputs()  # the endpoint's vectors were fused: a search it answered says nothing either


@needs_model
def test_a_scope_smaller_than_any_measured_says_nothing(tmp_path: Path, llm: LenientLLM) -> None:
    """Nine operations, under `MIN_SCOPE_TOOLS`: the closest's cosine over a handful of tools is on a scale nobody
    measured (this spec's right first answer to a bug report was marked weak), so neither answer is marked."""
    runtime = _runtime(tmp_path, llm)
    assert len(runtime.toolset("dev")) < MIN_SCOPE_TOOLS
    with running(create_app(RuntimeHolder(runtime), watch=False)) as url:
        bug = httpx.get(f"{url}/agents/dev/tools/search", params={"q": "open a bug about the login page"}).json()
        off = httpx.get(f"{url}/agents/dev/tools/search", params={"q": OFF_TOPIC}).json()
    assert bug["data"][0]["operation_id"] == "issues/create" and off["data"]
    assert "match" not in bug and "match" not in off
    ok, told = ToolOffer(runtime.manifest.agents["dev"], runtime.toolset("dev")).answer(
        "search_tools", {"query": OFF_TOPIC})
    assert ok and told["tools"] and "match" not in told and WEAK_NOTE not in told["note"]


@needs_model
@pytest.mark.corpus
@pytest.mark.anyio
async def test_mcp_search_tools_tells_the_model_nothing_close_was_found(served: tuple[str, Any]) -> None:
    url, _ = served
    async with Client(streamable_http_client(f"{url}/mcp/dev")) as client:
        off = await client.call_tool("search_tools", {"query": OFF_TOPIC})
        close = await client.call_tool("search_tools", {"query": IN_API})
    assert off.is_error is False and off.structured_content["match"] == "weak"
    assert WEAK_NOTE in off.content[0].text and off.structured_content["tools"]
    assert close.structured_content["match"] == "close" and WEAK_NOTE not in close.content[0].text
    assert close.structured_content["tools"][0]["operation_id"] == "ContainerDelete"
    async with Client(streamable_http_client(f"{url}/mcp/dev"), mode="legacy") as client:  # a session's own note
        session = await client.call_tool("search_tools", {"query": OFF_TOPIC})
    note = session.structured_content["note"]
    assert note.startswith(WEAK_NOTE) and "this session's tools/list" in note


@needs_model
@pytest.mark.corpus
@pytest.mark.anyio
async def test_the_loops_search_tools_tells_the_model_and_loads_the_closest(served: tuple[str, Any],
                                                                          llm: LenientLLM) -> None:
    url, _ = served
    llm.script(Reply(calls=[Call("search_tools", {"query": OFF_TOPIC})]), Reply(text="I cannot tell the weather."))
    async with httpx.AsyncClient(timeout=60) as client:
        answer = await client.post(f"{url}/v1/chat/completions",
                                   json={"model": "dev", "messages": [{"role": "user", "content": OFF_TOPIC}]})
    assert answer.status_code == 200, answer.text
    [told] = [m["content"] for m in llm.bodies()[1]["messages"] if m["role"] == "tool"]
    assert WEAK_NOTE in told and '"match":"weak"' in told.replace(" ", "")
    offered = [t["function"]["name"] for t in llm.bodies()[1]["tools"]]
    assert len(offered) > 2  # the closest were loaded all the same: the model decides


@needs_model
@pytest.mark.corpus
def test_the_cli_says_it_beside_the_array(tmp_path: Path, llm: LenientLLM, corpus: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from gateway.cli.commands import main

    _runtime(tmp_path, llm, corpus=corpus)
    argv = ["tools", "--specs", str(tmp_path / "specs"), "--agents", str(tmp_path / "agents.yaml"), "--agent", "dev",
            "--search"]
    assert main([*argv, OFF_TOPIC]) == 0
    printed = capsys.readouterr()
    assert json.loads(printed.out) and f"tool search: {WEAK_NOTE}" in printed.err
    assert main([*argv, IN_API]) == 0
    printed = capsys.readouterr()
    assert json.loads(printed.out)[0]["operation_id"] == "ContainerDelete" and WEAK_NOTE not in printed.err


def test_only_the_packaged_tuned_model_over_a_measured_scope_is_judged() -> None:
    near: Any = [(None, WEAK_COSINE - 0.01)]
    at: Any = [(None, WEAK_COSINE)]
    local = SearchEmbeddings.model_validate({"kind": "local"})
    assert closeness(local, near, MIN_SCOPE_TOOLS) == "weak" and closeness(local, at, MIN_SCOPE_TOOLS) == "close"
    assert closeness(local, near, MIN_SCOPE_TOOLS - 1) is None
    assert closeness(SearchEmbeddings.model_validate({"kind": "local", "tuned": False}), near, 500) is None
    assert closeness(SearchEmbeddings.model_validate({"kind": "openai", "model": "m"}), near, 500) is None
    assert closeness(None, near, 500) is None and closeness(local, [], 500) is None


def test_the_threshold_was_measured_for_the_packaged_delta() -> None:
    """A delta trained again moves every cosine: WEAK_COSINE belongs to the delta it was measured with."""
    assert packaged_delta_sha256() == MEASURED_DELTA, (
        f"gateway/offer/minilm_lora.npz (sha256 {packaged_delta_sha256()}) is not the delta WEAK_COSINE was measured "
        f"for ({MEASURED_DELTA}): dump its rows on sets it never saw (bench/search_match.py), decide the threshold on "
        "them (bench/search_direct.py) and set both (gateway/offer/closeness.py)")


@needs_model
@pytest.mark.corpus
def test_the_console_says_it_above_the_closest(tmp_path: Path, llm: LenientLLM, corpus: Path) -> None:
    from gateway.server.supervision import Safety

    runtime = _runtime(tmp_path, llm, clients=f"clients:\n  me: {{key: {KEY}, agents: [dev]}}\n", corpus=corpus)
    safety = Safety.open(runtime, store=str(tmp_path / "state.db"))
    try:
        with running(create_app(RuntimeHolder(runtime), watch=False, **safety.app_options())) as url, \
                httpx.Client(base_url=url, timeout=60) as client:
            assert client.post("/console/signin", json={"key": KEY}).status_code == 200
            off = client.get("/console/agents/dev", params={"q": OFF_TOPIC}).text
            close = client.get("/console/agents/dev", params={"q": IN_API}).text
            every = client.get("/console/agents", params={"q": OFF_TOPIC}).text
    finally:
        shut = getattr(safety.store, "close", None)  # SQLite's file
        if shut is not None:
            shut()
    assert 'id="search-weak"' in off and off.count('href="/console/agents/dev/tools/') >= 3  # the closest, listed
    assert 'id="search-weak"' not in close and 'href="/console/agents/dev/tools/ContainerDelete"' in close
    assert 'id="search-weak"' in every and "the tools of dev" in every
