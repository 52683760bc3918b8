"""The gateway's own OpenAPI document, and schemathesis fuzzing a running gateway against it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from openapi_spec_validator import validate
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def test_document_is_valid_openapi_and_lists_every_route(gw: tuple[str, Any]) -> None:
    url, _ = gw
    document = httpx.get(f"{url}/openapi.json").json()
    validate(document)
    assert set(document["paths"]) >= {"/healthz", "/v1/models", "/v1/chat/completions", "/agents",
                                      "/agents/{agent}/tools", "/agents/{agent}/tools/{tool}"}
    assert document["servers"] == [{"url": url}]


def _fuzz(url: str, operation: Any, mode: GenerationMode, examples: int, **fixed: Any) -> None:
    @given(case=operation.as_strategy(generation_mode=mode, **fixed))
    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    def run(case: Any) -> None:
        case.call_and_validate(base_url=url, checks=CHECKS, timeout=30)

    run()


@pytest.mark.slow
def test_schemathesis_finds_no_server_error_and_no_response_outside_the_schema(gw: tuple[str, Any]) -> None:
    url, _ = gw
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 6
    for operation in operations:
        _fuzz(url, operation, GenerationMode.POSITIVE, examples=8)
        if operation.method.upper() == "POST" or "{" in operation.path:  # something to get wrong
            _fuzz(url, operation, GenerationMode.NEGATIVE, examples=8)
        if "{agent}" in operation.path:  # also reach the real agents and tools, not only 404s
            fixed = {"agent": "weather", **({"tool": "getForecast"} if "{tool}" in operation.path else {})}
            _fuzz(url, operation, GenerationMode.POSITIVE, examples=8, path_parameters=fixed)
