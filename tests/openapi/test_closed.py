"""Closed objects no call could satisfy (ShipEngine's `additionalProperties: false` beside `allOf`), read as meant."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from gateway.catalog import Catalog
from gateway.execution.executor import validate_arguments
from gateway.openapi import compile_document

PACKAGE_TYPE = {
    "type": "object",
    "properties": {
        "package_id": {"type": "string", "readOnly": True},
        "package_code": {"type": "string", "minLength": 1},
        "name": {"type": "string", "minLength": 1},
        "dimensions": {"$ref": "#/components/schemas/dimensions"},
    },
    "required": ["package_id", "package_code", "name"],
}
DIMENSIONS = {"type": "object", "properties": {"length": {"type": "number"}, "unit": {"type": "string"}}}


def _compile(body: dict[str, Any], response: dict[str, Any] | None = None, **schemas: Any) -> Catalog:
    operation: dict[str, Any] = {
        "operationId": "create_package_type", "responses": {"200": {"description": "ok"}},
        "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
    }
    if response is not None:
        operation["responses"]["200"]["content"] = {"application/json": {"schema": response}}
    spec = {"openapi": "3.0.0", "info": {"title": "ship", "version": "1"},
            "paths": {"/v1/packages": {"post": operation}},
            "components": {"schemas": {"package_type": PACKAGE_TYPE, "dimensions": DIMENSIONS, **schemas}}}
    catalog = compile_document(spec, api="ship", file="ship.yaml")
    assert not catalog.errors, catalog.errors
    return catalog


def test_all_of_members_are_merged_into_the_closed_level_so_the_operation_can_be_called() -> None:
    closed = {"type": "object", "additionalProperties": False,
              "allOf": [{"$ref": "#/components/schemas/package_type"}], "description": "A create package type body"}
    catalog = _compile({"$ref": "#/components/schemas/create_package_type_request_body"},
                       create_package_type_request_body=closed)
    tool = catalog.get("create_package_type")
    assert tool is not None
    # The merged body is a plain object again: spread into top-level arguments, readOnly left out of inputs
    # and out of `required` (a required readOnly property applies to responses only).
    assert set(tool.input_schema["properties"]) == {"package_code", "name", "dimensions"}
    assert tool.input_schema["required"] == ["package_code", "name"]
    assert validate_arguments(tool, {"package_code": "custom", "name": "box", "dimensions": {"length": 2}}) == []
    assert validate_arguments(tool, {"package_code": "custom", "name": "box", "colour": "red"})  # still closed
    [note] = [d for d in catalog.diagnostics if "beside allOf" in d.message]
    assert note.level == "warning" and note.pointer == "/components/schemas/create_package_type_request_body"


def test_nested_all_of_and_members_that_say_more_than_properties() -> None:
    named = {"type": "object", "properties": {"nickname": {"type": "string"}}, "required": ["nickname"],
             "allOf": [{"$ref": "#/components/schemas/package_type"}]}
    either = {"anyOf": [{"required": ["name"]}, {"required": ["package_code"]}]}
    closed = {"additionalProperties": False, "allOf": [{"$ref": "#/components/schemas/named"}, either]}
    tool = _compile(closed, named=named).get("create_package_type")
    assert tool is not None
    body = tool.input_schema["properties"]["body"]  # a member with `anyOf` keeps the body one argument
    assert set(body["properties"]) == {"nickname", "package_code", "name", "dimensions"}
    assert body["required"] == ["nickname", "package_code", "name"]
    assert [list(member) for member in body["allOf"]] == [["anyOf"]]
    assert validate_arguments(tool, {"body": {"nickname": "n", "package_code": "c", "name": "box"}}) == []


def test_output_schemas_are_merged_too_so_real_answers_validate() -> None:
    closed = {"additionalProperties": False, "allOf": [{"$ref": "#/components/schemas/package_type"}]}
    tool = _compile({"type": "object", "properties": {"q": {"type": "string"}}}, response=closed).get(
        "create_package_type")
    assert tool is not None and tool.output_schema is not None
    answer = {"package_id": "se-1", "package_code": "custom", "name": "box"}
    assert Draft202012Validator(tool.output_schema).is_valid(answer)
    assert tool.output_schema["required"] == ["package_id", "package_code", "name"]  # readOnly is in answers


def test_required_names_a_closed_object_never_declares_are_not_required() -> None:
    body = {"type": "object", "additionalProperties": False, "properties": {"carrier_id": {"type": "string"}},
            "required": ["carrier_id", "amount"]}
    catalog = _compile({"type": "object", "properties": {"funds": body}, "required": ["funds"]})
    tool = catalog.get("create_package_type")
    assert tool is not None
    assert tool.input_schema["properties"]["funds"]["required"] == ["carrier_id"]
    assert validate_arguments(tool, {"funds": {"carrier_id": "se-1"}}) == []
    assert any("'amount' declared nowhere under additionalProperties: false" in d.message
               for d in catalog.diagnostics)


def test_required_read_only_names_from_an_all_of_member_are_not_required_in_inputs() -> None:
    body = {"allOf": [{"$ref": "#/components/schemas/package_type"}], "required": ["package_id", "name"]}
    tool = _compile(body).get("create_package_type")
    assert tool is not None
    assert tool.input_schema["properties"]["body"]["required"] == ["name"]


def test_a_closed_one_of_declares_its_branch_properties_and_each_branch_requires_its_own() -> None:
    """ShipEngine's calculate_rates: `required: [shipment_id, shipment]` beside a `oneOf` whose branches
    declare one each (and require neither): meant as "one or the other"."""
    by_id = {"type": "object", "properties": {"shipment_id": {"type": "string"}}}
    by_shipment = {"type": "object", "properties": {"shipment": {"type": "object"}}}
    body = {"type": "object", "additionalProperties": False, "required": ["shipment_id", "shipment"],
            "oneOf": [{"$ref": "#/components/schemas/by_id"}, {"$ref": "#/components/schemas/by_shipment"}],
            "properties": {"note": {"type": "string"}}}
    catalog = _compile(body, by_id=by_id, by_shipment=by_shipment)
    tool = catalog.get("create_package_type")
    assert tool is not None
    assert validate_arguments(tool, {"body": {"shipment_id": "se-1", "note": "n"}}) == []
    assert validate_arguments(tool, {"body": {"shipment": {}}}) == []
    assert validate_arguments(tool, {"body": {"shipment_id": "se-1", "shipment": {}}})  # still one of them
    assert validate_arguments(tool, {"body": {"colour": "red", "shipment_id": "se-1"}})  # still closed
    assert any("declared only in oneOf/anyOf branches" in d.message for d in catalog.diagnostics)


def test_a_closed_one_of_whose_branches_only_require_is_read_as_written() -> None:
    body = {"type": "object", "additionalProperties": False, "properties": {"a": {"type": "string"},
            "b": {"type": "string"}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}
    catalog = _compile(body)
    assert catalog.diagnostics == []
