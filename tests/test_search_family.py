"""A request's hard negatives from its right operation's family in the spec (bench/search_family.py, `--negatives
family`): a small spec shaped as the misses' siblings (Kubernetes' kinds, versions and watch; GitHub's org and repo
settings and an issue's labels; Graph's copies of one operation), compiled by the gateway."""

from __future__ import annotations

import json
from typing import Any

import numpy
import pytest

from bench.search_family import Family, edits, family_negatives, shape
from bench.search_finetune import Negatives, hard_negatives
from gateway.catalog import Tool
from gateway.openapi import compile_specs


def _operations(*methods: str) -> dict[str, Any]:
    return {method: {"summary": f"{method} it", "responses": {"200": {"description": "done"}}} for method in methods}


PATHS = {
    "/apis/batch/v1/namespaces/{namespace}/cronjobs": _operations("get", "post", "delete"),
    "/apis/batch/v1/namespaces/{namespace}/jobs": _operations("get"),
    "/apis/batch/v1beta1/namespaces/{namespace}/cronjobs": _operations("get"),
    "/apis/batch/v1/watch/namespaces/{namespace}/cronjobs": _operations("get"),
    "/apis/batch/v1/cronjobs": _operations("get"),
    "/apis/batch/v1/namespaces/{namespace}/cronjobs/{name}": _operations("put"),
    "/apis/batch/v1/namespaces/{namespace}/cronjobs/{name}/status": _operations("patch"),
    "/orgs/{org}/actions/permissions": _operations("get"),
    "/repos/{owner}/{repo}/actions/permissions": _operations("get"),
    "/repos/{owner}/{repo}/issues/{issue_number}/labels": _operations("get", "post"),
    "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}": _operations("delete"),
    "/me/messages/{message-id}/move": _operations("post"),
    "/users/{user-id}/messages/{message-id}/move": _operations("post"),
    "/groups/{group-id}/threads/{thread-id}/reply": _operations("post"),
}


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> list[Tool]:
    specs = tmp_path_factory.mktemp("specs")
    spec = {"openapi": "3.0.3", "info": {"title": "Family", "version": "1"},
            "servers": [{"url": "http://127.0.0.1:9/"}], "paths": PATHS}
    (specs / "family.json").write_text(json.dumps(spec))
    catalog = compile_specs(specs, use_cache=False)
    return list(catalog.for_api("family"))


def _index(tools: list[Tool], method: str, path: str) -> int:
    [found] = [i for i, tool in enumerate(tools) if tool.method == method and tool.path == path]
    return found


def _named(tools: list[Tool], members: dict[int, int]) -> dict[str, int]:
    return {f"{tools[i].method} {tools[i].path}": distance for i, distance in members.items()}


def test_a_shape_is_steps_a_literal_with_its_parameters_and_edits_count_steps() -> None:
    assert shape("/repos/{owner}/{repo}/issues/{issue_number}") == ("repos/{}/{}", "issues/{}")
    assert shape("/{version}/Accounts/{AccountSid}/Calls.json") == ("{}", "Accounts/{}", "Calls.json")
    # an owner of one parameter or two is one step: the org's setting and the repo's are one edit apart
    assert edits(shape("/orgs/{org}/actions/permissions"), shape("/repos/{owner}/{repo}/actions/permissions")) == 1
    assert edits(("a", "b"), ("a", "b")) == 0


def test_a_list_s_family_is_its_verbs_kinds_version_watch_and_scope(tools: list[Tool]) -> None:
    listed = _index(tools, "GET", "/apis/batch/v1/namespaces/{namespace}/cronjobs")
    assert _named(tools, Family(tools).of([listed])) == {
        "POST /apis/batch/v1/namespaces/{namespace}/cronjobs": 1,  # the same path, another method
        "DELETE /apis/batch/v1/namespaces/{namespace}/cronjobs": 1,
        "GET /apis/batch/v1/namespaces/{namespace}/jobs": 1,  # the same parent, another last segment
        "GET /apis/batch/v1beta1/namespaces/{namespace}/cronjobs": 1,  # another API version
        "GET /apis/batch/v1/watch/namespaces/{namespace}/cronjobs": 1,  # the watch of the list
        "GET /apis/batch/v1/cronjobs": 1,  # every namespace's: another scope
        "PUT /apis/batch/v1/namespaces/{namespace}/cronjobs/{name}": 2,  # another method on the item
        # PATCH .../cronjobs/{name}/status: two steps and the method away, too far
    }


