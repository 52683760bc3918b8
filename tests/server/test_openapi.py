"""The gateway's own OpenAPI document, and schemathesis fuzzing a running gateway against it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from openapi_spec_validator import validate
from recording_server import RecordingServer
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from server_support import LenientLLM, running, write_project

from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app
from gateway.server.safety import Safety

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture
def served(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Iterator[str]:
    """The gateway as `gateway serve` builds it: with the safety layer (keys, limits, audit, approvals)."""
    specs, agents = write_project(tmp_path, llm.url, upstream.url)
    runtime = load_runtime(specs, agents, use_cache=False)
    safety = Safety.open(runtime, store="memory:")
    with running(create_app(RuntimeHolder(runtime), watch=False, **safety.app_options())) as url:
        yield url


def test_document_is_valid_openapi_and_lists_every_route(served: str, gw: tuple[str, Any]) -> None:
    document = httpx.get(f"{served}/openapi.json").json()
    validate(document)
    assert set(document["paths"]) == {"/healthz", "/v1/models", "/v1/models/{model}", "/v1/chat/completions",
                                      "/v1/responses", "/v1/responses/{id}", "/agents",
                                      "/agents/{agent}/tools", "/agents/{agent}/tools/search",
                                      "/agents/{agent}/tools/{tool}",
                                      "/approvals", "/approvals/{id}", "/audit"}
    assert document["servers"] == [{"url": served}]
    bare, _ = gw  # without the safety layer its routes are neither served nor described
    assert "/approvals" not in httpx.get(f"{bare}/openapi.json").json()["paths"]


def _fuzz(url: str, operation: Any, mode: GenerationMode, examples: int, **fixed: Any) -> None:
    @given(case=operation.as_strategy(generation_mode=mode, **fixed))
    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    def run(case: Any) -> None:
        case.call_and_validate(base_url=url, checks=CHECKS, timeout=30)

    run()


@pytest.mark.slow
def test_schemathesis_finds_no_server_error_and_no_response_outside_the_schema(served: str) -> None:
    url = served
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 13
    for operation in operations:
        _fuzz(url, operation, GenerationMode.POSITIVE, examples=8)
        try:
            _fuzz(url, operation, GenerationMode.NEGATIVE, examples=8)
        except Unsatisfiable:  # nothing in it can be invalid (e.g. only free-form strings in the path)
            pass
        if "{agent}" in operation.path:  # also reach the real agents and tools, not only 404s
            fixed = {"agent": "weather", **({"tool": "getForecast"} if "{tool}" in operation.path else {})}
            _fuzz(url, operation, GenerationMode.POSITIVE, examples=8, path_parameters=fixed)
