from __future__ import annotations

from executor_helpers import arg, make_tool

from gateway.execution.arguments import validator_for
from gateway.execution.executor import validate_arguments


def _tool():
    return make_tool(
        arg("id", "path", {"type": "integer", "minimum": 1}),
        arg("when", "query", {"type": "string", "format": "date"}),
        arg("kind", "query", {"enum": ["a", "b"]}),
        arg("tags", "query", {"type": "array", "items": {"type": "string", "maxLength": 3}}),
        path="/x/{id}",
        extra_schema={"additionalProperties": False},
    )


def test_valid_arguments_have_no_errors() -> None:
    assert validate_arguments(_tool(), {"id": 3, "when": "2024-02-29", "kind": "a", "tags": ["abc"]}) == []


def test_each_failing_field_is_named_with_expected_and_given() -> None:
    errors = validate_arguments(_tool(), {"id": "7", "when": "yesterday", "kind": "c", "tags": ["long"], "x": 1})
    text = "\n".join(errors)
    assert "id: expected integer, got string \"7\"" in text
    assert "when: expected a valid date" in text
    assert "kind: expected one of [\"a\", \"b\"]" in text
    assert "tags[0]: expected at most" in text
    assert "unexpected field(s) x" in text and "allowed:" in text


def test_a_long_enum_is_shown_in_whole_values_and_says_how_many_more() -> None:
    variables = [f"variable_{n:02}" for n in range(40)]  # as Open-Meteo's `daily`: more than a line holds
    [error] = validate_arguments(make_tool(arg("daily", "query", {"enum": variables})), {"daily": "rain"})
    shown = error.split("expected one of ", 1)[1].split(", got", 1)[0]
    assert shown.startswith('["variable_00", "variable_01", ') and shown.endswith(" more]")
    count = int(shown.rsplit("… ", 1)[1].split()[0])
    assert shown.count('"variable_') + count == 40  # every value is shown whole or counted


def test_uri_formats_are_checked_like_the_fast_validator_checks_them() -> None:
    # jsonschema checks `uri` only with an RFC 3986 validator installed; without one it passed every string
    # although the fast validator (jsonschema_rs) refused them: the call went out with "not a uri".
    tool = make_tool(arg("hook", "query", {"type": "string", "format": "uri"}),
                     arg("next", "query", {"type": "string", "format": "uri-reference"}))
    assert validate_arguments(tool, {"hook": "https://example.com/x?y=1", "next": "../page/2"}) == []
    assert validate_arguments(tool, {"hook": "example.com/x"}) == [
        'hook: expected a valid uri, got "example.com/x"']
    assert validate_arguments(tool, {"next": "a b"}) == ['next: expected a valid uri-reference, got "a b"']


def test_missing_required_and_non_object() -> None:
    assert validate_arguments(_tool(), {}) == ["id: required field is missing"]
    assert validate_arguments(_tool(), [1]) == ["the arguments must be a JSON object, got array"]


def test_validators_are_compiled_once_per_schema() -> None:
    tool = _tool()
    assert validator_for(tool.input_schema) is validator_for(tool.input_schema)


def test_ecma_only_pattern_does_not_block_the_call() -> None:
    tool = make_tool(arg("name", "query", {"type": "string", "pattern": r"^\p{L}+$"}))
    assert validate_arguments(tool, {"name": "abc"}) == []


def test_an_optional_bodys_missing_required_fields_are_named_once_each_as_required() -> None:
    # Adyen's POST /companies/{companyId}/webhooks: the body is optional, so its required fields are required of
    # any body field given (`dependentRequired`); jsonschema's wording was "'filterMerchantAccounts' is a
    # dependency of 'active'", once per field given: eight lines, none saying what to add.
    from gateway.openapi import compile_document

    body = {"type": "object", "required": ["url", "active", "filterMerchantAccounts"], "properties": {
        "url": {"type": "string"}, "active": {"type": "boolean"},
        "filterMerchantAccounts": {"type": "array", "items": {"type": "string"}}}}
    spec = {"openapi": "3.1.0", "info": {"title": "m", "version": "1"}, "paths": {"/companies/{companyId}/webhooks": {
        "post": {"operationId": "createWebhook", "parameters": [
            {"name": "companyId", "in": "path", "required": True, "schema": {"type": "string"}}],
            "requestBody": {"content": {"application/json": {"schema": body}}},
            "responses": {"200": {"description": "ok"}}}}}}
    [tool] = compile_document(spec, api="m")
    assert "dependentRequired" in tool.input_schema
    assert validate_arguments(tool, {"companyId": "C1", "url": "https://example.com/hook", "active": True}) == [
        "filterMerchantAccounts: required field is missing (required once 'url' is given)"]
    assert validate_arguments(tool, {"companyId": "C1"}) == []
