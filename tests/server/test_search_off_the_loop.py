"""A search that waits on an embeddings endpoint does not hold up the gateway's other requests.

Searches run in a worker thread on every door (the loop's `search_tools`, `GET /agents/{agent}/tools/search`,
MCP), so a slow `gateway.search_embeddings` endpoint, or the first opening of a big api's index, costs only the
search that needs it. The endpoint here is a real HTTP server on 127.0.0.1 that holds its answer until the test
lets it go; meanwhile `/healthz` and a chat on the same gateway must answer.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from scripted_llm import Call, Reply
from server_support import LenientLLM, running

from gateway.offer import embeddings as search_embeddings
from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app

SPEC = """\
openapi: 3.0.3
info: {title: Records, version: "1"}
servers: [{url: "http://127.0.0.1:9/api"}]
paths:
  /records/export:
    post: {operationId: exportRecords, summary: Archive old records, responses: {"200": {description: ok}}}
  /reports:
    post: {operationId: runReport, summary: Export a report, responses: {"200": {description: ok}}}
"""
AGENTS = """\
providers:
  openai: {{kind: openai, base_url: "{llm}/v1", api_key: chat-key}}
agents:
  clerk: {{model: openai/gpt-test, tools: [{{api: records}}], tool_search: "on"}}
gateway:
  search_embeddings: {{kind: openai, model: embed-small, base_url: "{embeddings}/v1", api_key: k, timeout: 60}}
"""


class HeldEmbeddings:
    """`POST /v1/embeddings` that answers only once `release` is set; `asked` is set when a request arrives."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.release = threading.Event()
        self.inputs: list[list[str]] = []
        held = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                texts = json.loads(self.rfile.read(int(self.headers["content-length"])))["input"]
                held.inputs.append(texts)
                held.asked.set()
                held.release.wait(60)
                body = json.dumps({"object": "list", "model": "embed-small", "usage": {"prompt_tokens": 1,
                                                                                      "total_tokens": 1},
                                   "data": [{"object": "embedding", "index": i, "embedding": [1.0, float(i)]}
                                            for i, _ in enumerate(texts)]}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def held() -> Iterator[HeldEmbeddings]:
    server = HeldEmbeddings()
    search_embeddings.forget_failures()
    yield server
    server.close()
    search_embeddings.forget_failures()


@pytest.fixture
def served(tmp_path: Path, llm: LenientLLM, held: HeldEmbeddings, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("GATEWAY_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "records.yaml").write_text(SPEC)
    (tmp_path / "agents.yaml").write_text(AGENTS.format(llm=llm.url, embeddings=held.url))
    runtime = load_runtime(tmp_path / "specs", tmp_path / "agents.yaml", use_cache=False)
    with running(create_app(RuntimeHolder(runtime), watch=False)) as url:
        yield url


def _in_background(work: Any) -> tuple[threading.Thread, list[Any]]:
    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(work()), daemon=True)
    thread.start()
    return thread, answers


def test_the_http_search_waits_alone(served: str, held: HeldEmbeddings) -> None:
    thread, answers = _in_background(
        lambda: httpx.get(f"{served}/agents/clerk/tools/search", params={"q": "export"}, timeout=60))
    assert held.asked.wait(30), "the search never asked the embeddings endpoint"
    # The search is waiting on the endpoint; the gateway still answers everything else.
    assert httpx.get(f"{served}/healthz", timeout=10).status_code == 200
    assert thread.is_alive() and answers == []
    held.release.set()
    thread.join(30)
    assert answers[0].status_code == 200
    assert {hit["name"] for hit in answers[0].json()["data"]} == {"exportRecords", "runReport"}


def test_the_loops_search_tools_waits_alone(served: str, held: HeldEmbeddings, llm: LenientLLM) -> None:
    llm.script(Reply(calls=[Call("search_tools", {"query": "export a report"})]), Reply(text="Found it."))
    thread, answers = _in_background(lambda: httpx.post(f"{served}/v1/chat/completions", timeout=60, json={
        "model": "clerk", "messages": [{"role": "user", "content": "export the report"}]}))
    assert held.asked.wait(30), "search_tools never asked the embeddings endpoint"
    assert httpx.get(f"{served}/healthz", timeout=10).status_code == 200
    assert thread.is_alive() and answers == []
    held.release.set()
    thread.join(30)
    assert answers[0].status_code == 200, answers[0].text
    assert answers[0].json()["choices"][0]["message"]["content"] == "Found it."


def test_a_search_answers_bm25_while_the_tools_embeddings_are_computed(
        tmp_path: Path, llm: LenientLLM, held: HeldEmbeddings, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """A search waits for a spec's embeddings at most `timeout` seconds (a local model takes minutes over a big
    spec the first time); the computation goes on, and a later search is fused."""
    from gateway.offer.toolsearch import search

    monkeypatch.setenv("GATEWAY_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "records.yaml").write_text(SPEC)
    (tmp_path / "agents.yaml").write_text(AGENTS.format(llm=llm.url, embeddings=held.url).replace(
        "timeout: 60", "timeout: 0.2"))
    runtime = load_runtime(tmp_path / "specs", tmp_path / "agents.yaml", use_cache=False)
    toolset = runtime.toolset("clerk")
    with caplog.at_level(logging.INFO, logger="gateway.search"):
        first = search(runtime.catalog, toolset, "export", 5)  # the endpoint holds the tools' embeddings
    assert "are being computed; BM25 alone meanwhile" in caplog.text
    assert held.asked.wait(30), "the computation never asked the endpoint"  # on a busy machine, maybe only now
    assert [hit["name"] for hit in first] == ["exportRecords", "runReport"]
    assert held.inputs == [["export records. records export. Archive old records",
                            "run report. reports. Export a report"]]  # no query asked for a ranking not used

    held.release.set()
    [computation] = search_embeddings.prepare(toolset.embeddings, runtime.catalog, ["records"])
    if isinstance(computation, search_embeddings.Computation):
        computation.wait(30)
    search(runtime.catalog, toolset, "export", 5)
    assert held.inputs[1:] == [["export"]]  # the tools' vectors are known: only the query is embedded now


def test_the_gateway_starts_the_tools_embeddings_before_any_search(served: str, held: HeldEmbeddings) -> None:
    """Each configuration (generation) starts its agents' embeddings when it is built: the first search then finds
    them ready, rather than paying for them (a local model: minutes over a big spec)."""
    assert held.asked.wait(30), "nothing asked for the tools' embeddings"
    assert held.inputs == [["export records. records export. Archive old records",
                            "run report. reports. Export a report"]]  # the tools' texts, before any query
    assert httpx.get(f"{served}/healthz", timeout=10).status_code == 200  # and it serves meanwhile
