from __future__ import annotations

from gateway.openapi import NAME_PATTERN, compile_document
from gateway.openapi._names import base_name, prefix_colliding, shorten


def test_operation_id_kept_when_valid_else_sanitized() -> None:
    assert base_name("repos/get-content", "GET", "/x") == "repos_get-content"
    assert base_name("listItems", "GET", "/x") == "listItems"


def test_names_start_with_a_letter_or_underscore() -> None:
    assert base_name("2fa-enable", "POST", "/x") == "op_2fa-enable"
    assert base_name("-x", "POST", "/x") == "op_-x"
    assert prefix_colliding([("1forge", "q"), ("b", "q")])[("1forge", "q")] == "op_1forge_q"


def test_missing_operation_id_derived_from_method_and_path() -> None:
    assert base_name(None, "GET", "/repos/{owner}/{repo}/issues") == "get_repos_owner_repo_issues"
    assert base_name("", "DELETE", "/") == "delete"


def test_long_names_are_shortened_with_a_stable_distinct_hash() -> None:
    long_a = "a" * 70 + "_one"
    long_b = "a" * 70 + "_two"
    assert len(shorten(long_a)) == 64 and NAME_PATTERN.match(shorten(long_a))
    assert shorten(long_a) == shorten(long_a)
    assert shorten(long_a) != shorten(long_b)


def test_duplicate_operation_ids_in_one_spec_stay_unique() -> None:
    spec = {"openapi": "3.0.0", "info": {"title": "t", "version": "1"}, "paths": {
        "/a": {"get": {"operationId": "dup", "responses": {}}},
        "/b": {"get": {"operationId": "dup", "responses": {}}},
        "/c/{x}/" + "segment/" * 12: {"post": {"responses": {}}},
    }}
    names = [t.name for t in compile_document(spec, api="t")]
    assert names[0] == "dup" and names[1].startswith("dup_") and len(set(names)) == 3
    assert all(NAME_PATTERN.match(n) for n in names)
    assert names == [t.name for t in compile_document(spec, api="t")]


def test_catalog_prefix_only_where_names_collide() -> None:
    final = prefix_colliding([("a", "list"), ("b/c", "list"), ("a", "only")])
    assert final == {("a", "list"): "a_list", ("b/c", "list"): "b_c_list", ("a", "only"): "only"}


def test_prefix_that_lands_on_an_existing_name_is_made_unique() -> None:
    final = prefix_colliding([("a", "x"), ("b", "x"), ("c", "a_x")])
    assert len(set(final.values())) == 3 and final[("c", "a_x")] == "a_x"
