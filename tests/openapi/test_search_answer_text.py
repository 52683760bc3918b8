"""Tool search reads what an operation answers (gateway/offer/answer_text.py): a field of the response may be the only
text that holds the user's word ("how many containers are paused": Docker's system information answers
`ContainersPaused`; its name and summary say "system" and "info")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.offer.answer_text import answer_text
from gateway.offer.index import index_of
from gateway.openapi import compile_document

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "apis-guru" / "docker.com" / "engine.json"


def _operation(operation_id: str, summary: str, answer: dict[str, Any] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"description": "OK"}
    if answer is not None:
        response["content"] = {"application/json": {"schema": answer}}
    return {"operationId": operation_id, "summary": summary, "responses": {"200": response}}


def _spec(answered: bool) -> dict[str, Any]:
    things = ("image", "volume", "network", "secret", "plugin", "service")
    paths: dict[str, Any] = {f"/{thing}s": {"get": _operation(f"list{thing.title()}s", f"List {thing}s")}
                             for thing in things}
    paths["/containers"] = {"get": _operation("listContainers", "List containers", {
        "type": "array", "items": {"type": "object", "properties": {"Id": {"type": "string"}}}})}
    paths["/info"] = {"get": _operation("systemInfo", "Get system information", {
        "type": "object", "properties": {"Containers": {"type": "integer"}, "ContainersPaused": {"type": "integer"},
                                         "KernelVersion": {"type": "string"}}} if answered else None)}
    return {"openapi": "3.0.3", "info": {"title": "engine", "version": "1"}, "paths": paths}


def _found(catalog: Any, request: str, limit: int = 3) -> list[str | None]:
    return [hit.tool.operation_id for hit in index_of(catalog).search(request, limit=limit)]


def test_a_field_only_the_response_holds_finds_the_operation() -> None:
    # "paused" and "kernel" are in no name, summary or path: only in the system information's answer
    catalog = compile_document(_spec(answered=True), api="engine")
    assert "systemInfo" in _found(catalog, "how many containers are paused")
    assert _found(catalog, "which kernel version does the host run")[:1] == ["systemInfo"]


def test_without_the_response_schema_nothing_says_it() -> None:
    catalog = compile_document(_spec(answered=False), api="engine")
    assert "systemInfo" not in _found(catalog, "how many containers are paused")
    assert _found(catalog, "which kernel version does the host run") == []


def test_a_request_for_a_write_is_not_matched_against_the_answers() -> None:
    # its operation is named by its own words: the reads' fields would only rank reads above it
    answered = index_of(compile_document(_spec(answered=True), api="engine"))
    plain = index_of(compile_document(_spec(answered=False), api="engine"))
    for request in ("delete the paused containers", "create a kernel version"):
        assert ([(hit.tool.operation_id, hit.score) for hit in answered.search(request, limit=5)]
                == [(hit.tool.operation_id, hit.score) for hit in plain.search(request, limit=5)]), request


def test_the_statements_add_the_answers_as_the_kept_phrases_do() -> None:
    """Without NumPy (the base install) the index's statements rank: the same tools, the same scores."""
    pytest.importorskip("numpy")
    index = index_of(compile_document(_spec(answered=True), api="engine"))
    opened = index.opened("engine")
    for request in ("how many containers are paused", "which kernel version does the host run", "list the images"):
        found = [(hit.tool.operation_id, hit.score) for hit in index.search(request, limit=10)]
        kept, opened.phrases = opened.phrases, None
        try:
            stated = [(hit.tool.operation_id, hit.score) for hit in index.search(request, limit=10)]
        finally:
            opened.phrases = kept
        assert found == stated and found, request


def test_the_catalog_keeps_them_so_the_index_can_be_built_again() -> None:
    catalog = compile_document(_spec(answered=True), api="engine")
    catalog.apis["engine"].search_index = b""  # the index built from the catalog, as when a spec carries none
    assert _found(catalog, "which kernel version does the host run")[:1] == ["systemInfo"]


def _tool(answer: dict[str, Any] | None) -> Any:
    spec = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
            "components": {"schemas": {
                "Node": {"type": "object", "properties": {
                    "ID": {"type": "string"},
                    "Status": {"$ref": "#/components/schemas/Status"},
                    "Parent": {"$ref": "#/components/schemas/Node"}}},
                "Status": {"type": "object", "properties": {"State": {"type": "string"},
                                                            "Message": {"type": "string"},
                                                            "Detail": {"type": "object", "properties": {
                                                                "Deepest": {"type": "string"}}}}}}},
            "paths": {"/x": {"get": _operation("x", "x", answer)}}}
    return next(iter(compile_document(spec, api="t")))


def test_the_names_are_read_to_two_levels_through_references_lists_maps_and_compositions() -> None:
    nodes = _tool({"type": "array", "items": {"$ref": "#/components/schemas/Node"}})
    assert answer_text(nodes) == "id status state message detail parent"  # Detail's own fields are a third level
    mapped = _tool({"type": "object", "properties": {"Containers": {"type": "object", "additionalProperties": {
        "type": "object", "properties": {"MacAddress": {"type": "string"}}}}}})
    assert answer_text(mapped) == "containers mac address"
    composed = _tool({"allOf": [{"$ref": "#/components/schemas/Status"},
                                {"type": "object", "properties": {"State": {"type": "string"},
                                                                  "Since": {"type": "string"}}}]})
    assert answer_text(composed) == "state message detail deepest since"  # each name once


def test_an_operation_answering_no_json_or_a_write_reads_nothing() -> None:
    assert answer_text(_tool(None)) == ""
    spec = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
            "paths": {"/x": {"post": _operation("x", "x", {"type": "object", "properties": {"Id": {}}})}}}
    assert answer_text(next(iter(compile_document(spec, api="t")))) == ""  # the created thing, whole: not read


@pytest.mark.skipif(not CORPUS.exists(), reason="Docker's spec is in ../shared/corpus, beside the repository")
def test_docker_what_the_engine_answers() -> None:
    tools = {tool.operation_id: tool for tool in compile_document(json.loads(CORPUS.read_text()), api="docker")}
    assert "containers paused containers running containers stopped" in answer_text(tools["SystemInfo"])
    assert "mac address" in answer_text(tools["NetworkInspect"])  # of each container: a map's values
    assert "status message" in answer_text(tools["NodeInspect"])  # Status.Message, the second level
    assert answer_text(tools["ContainerPause"]) == ""  # a write
