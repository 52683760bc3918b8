"""Tool search reads what a spec's tags say of their operations (gateway/offer/tag_text.py), each tag's description
once, in a table of its own (gateway/offer/tag_table.py): a tag's description may be the only text that holds the
user's word for the API's concept (Asana's section is "a column in a board view"), and reading it must not weigh the
tools' own words less (branch tags39's column did: BM25 alone lost)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.offer import index, phrase_scores, tag_table
from gateway.offer.index import build_index, index_of
from gateway.offer.tag_text import tag_descriptions
from gateway.openapi import compile_document

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "apis-guru" / "asana.com.json"


def _operation(operation_id: str, summary: str, tag: str) -> dict[str, Any]:
    return {"operationId": operation_id, "summary": summary, "tags": [tag], "responses": {"200": {"description": "OK"}}}


def _spec(described: bool, other: str | None = None) -> dict[str, Any]:
    """Six operations of tag Other (`other` its description), one of Sections, one of Projects."""
    things = ("order", "store", "vet", "invoice", "coupon", "ticket")
    paths: dict[str, Any] = {f"/{thing}s": {"get": _operation(f"list{thing.title()}s", f"List {thing}s", "Other")}
                             for thing in things}
    paths["/sections/{id}"] = {"get": _operation("getSection", "Get a section", "Sections")}
    paths["/projects/{id}"] = {"get": _operation("getProject", "Get a project", "Projects")}
    tags: list[dict[str, Any]] = [{"name": "Projects", "description": "A project is a list of tasks."},
                                  {"name": "Other", **({"description": other} if other else {})}]
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


def _hits(catalog: Any, query: str, **options: Any) -> list[tuple[str | None, float]]:
    return [(hit.tool.operation_id, hit.score) for hit in index_of(catalog).search(query, limit=10, **options)]


def test_the_tools_own_rows_are_not_lengthened() -> None:
    # a request no tag's text matches is ranked, and scored, as if no tag were described: each description is a row
    # of its own table, not words added to every tool of the tag (tags39's column: the rows of a described tag grew,
    # and BM25 weighed their own matches less)
    described = compile_document(_spec(described=True, other="Orders, stores, vets and invoices of the shop."),
                                 api="tasks")
    plain = compile_document(_spec(described=False), api="tasks")
    for query in ("the coupons", "open tickets"):  # tools of Other, whose description says neither
        assert _hits(described, query) == _hits(plain, query)
        assert _hits(described, query)


def test_a_tag_lifts_only_its_best_few_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    # Other's six tools are all of the tag whose description says "shop"; only `LIFTED` of them are lifted, those
    # the request's own words match best (coupons here), then in their order
    monkeypatch.setattr(tag_table, "LIFTED", 3)
    catalog = compile_document(_spec(described=True, other="Everything the shop sells and keeps."), api="tasks")
    hits = [name for name, _ in _hits(catalog, "the shop's coupons")]
    assert hits[0] == "listCoupons"
    assert len(hits) == 3
    assert set(hits) < {"listOrders", "listStores", "listVets", "listInvoices", "listCoupons", "listTickets"}


def test_the_weight_is_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = compile_document(_spec(described=True), api="tasks")
    monkeypatch.setattr(tag_table, "WEIGHT", 0.0)
    assert _hits(catalog, "show me that column") == []


def test_a_lifted_tool_the_caller_may_not_use_is_not_offered() -> None:
    catalog = compile_document(_spec(described=True), api="tasks")
    assert _hits(catalog, "show me that column", allowed=lambda tool: tool.operation_id != "getSection") == []


def test_an_index_whose_spec_describes_no_tag_holds_no_table() -> None:
    # Graph, Stripe, Slack...: their index's bytes are what they were before the table
    catalog = compile_document(_spec(described=False), api="tasks")
    tools = catalog.for_api("tasks")
    assert build_index(tools, {}) == build_index(tools, {"Unused": "a tag no operation has"})
    assert build_index(tools, {}) != build_index(tools, {"Sections": "a column in a board"})


def test_a_word_the_tools_say_themselves_lifts_no_tag() -> None:
    # "coupons" is in listCoupons' own row (one of the api's eight tools, more than `RARE` of them): the tools' own
    # match ranks it, and Other's description saying it too lifts none of Other's tools (its "shop" would)
    catalog = compile_document(_spec(described=True, other="The shop's coupons, orders and stores."), api="tasks")
    plain = compile_document(_spec(described=False), api="tasks")
    assert _hits(catalog, "the coupons") == _hits(plain, "the coupons")
    assert [name for name, _ in _hits(plain, "the coupons")] == ["listCoupons"]
    assert len(_hits(catalog, "the shop's coupons")) > 1


def _answering_spec() -> dict[str, Any]:
    """Four reports that take an argument "velocity", and the Boards tag's one read, which says it only in what it
    answers; the Boards tag's description alone says "kanban" (of four described tags)."""
    velocity = [{"name": "velocity", "in": "query", "schema": {"type": "number"}}]
    paths: dict[str, Any] = {f"/report{n}": {"get": {**_operation(f"report{n}", f"Report {n}", "Reports"),
                                                     "parameters": velocity}} for n in range(4)}
    stats = _operation("getBoardStats", "Get board stats", "Boards")
    stats["responses"]["200"]["content"] = {"application/json": {"schema": {
        "type": "object", "properties": {"velocity": {"type": "number"}, "done": {"type": "integer"}}}}}
    paths["/boards/{id}/stats"] = {"get": stats}
    tags = [{"name": "Boards", "description": "A kanban is a board of cards in lanes."},
            {"name": "Reports", "description": "Numbers over time."}]
    for thing in ("card", "lane"):  # a word of most tags' text weighs nothing by BM25
        paths[f"/{thing}s/{{id}}"] = {"get": _operation(f"get{thing.title()}", f"Get a {thing}", thing.title())}
        tags.append({"name": thing.title(), "description": f"A {thing} of the planner."})
    return {"openapi": "3.0.3", "info": {"title": "planner", "version": "1"}, "tags": tags, "paths": paths}


def _scores(catalog: Any, query: str, limit: int) -> dict[str | None, float]:
    return {hit.tool.operation_id: hit.score for hit in index_of(catalog).search(query, limit=limit)}


@pytest.mark.parametrize("kept", [True, False], ids=["kept-scores", "statements"])
def test_a_lifted_tool_is_scored_as_a_candidate_is(monkeypatch: pytest.MonkeyPatch, kept: bool) -> None:
    # getBoardStats matches "velocity" only by what it answers (gateway/offer/answer_text.py), below the four reports;
    # "kanban" lifts it. Among the candidates (every match, at first) or not among them (two candidates: the lift
    # brings it in), it scores the same: its answer's part counted both ways (before, a lifted tool that was not a
    # candidate was scored by its own row alone, and ranked lower); the tag weighs more here, so the lifted tool is
    # first either way. Both ways of scoring: each phrase's kept scores, and SQLite's statements (where NumPy is absent)
    if not kept:
        monkeypatch.setattr(phrase_scores, "_numpy", lambda: None)
    monkeypatch.setattr(tag_table, "WEIGHT", 4.0)
    request = "the velocity on the kanban"
    as_candidate = _scores(compile_document(_answering_spec(), api="planner"), request, 2)
    assert list(as_candidate)[:1] == ["getBoardStats"]
    monkeypatch.setattr(index, "_CANDIDATES", 2)
    catalog = compile_document(_answering_spec(), api="planner")
    assert "getBoardStats" not in _scores(catalog, "the velocity", 2)  # not among two candidates by its own words
    assert _scores(catalog, request, 2) == as_candidate
