"""Values a spec writes beside a schema that break that schema are kept from the model (`_values`)."""

from __future__ import annotations

from typing import Any

from gateway.catalog import Catalog
from gateway.execution.executor import validate_arguments
from gateway.openapi import compile_document

UUID = "123e4567-e89b-12d3-a456-426614174000"


def _compile(parameters: list[dict[str, Any]], schemas: dict[str, Any] | None = None) -> Catalog:
    spec = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
            "paths": {"/items": {"get": {"operationId": "listItems", "parameters": parameters,
                                         "responses": {"200": {"description": "ok"}}}}},
            "components": {"schemas": schemas or {}}}
    return compile_document(spec, api="t", file="t.yaml")


def _query(name: str, schema: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "in": "query", "schema": schema, **extra}


def test_defaults_and_examples_that_break_their_schema_are_dropped_with_a_warning() -> None:
    catalog = _compile([
        _query("limit", {"type": "integer", "maximum": 100, "default": 500, "example": 20}),
        _query("id", {"type": "string", "format": "uuid", "example": "string"}),
        _query("sort", {"$ref": "#/components/schemas/sort"}, example="newest"),
        _query("state", {"$ref": "#/components/schemas/state_filter"}),
    ], {"sort": {"type": "string", "enum": ["asc", "desc"]},
        "state_filter": {"allOf": [{"$ref": "#/components/schemas/sort"}], "default": "open", "example": "asc"}})
    tool = catalog.get("listItems")
    assert tool is not None
    properties = tool.input_schema["properties"]
    assert properties["limit"] == {"type": "integer", "maximum": 100, "examples": [20]}
    assert properties["id"] == {"type": "string", "format": "uuid"}
    assert "examples" not in properties["sort"]
    state = tool.input_schema["$defs"]["state_filter"]
    assert "default" not in state and state["examples"] == ["asc"]  # checked through its $ref
    messages = [d.message for d in catalog.diagnostics]
    assert any("default 500 does not match its own schema" in m for m in messages)
    assert any('example(s) "string" do not match' in m for m in messages)
    assert any('example(s) "newest" do not match' in m for m in messages)
    assert any('default "open" does not match' in m for m in messages)
    assert all(d.level == "warning" for d in catalog.diagnostics)


def test_values_that_fit_are_kept_and_null_fits_a_nullable_schema() -> None:
    catalog = _compile([
        _query("since", {"type": "string", "format": "date-time", "example": "2024-01-02T03:04:05Z"}),
        _query("owner", {"type": "string", "format": "uuid", "nullable": True, "default": None, "example": UUID}),
    ])
    tool = catalog.get("listItems")
    assert tool is not None
    properties = tool.input_schema["properties"]
    assert properties["since"]["examples"] == ["2024-01-02T03:04:05Z"]
    assert properties["owner"]["default"] is None and properties["owner"]["examples"] == [UUID]
    assert catalog.diagnostics == []


def test_enum_values_of_the_wrong_type_are_read_as_text_so_the_operation_can_be_called() -> None:
    catalog = _compile([
        _query("tsp", {"type": "string", "enum": [1, 2]}, required=True),
        _query("extended", {"type": "string", "enum": [True, False]}),
        _query("grants", {"type": "array", "enum": ["code"], "items": {"type": "string"}}),
    ])
    tool = catalog.get("listItems")
    assert tool is not None
    properties = tool.input_schema["properties"]
    assert properties["tsp"]["enum"] == ["1", "2"] and properties["extended"]["enum"] == ["true", "false"]
    assert "enum" not in properties["grants"]
    assert validate_arguments(tool, {"tsp": "1", "extended": "true", "grants": ["code"]}) == []
    assert sum("enum" in d.message for d in catalog.diagnostics) == 3
