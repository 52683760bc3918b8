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
from recording_server import Recorded, RecordingServer, Reply
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)
from server_support import ISSUE, LenientLLM, running, write_project

from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app
from gateway.server.supervision import Safety

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          negative_data_rejection, positive_data_acceptance]
TOOL_PATHS = {"/agents/weather/tools/getForecast", "/agents/triage/tools/getRepo", "/agents/triage/tools/listIssues",
              "/agents/triage/tools/getIssue", "/agents/triage/tools/createIssueComment"}


REPO = {"id": 1, "name": "app", "full_name": "acme/app", "private": False, "html_url": "https://github.com/acme/app",
        "owner": {"login": "acme", "id": 1}}


def _github_with_every_repo(request: Recorded) -> Reply:
    if request.path.endswith("/comments"):
        return Reply(201, {"id": 99, "body": "ack", "html_url": "https://github.com/acme/app/issues/7#c99"})
    if "/issues" in request.path:
        return Reply(200, ISSUE if "/issues/" in request.path else [ISSUE])
    return Reply(200, REPO)


@pytest.fixture
def served(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Iterator[str]:
    """The gateway as `gateway serve` builds it: with the safety layer (keys, limits, audit, approvals), and an
    upstream that knows every repository (so a valid call is a 200, not the upstream's 404 as a 502)."""
    upstream.route("/github/repos/", _github_with_every_repo)
    specs, agents = write_project(tmp_path, llm.url, upstream.url)
    runtime = load_runtime(specs, agents, use_cache=False)
    safety = Safety.open(runtime, store="memory:")
    with running(create_app(RuntimeHolder(runtime), watch=False, **safety.app_options())) as url:
        yield url


def test_document_is_valid_openapi_and_lists_every_route(served: str, gw: tuple[str, Any]) -> None:
    document = httpx.get(f"{served}/openapi.json").json()
    validate(document)
    # Without `clients` each direct call is listed with its tool's exact body.
    assert set(document["paths"]) == {"/healthz", "/readyz", "/v1/models", "/v1/models/{model}", "/v1/chat/completions",
                                      "/v1/responses", "/v1/responses/{id}", "/agents", "/agents/{agent}/tools",
                                      "/agents/{agent}/tools/search",
                                      "/approvals", "/approvals/{id}", "/audit", "/settings", *TOOL_PATHS}
    forecast = document["paths"]["/agents/weather/tools/getForecast"]["post"]["requestBody"]
    assert forecast["required"] is True
    ref = forecast["content"]["application/json"]["schema"]["$ref"]
    assert document["components"]["schemas"][ref.rsplit("/", 1)[1]]["required"] == ["latitude", "longitude"]
    assert document["components"]["schemas"]["ChatRequest"]["properties"]["model"]["minLength"] == 1
    assert document["servers"] == [{"url": served}]
    bare, _ = gw  # without the safety layer its routes are neither served nor described
    assert "/approvals" not in httpx.get(f"{bare}/openapi.json").json()["paths"]


LOOSE_SCHEMA = {"/v1/responses", "/v1/chat/completions"}
"""Doors held to the response checks only, not to "valid data is accepted, invalid data refused": the Responses
request's `input` items are any object in its schema, and on both chat doors the caller's `tools` and
`tool_choice` are refused for reasons no schema can say (a name of the agent's own tools, a provider that cannot
honour `tool_choice`). `test_the_door_refuses_what_the_document_refuses` holds chat to its schema's shape."""


def _fuzz(url: str, operation: Any, mode: GenerationMode, examples: int, **fixed: Any) -> None:
    checks = CHECKS if operation.path not in LOOSE_SCHEMA else CHECKS[:4]

    @given(case=operation.as_strategy(generation_mode=mode, **fixed))
    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    def run(case: Any) -> None:
        case.call_and_validate(base_url=url, checks=checks, timeout=30)

    run()


@pytest.mark.slow
def test_schemathesis_finds_no_server_error_and_no_response_outside_the_schema(served: str) -> None:
    url = served
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 19
    for operation in operations:
        if operation.path == "/agents/triage/tools/createIssueComment":
            continue  # under approval: a call is queued before its arguments are validated (the pipeline's order)
        _fuzz(url, operation, GenerationMode.POSITIVE, examples=8)
        try:
            _fuzz(url, operation, GenerationMode.NEGATIVE, examples=8)
        except Unsatisfiable:  # nothing in it can be invalid (e.g. only free-form strings in the path)
            pass
        if "{agent}" in operation.path:  # also reach the real agents and tools, not only 404s
            fixed = {"agent": "weather", **({"tool": "getForecast"} if "{tool}" in operation.path else {})}
            _fuzz(url, operation, GenerationMode.POSITIVE, examples=8, path_parameters=fixed)


def test_the_door_refuses_what_the_document_refuses(served: str) -> None:
    """Found by `schemathesis run --checks all`: each is a 400, as the document says."""
    repeated = httpx.get(f"{served}/agents/triage/tools?strict=null&strict=null")
    assert repeated.status_code == 400 and repeated.json()["error"]["param"] == "strict"
    assert httpx.get(f"{served}/agents/triage/tools?strict=null").status_code == 400
    assert httpx.get(f"{served}/agents/triage/tools?format=json&format=openai").status_code == 400
    assert httpx.get(f"{served}/agents/triage/tools?strict=true").status_code == 200
    for body in ({"model": "", "messages": [{"role": "user", "content": "hi"}]},
                 {"model": "weather", "messages": [{"role": "user", "content": "hi"}], "temperature": -1},
                 {"model": "weather", "messages": [{"role": "user", "content": "hi"}], "stop": ["a"] * 5}):
        response = httpx.post(f"{served}/v1/chat/completions", json=body)
        assert response.status_code == 400, body
    accepted = httpx.post(f"{served}/v1/chat/completions", json={
        "model": "weather", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2.0})
    assert accepted.status_code == 200  # 2.0 is the integer 2 in JSON


def test_a_method_a_path_does_not_take_is_answered_with_the_methods_the_document_lists(served: str) -> None:
    document = httpx.get(f"{served}/openapi.json").json()
    for path, concrete in (("/agents/{agent}/tools/search", "/agents/weather/tools/search"),
                           ("/agents/{agent}/tools", "/agents/weather/tools"), ("/v1/responses", "/v1/responses")):
        answer = httpx.request("OPTIONS", f"{served}{concrete}")
        assert answer.status_code == 405, path
        allowed = {method.strip() for method in answer.headers["allow"].split(",")} - {"HEAD"}  # Starlette's, with GET
        assert allowed == {method.upper() for method in document["paths"][path]}, path


RESPONSES_ITEMS_ALLOWED = [
    {"role": "user", "content": "hi"},
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"},
                                                         {"type": "refusal", "refusal": "no"}]},
    {"role": "system", "content": None},
]
RESPONSES_ITEMS_REFUSED = [{}, {"type": "message"}, {"role": "tool", "content": "x"},
                           {"type": "item_reference", "id": "x"},
                           {"role": "user", "content": [{"type": "input_image"}]},
                           {"type": "function_call_output", "output": "x"}]


def test_the_responses_door_takes_exactly_the_input_items_its_schema_allows(served: str) -> None:
    import jsonschema

    schema = httpx.get(f"{served}/openapi.json").json()["components"]["schemas"]["ResponsesRequest"]
    item_schema = schema["properties"]["input"]["anyOf"][1]["items"]
    for item in RESPONSES_ITEMS_ALLOWED + RESPONSES_ITEMS_REFUSED:
        allowed = jsonschema.Draft202012Validator(item_schema).is_valid(item)
        assert allowed is (item in RESPONSES_ITEMS_ALLOWED), item
        answer = httpx.post(f"{served}/v1/responses", json={"model": "weather", "input": [item, {
            "role": "user", "content": "hi"}]})
        assert answer.status_code == (200 if allowed else 400), (item, answer.text)
    calls = [{"type": "function_call", "call_id": "c1", "name": "getForecast", "arguments": "{}", "id": "fc_1",
              "status": "completed"}, {"type": "function_call_output", "call_id": "c1", "output": "{}"}]
    answer = httpx.post(f"{served}/v1/responses", json={"model": "weather", "input": [
        {"role": "user", "content": "hi"}, *calls]})
    assert answer.status_code == 200, answer.text
