"""Tool search reads what a spec's tags say of their operations (gateway/offer/tag_text.py): a tag's description
may be the only text that holds the user's word for the API's concept (Asana's section is "a column in a board
view")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.offer.index import index_of
from gateway.offer.tag_text import tag_descriptions
from gateway.openapi import compile_document

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "apis-guru" / "asana.com.json"


def _operation(operation_id: str, summary: str, tag: str) -> dict[str, Any]:
    return {"operationId": operation_id, "summary": summary, "tags": [tag], "responses": {"200": {"description": "OK"}}}


def _spec(described: bool) -> dict[str, Any]:
    things = ("order", "store", "vet", "invoice", "coupon", "ticket")
    paths: dict[str, Any] = {f"/{thing}s": {"get": _operation(f"list{thing.title()}s", f"List {thing}s", "Other")}
                             for thing in things}
    paths["/sections/{id}"] = {"get": _operation("getSection", "Get a section", "Sections")}
    paths["/projects/{id}"] = {"get": _operation("getProject", "Get a project", "Projects")}
    tags: list[dict[str, Any]] = [{"name": "Projects", "description": "A project is a list of tasks."},
                                  {"name": "Other"}]
    if described:
        tags.append({"name": "Sections", "description": "A section groups tasks. It can be a header above a list of "
                                                       "tasks or a *column* in a [board](/docs/boards) view.\n\n"
                                                       "Sections are shared by list and board views alike."})
    return {"openapi": "3.0.3", "info": {"title": "tasks", "version": "1"}, "tags": tags, "paths": paths}


def test_a_word_only_its_tags_description_says_finds_the_operation() -> None:
    # no operation writes "column": only the Sections tag's description does
    catalog = compile_document(_spec(described=True), api="tasks")
    hits = index_of(catalog).search("show me that column", limit=3)
    assert [hit.tool.operation_id for hit in hits][:1] == ["getSection"]


def test_without_the_description_nothing_says_it() -> None:
    catalog = compile_document(_spec(described=False), api="tasks")
    assert index_of(catalog).search("show me that column", limit=3) == []


def test_descriptions_are_read_by_tag_name_with_the_markup_out() -> None:
    read = tag_descriptions(_spec(described=True))
    assert set(read) == {"Projects", "Sections"}  # a tag without a description is not read
    assert "*column* in a [board] view" in read["Sections"]  # a link's text kept, its target out
    assert "docs" not in read["Sections"]
    assert tag_descriptions({"tags": "Sections"}) == {}  # written otherwise than the specification says
    assert tag_descriptions({"tags": [{"name": "A", "description": 3}, "B"]}) == {}


def test_the_catalog_keeps_them_so_the_index_can_be_built_again() -> None:
    catalog = compile_document(_spec(described=True), api="tasks")
    assert "column" in catalog.apis["tasks"].tag_descriptions["Sections"]
    catalog.apis["tasks"].search_index = b""  # the index built from the catalog, as when a spec carries none
    assert [hit.tool.operation_id for hit in index_of(catalog).search("show me that column", limit=1)] == ["getSection"]


@pytest.mark.skipif(not CORPUS.exists(), reason="Asana's spec is in ../shared/corpus, beside the repository")
def test_asana_a_column_of_a_board_is_a_section() -> None:
    catalog = compile_document(json.loads(CORPUS.read_text()), api="asana")
    hits = index_of(catalog).search("add a new column called QA to the board", limit=5)
    assert "createSectionForProject" in [hit.tool.operation_id for hit in hits]
