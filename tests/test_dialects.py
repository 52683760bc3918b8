from __future__ import annotations

import pytest
from google.genai import types as genai_types
from mcp import types as mcp_types

from gateway.catalog import AgentTool
from gateway.dialects import (
    drop_strict_nulls,
    gemini_function,
    mcp_structured_content,
    mcp_tool,
    openai_tool,
    render_tools,
)
from gateway.openapi import compile_document

SPEC = {
    "openapi": "3.0.3", "info": {"title": "t", "version": "1"},
    "components": {"schemas": {
        "Node": {"type": "object", "properties": {"next": {"$ref": "#/components/schemas/Node"}}},
        "Base": {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}},
    }},
    "paths": {
        "/items/{id}": {"get": {"operationId": "getItem", "parameters": [
            {"name": "id", "in": "path", "required": True, "schema": {"type": "integer", "format": "int64"}},
            {"name": "q", "in": "query", "schema": {"type": "string", "minLength": 2, "nullable": True}},
            {"name": "kind", "in": "query", "schema": {"type": "string", "enum": ["a", "b"]}}],
            "responses": {"200": {"description": "ok", "content": {"application/json": {
                "schema": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}}}}}},
        "/nodes": {"post": {"operationId": "addNode", "requestBody": {"content": {"application/json": {
            "schema": {"type": "object", "properties": {
                "node": {"$ref": "#/components/schemas/Node"},
                "count": {"type": "integer", "exclusiveMinimum": True, "minimum": 0},
                "ext": {"allOf": [{"$ref": "#/components/schemas/Base"},
                                  {"type": "object", "properties": {"name": {"type": "string"}}}]}}}}}},
            "responses": {"201": {"description": "ok", "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/Base"}}}}}}},
        "/free": {"put": {"operationId": "free", "requestBody": {"content": {"application/json": {
            "schema": {"type": "object", "additionalProperties": {"type": "string"}}}}},
            "responses": {"204": {"description": "no content"}}}},
        "/ping": {"get": {"operationId": "ping", "responses": {"204": {"description": "ok"}}}},
    },
}


@pytest.fixture
def tools():
    catalog = compile_document(SPEC, api="t", file="t.yaml")
    assert not catalog.errors
    return catalog.tools


def test_openai_strict_closes_objects_and_makes_optionals_nullable(tools) -> None:
    rendered = openai_tool(tools["getItem"], strict=True)["function"]
    params = rendered["parameters"]
    assert rendered["strict"] is True
    assert params["additionalProperties"] is False
    assert params["required"] == ["id", "q", "kind"]
    assert params["properties"]["id"] == {"type": "integer"}  # int64 is not a strict-mode format
    assert params["properties"]["q"] == {"type": ["string", "null"]}  # minLength dropped, already nullable
    assert params["properties"]["kind"] == {"type": ["string", "null"], "enum": ["a", "b", None]}
    assert tools["getItem"].input_schema["required"] == ["id"]  # the catalog's schema is untouched


def test_openai_strict_handles_defs_and_all_of(tools) -> None:
    params = openai_tool(tools["addNode"], strict=True)["function"]["parameters"]
    assert params["$defs"]["Node"]["additionalProperties"] is False
    assert params["properties"]["node"] == {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}
    ext = params["properties"]["ext"]
    assert ext["type"] == ["object", "null"] and ext["additionalProperties"] is False
    assert set(ext["properties"]) == {"id", "name"} and ext["required"] == ["id", "name"]
    assert ext["properties"]["name"] == {"type": ["string", "null"]}


def test_openai_strict_carries_maps_as_pairs_and_tools_without_arguments(tools) -> None:
    rendered = openai_tool(tools["free"], strict=True)["function"]
    assert rendered["strict"] is True
    body = rendered["parameters"]["properties"]["body"]
    assert body["type"] == ["array", "null"] and body["items"]["properties"]["value"] == {"type": "string"}
    assert "strict" not in openai_tool(tools["free"])["function"]
    ping = openai_tool(tools["ping"], strict=True)["function"]
    assert ping["strict"] is True and ping["parameters"] == {
        "type": "object", "properties": {}, "required": [], "additionalProperties": False}


def test_openai_strict_falls_back_with_the_exact_schema() -> None:
    closed = {"type": "object", "properties": {"a": {"allOf": [
        {"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": False},
        {"type": "object", "properties": {"y": {"type": "string"}}}]}}}
    agent_tool = AgentTool(name="t", description="", input_schema=closed)
    rendered = openai_tool(agent_tool, strict=True)["function"]
    assert rendered["strict"] is False and rendered["parameters"] is closed


def test_drop_strict_nulls_only_for_optional_properties(tools) -> None:
    schema = tools["getItem"].input_schema
    assert drop_strict_nulls(schema, {"id": 1, "q": None, "kind": "a"}) == {"id": 1, "kind": "a"}


