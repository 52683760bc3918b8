"""The embeddings' list the fusion reads is of operations, not tools (gateway.offer.embeddings.first_operations):
Graph answers one operation at several owners' paths (`/me/...` and `/users/{id}/...`), which the model scores
alike, so fifty tools held far fewer operations. A real embeddings endpoint on 127.0.0.1 (tests/scripted_llm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from scripted_llm import ScriptedLLM

from gateway.config.embeddings_endpoint import SearchEmbeddings
from gateway.offer import embeddings
from gateway.offer.copies import address
from gateway.openapi import compile_specs

pytestmark = pytest.mark.usefixtures("fresh_embeddings")

OPERATIONS = 30
"""Each at two copies (the caller's and anyone's): sixty tools, more than the fusion's fifty places."""


def _spec(folder: Path) -> Path:
    paths = []
    for n in range(OPERATIONS):
        for owner, parameters in (("/me", ""), ("/users/{user-id}", "\n      parameters: [{name: user-id, in: path, "
                                                                    "required: true, schema: {type: string}}]")):
            paths.append(f"  {owner}/widget{n}:\n    get:\n      operationId: {owner.split('/')[1]}_widget{n}\n"
                         f"      summary: Read the widget {n}{parameters}\n"
                         '      responses: {"200": {description: ok}}\n')
    (folder / "specs").mkdir()
    spec = folder / "specs" / "widgets.yaml"
    spec.write_text('openapi: 3.0.3\ninfo: {title: Widgets, version: "1"}\nservers: [{url: "http://127.0.0.1:9"}]\n'
                    "paths:\n" + "".join(paths))
    return spec


def _settings(llm: ScriptedLLM) -> SearchEmbeddings:
    return SearchEmbeddings.model_validate({"kind": "openai", "model": "embed-small", "base_url": f"{llm.url}/v1",
                                            "api_key": "embed-key"})


def _similar(settings: SearchEmbeddings, catalog: object, api: str, query: str,
             allowed: object = None) -> list[object]:
    for computation in embeddings.prepare(settings, catalog, [api]):  # type: ignore[arg-type]
        if isinstance(computation, embeddings.Computation):
            computation.wait()
    _, similar = embeddings.hybrid_with_similar(settings, catalog, [api], allowed, query, [])  # type: ignore[arg-type]
    assert similar is not None
    return similar


@pytest.mark.parametrize("allowed", [None, lambda tool: True], ids=["every tool", "an agent's tools"])
def test_the_model_hands_the_fusion_one_place_per_operation(tmp_path: Path, llm: ScriptedLLM, allowed: object) -> None:
    catalog = compile_specs(_spec(tmp_path).parent, cache_dir=tmp_path / "compiled")
    similar = _similar(_settings(llm), catalog, "widgets", "read the widget", allowed)
    held = [address(tool) for tool, _ in similar]  # type: ignore[attr-defined]
    assert len(held) == len(set(held)) == OPERATIONS  # every operation once, though 60 tools match it
    cosines = [cosine for _, cosine in similar]  # type: ignore[misc]
    assert cosines == sorted(cosines, reverse=True)
