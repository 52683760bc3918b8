"""The written requests that train the local model (bench/search_written, #30): training data only, so each names
operations its API has, and none is a request of any measured part (a copy would put a judged request in the training
data)."""

from __future__ import annotations

import re

import pytest

from bench.search import PARTS, SPECS, load_tasks
from bench.search_finetune import WRITTEN, load_written
from gateway.catalog import Catalog

WRITTEN_APIS = sorted(path.stem for path in WRITTEN.glob("*.yaml"))


def _same(text: str) -> str:
    """A request as compared: case, spacing and the punctuation at its ends do not make it another request."""
    return re.sub(r"\s+", " ", text).strip(" .?!").lower()


def test_each_written_file_is_of_a_measured_api_but_slicebox() -> None:
    """Slicebox, new in `round19`, has no written requests: `round19` is the first judge of a set no training saw."""
    assert set(WRITTEN_APIS) <= set(SPECS) - {"slicebox"}


@pytest.mark.parametrize("name", WRITTEN_APIS)
def test_a_written_file_names_its_api_as_its_request_set_does(name: str) -> None:
    import yaml

    written = yaml.safe_load((WRITTEN / f"{name}.yaml").read_text())
    assert written["api"] == load_tasks(name)["api"]
    assert load_written(name), f"{name}.yaml holds no written34 request"
    assert all(set(task) == {"q", "ops"} and task["ops"] for task in load_written(name))


@pytest.mark.parametrize("name", WRITTEN_APIS)
def test_no_written_request_is_a_request_of_any_part_or_written_twice(name: str) -> None:
    tasks = load_tasks(name)
    measured = {_same(task["q"]) for part in PARTS for task in tasks.get(part, [])}
    written = [_same(task["q"]) for task in load_written(name)]
    assert not [text for text in written if text in measured], "written requests that a part holds"
    assert len(set(written)) == len(written), "a request written twice"


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("name", WRITTEN_APIS)
def test_every_operation_named_by_a_written_request_exists_in_its_spec(name: str, corpus_catalog: Catalog) -> None:
    api = load_tasks(name)["api"]
    known = {n for tool in corpus_catalog.for_api(api) for n in (tool.name, tool.operation_id)}
    assert known, f"{api} is not in the corpus"
    unknown = [(task["q"], op) for task in load_written(name) for op in task["ops"] if op not in known]
    assert not unknown, f"operations that {api} does not have: {unknown}"
