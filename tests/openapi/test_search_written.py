"""The written requests that train the local model (bench/search_written, #30): training data only, so each names
operations its API has, and none is a request of any measured part or nearly one (a copy would put a judged request in
the training data: written without reading the later parts, a few came out in nearly their words). A file holds one
list a batch of writing (`written34`, `written35`); every test here reads all of them (`load_written`), as the
training does, so a request of one list is compared with the parts and with every request of every list."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.search import PARTS, SPECS, load_tasks
from bench.search_finetune import WRITTEN, WRITTEN_LIST, load_written
from gateway.catalog import Catalog

WRITTEN_APIS = sorted(path.stem for path in WRITTEN.glob("*.yaml"))


NEAR = 0.6
"""Two requests whose sets of words share this much (Jaccard: the words of both over the words of either) are one
request said twice: "rotate the swarm's worker join token" and "rotate the worker join token of the swarm" (0.75).
Fixed before the written requests trained anything; it drops about one in eighty of them."""


def _same(text: str) -> str:
    """A request as compared: case, spacing and the punctuation at its ends do not make it another request."""
    return re.sub(r"\s+", " ", text).strip(" .?!").lower()


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _near(words: set[str], other: set[str]) -> bool:
    return len(words & other) >= NEAR * len(words | other)


def near_copies(name: str) -> list[str]:
    """API `name`'s written requests that are a request of one of its parts, or nearly (`NEAR`); only the written
    text is given back, never the measured one."""
    measured = [_words(task["q"]) for part in PARTS for task in load_tasks(name).get(part, [])]
    found = []
    for task in load_written(name):
        words = _words(task["q"])
        if any(_near(words, other) for other in measured):
            found.append(task["q"])
    return found


def test_each_written_file_is_of_a_measured_api_but_slicebox() -> None:
    """Slicebox, new in `round19`, has no written requests: `round19` is the first judge of a set no training saw."""
    assert set(WRITTEN_APIS) <= set(SPECS) - {"slicebox"}


@pytest.mark.parametrize("name", WRITTEN_APIS)
def test_a_written_file_names_its_api_as_its_request_set_does(name: str) -> None:
    import yaml

    written = yaml.safe_load((WRITTEN / f"{name}.yaml").read_text())
    assert written["api"] == load_tasks(name)["api"]
    assert load_written(name, ("written34",)), f"{name}.yaml holds no written34 request"
    assert all(set(task) == {"q", "ops"} and task["ops"] for task in load_written(name))


@pytest.mark.parametrize("name", WRITTEN_APIS)
def test_every_key_of_a_written_file_but_its_api_is_a_list_the_training_reads(name: str) -> None:
    """A list under another name (`writen35`, `written_35`) would be left out of the training without a word."""
    import yaml

    written = yaml.safe_load((WRITTEN / f"{name}.yaml").read_text())
    lists = {key: tasks for key, tasks in written.items() if key != "api"}
    assert all(WRITTEN_LIST.fullmatch(key) and isinstance(tasks, list) for key, tasks in lists.items())


@pytest.mark.parametrize("name", WRITTEN_APIS)
def test_no_written_request_is_a_request_of_any_part_nor_nearly_one(name: str) -> None:
    assert not near_copies(name), "written requests that a part holds, in (nearly) the same words"


@pytest.mark.parametrize("name", WRITTEN_APIS)
def test_no_request_is_written_twice(name: str) -> None:
    written = [_same(task["q"]) for task in load_written(name)]
    assert len(set(written)) == len(written)


def test_every_written_list_is_read_and_a_list_can_be_chosen(tmp_path: Path) -> None:
    """The training takes every `written*` list of a file in its order (written35 with written34), or only the
    lists it is given (a delta trained before a later batch, trained again)."""
    (tmp_path / "shop.yaml").write_text(
        "api: shop\n"
        "written34:\n  - {q: find the order a customer placed, ops: [getOrder]}\n"
        "written35:\n  - {q: which orders shipped this week, ops: [listOrders]}\n"
        "  - {q: take the coupon off my cart, ops: [deleteCartCoupon]}\n"
        "notes: not a list of requests\n")
    every = load_written("shop", folder=tmp_path)
    assert [task["ops"] for task in every] == [["getOrder"], ["listOrders"], ["deleteCartCoupon"]]
    assert [task["ops"] for task in load_written("shop", ("written34",), folder=tmp_path)] == [["getOrder"]]
    assert load_written("nowhere", folder=tmp_path) == []


def test_a_near_copy_is_found_and_another_request_is_not() -> None:
    """`NEAR` on the example of its docstring, and on two requests of one operation in other words."""
    asked = _words("rotate the swarm's worker join token")
    assert _near(asked, _words("Rotate the worker join token of the swarm."))
    assert not _near(asked, _words("give the swarm new worker join credentials, the old ones leaked"))


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("name", WRITTEN_APIS)
def test_every_operation_named_by_a_written_request_exists_in_its_spec(name: str, corpus_catalog: Catalog) -> None:
    api = load_tasks(name)["api"]
    known = {n for tool in corpus_catalog.for_api(api) for n in (tool.name, tool.operation_id)}
    assert known, f"{api} is not in the corpus"
    unknown = [(task["q"], op) for task in load_written(name) for op in task["ops"] if op not in known]
    assert not unknown, f"operations that {api} does not have: {unknown}"