def test_drop_strict_nulls_at_every_level_the_schema_describes() -> None:
    schema = {
        "type": "object",
        "required": ["item"],
        "properties": {
            "item": {"$ref": "#/$defs/Item"},
            "note": {"type": ["string", "null"]},
            "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}},
        },
        "$defs": {
            "Item": {"allOf": [{"$ref": "#/$defs/Base"},
                               {"type": "object", "properties": {"size": {"type": "integer"}}}]},
            "Base": {"type": "object", "required": ["name"], "properties": {"name": {"type": ["string", "null"]},
                                                                            "color": {"type": "string"}}},
            "Tag": {"type": "object", "properties": {"label": {"type": "string"}, "weight": {"type": "number"}}},
        },
    }
    arguments = {"item": {"name": None, "color": None, "size": None}, "note": None,
                 "tags": [{"label": "a", "weight": None}, {"label": None}], "extra": None}
    assert drop_strict_nulls(schema, arguments) == {
        "item": {"name": None},  # required: the null is the model's answer, not "left out"
        # "note" allows null in the spec, but under strict mode a null can't mean anything but "left out"
        "tags": [{"label": "a"}, {}],
        "extra": None,  # not in the schema: left for validation to report
    }


def test_gemini_uses_the_subset_when_it_fits(tools) -> None:
    rendered = gemini_function(tools["getItem"])
    params = rendered["parameters"]
    assert params["type"] == "OBJECT" and "additionalProperties" not in params
    assert params["properties"]["id"] == {"type": "INTEGER", "format": "int64"}
    assert params["properties"]["q"] == {"type": "STRING", "minLength": 2, "nullable": True}
    genai_types.FunctionDeclaration.model_validate(rendered)


def test_gemini_falls_back_to_json_schema_for_refs_and_exclusive_bounds(tools) -> None:
    rendered = gemini_function(tools["addNode"])
    assert "parameters" not in rendered
    assert rendered["parametersJsonSchema"]["$defs"]["Node"]
    assert "parameters" not in gemini_function(tools["ping"]) and "parametersJsonSchema" not in gemini_function(
        tools["ping"])


def test_optional_spread_body_conditions_in_each_dialect() -> None:
    spec = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {"/a": {"patch": {
        "operationId": "patchA", "responses": {"204": {"description": "ok"}},
        "requestBody": {"content": {"application/json": {"schema": {"type": "object", "required": ["name"],
                                                                    "properties": {"name": {"type": "string"},
                                                                                   "size": {"type": "integer"}}}}}},
    }}}}
    tool = compile_document(spec, api="t", file="t.yaml").get("patchA")
    assert tool.input_schema["dependentRequired"] == {"size": ["name"]}
    strict = openai_tool(tool, strict=True)["function"]
    assert strict["strict"] is True and "dependentRequired" not in strict["parameters"]  # the executor checks it
    gemini = gemini_function(tool)
    assert "parameters" not in gemini and gemini["parametersJsonSchema"]["dependentRequired"] == {"size": ["name"]}
    genai_types.FunctionDeclaration.model_validate(gemini)
    assert mcp_tool(tool)["inputSchema"]["dependentRequired"] == {"size": ["name"]}
    mcp_types.Tool.model_validate(mcp_tool(tool))


def test_mcp_wraps_non_object_outputs(tools) -> None:
    rendered = mcp_tool(tools["getItem"])
    out = rendered["outputSchema"]
    assert out["type"] == "object" and out["properties"]["result"]["type"] == "array"
    assert "Node" in out["$defs"] and "$defs" not in out["properties"]["result"]
    assert mcp_structured_content(tools["getItem"].output_schema, [1]) == {"result": [1]}
    assert rendered["annotations"]["readOnlyHint"] is True
    obj = mcp_tool(tools["addNode"])
    assert obj["outputSchema"]["properties"]["id"] == {"type": "integer"}
    assert mcp_structured_content(tools["addNode"].output_schema, {"id": 1}) == {"id": 1}
    assert "outputSchema" not in mcp_tool(tools["ping"])
    for tool in tools.values():
        mcp_types.Tool.model_validate(mcp_tool(tool))


def test_render_tools_every_format_and_agent_tools(tools) -> None:
    agent_tool = AgentTool(name="ask_sub", description="Delegate.", input_schema={
        "type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]}, delegate="sub")
    items = [*tools.values(), agent_tool]
    assert render_tools(items, "json")[0]["method"] == "GET"
    assert render_tools(items, "json")[-1]["name"] == "ask_sub"
    assert render_tools(items, "anthropic")[-1] == {"name": "ask_sub", "description": "Delegate.",
                                                    "input_schema": agent_tool.input_schema}
    assert render_tools(items, "openai", strict=True)[-1]["function"]["strict"] is True
    assert render_tools(items, "gemini")[-1]["parameters"]["required"] == ["task"]
    assert "annotations" not in render_tools(items, "mcp")[-1]
    with pytest.raises(ValueError, match="unknown format"):
        render_tools(items, "xml")


def test_openai_strict_respects_documented_limits() -> None:
    deep: dict = {"type": "string"}
    for _ in range(11):
        deep = {"type": "object", "properties": {"x": deep}, "required": ["x"]}
    many = {"type": "object", "properties": {"e": {"type": "string", "enum": [f"v{i}" for i in range(1001)]}}}
    for schema in (deep, many):
        agent_tool = AgentTool(name="t", description="", input_schema=schema)
        assert openai_tool(agent_tool, strict=True)["function"]["strict"] is False
    shallow = AgentTool(name="t", description="", input_schema=deep["properties"]["x"])
    assert openai_tool(shallow, strict=True)["function"]["strict"] is True