def test_the_watch_s_family_holds_the_write_beside_it(tools: list[Tool]) -> None:
    watch = _index(tools, "GET", "/apis/batch/v1/watch/namespaces/{namespace}/cronjobs")
    members = _named(tools, Family(tools).of([watch]))
    assert members["POST /apis/batch/v1/namespaces/{namespace}/cronjobs"] == 2


def test_an_org_setting_and_a_label_taken_off_meet_their_siblings(tools: list[Tool]) -> None:
    family = Family(tools)
    repo = _index(tools, "GET", "/repos/{owner}/{repo}/actions/permissions")
    assert "GET /orgs/{org}/actions/permissions" in _named(tools, family.of([repo]))
    taken_off = _index(tools, "DELETE", "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}")
    assert _named(tools, family.of([taken_off])) == {
        "GET /repos/{owner}/{repo}/issues/{issue_number}/labels": 2,
        "POST /repos/{owner}/{repo}/issues/{issue_number}/labels": 2,
    }


def test_neither_a_right_operation_nor_a_copy_of_one_is_a_negative(tools: list[Tool]) -> None:
    family = Family(tools)
    moved = _index(tools, "POST", "/me/messages/{message-id}/move")
    # the same operation at a person's other address: the product answers both in one place
    assert "POST /users/{user-id}/messages/{message-id}/move" not in _named(tools, family.of([moved]))
    listed = _index(tools, "GET", "/apis/batch/v1/namespaces/{namespace}/cronjobs")
    created = _index(tools, "POST", "/apis/batch/v1/namespaces/{namespace}/cronjobs")
    members = family.of([listed, created])
    assert listed not in members and created not in members
    # the nearer of two right operations decides a member's distance
    assert members[_index(tools, "GET", "/apis/batch/v1/watch/namespaces/{namespace}/cronjobs")] == 1


def test_the_index_finds_what_comparing_every_pair_finds(tools: list[Tool]) -> None:
    family = Family(tools)
    for i, tool in enumerate(tools):
        every = {j: edits(shape(tool.path), shape(other.path)) + (other.method != tool.method)
                 for j, other in enumerate(tools) if j != i}
        assert family.near(i) == {j: distance for j, distance in every.items() if distance <= 2}


def test_negatives_keep_the_model_s_own_then_the_nearest_the_model_s_highest_first(tools: list[Tool]) -> None:
    family = Family(tools)
    listed = _index(tools, "GET", "/apis/batch/v1/namespaces/{namespace}/cronjobs")
    jobs = _index(tools, "GET", "/apis/batch/v1/namespaces/{namespace}/jobs")
    every = _index(tools, "GET", "/apis/batch/v1/cronjobs")
    replaced = _index(tools, "PUT", "/apis/batch/v1/namespaces/{namespace}/cronjobs/{name}")
    reply = _index(tools, "POST", "/groups/{group-id}/threads/{thread-id}/reply")
    vectors = numpy.eye(len(tools), dtype=numpy.float32)
    query = vectors[listed] + 0.9 * vectors[reply] + 0.6 * vectors[replaced] + 0.3 * vectors[every] \
        + 0.2 * vectors[jobs]
    first = hard_negatives(vectors, query[None, :], [[listed]])
    assert first == [[reply]]  # the model's best wrong tool is no sibling; it is kept
    chosen = family_negatives(family, vectors, query[None, :], [[listed]], 2, first=first)
    # then the nearest (distance 1) before the item's PUT (2) the model scores higher; among them, its order
    assert chosen == [[reply, every, jobs]]
    assert chosen == family_negatives(family, vectors, query[None, :], [[listed]], 2, first=first)
    # members the model scores alike go in the spec's order; the cap holds
    flat = family_negatives(family, vectors, numpy.zeros((1, len(tools)), dtype=numpy.float32), [[listed]], 4)
    nearest = sorted(i for i, distance in family.of([listed]).items() if distance == 1)
    assert len(nearest) > 4 and flat == [nearest[:4]]


def test_a_request_without_a_family_keeps_the_model_s_negative_alone(tools: list[Tool]) -> None:
    reply = _index(tools, "POST", "/groups/{group-id}/threads/{thread-id}/reply")
    vectors = numpy.eye(len(tools), dtype=numpy.float32)
    assert Family(tools).of([reply]) == {}
    assert family_negatives(Family(tools), vectors, vectors[[reply]], [[reply]], 2, first=[[0]]) == [[0]]


def test_the_option_names_what_a_request_trains_against() -> None:
    assert str(Negatives("family", 2)) == "1 model + 2 family"
    assert str(Negatives()) == "1 model"


def test_the_training_reads_no_judge() -> None:
    from bench import search_finetune, search_same

    assert search_same.UNMEASURED and not search_same.UNMEASURED & set(search_finetune.USED)
