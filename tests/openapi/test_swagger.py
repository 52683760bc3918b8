from __future__ import annotations

from jsonschema import Draft202012Validator

from gateway.openapi import compile_document

SWAGGER = {
    "swagger": "2.0",
    "info": {"title": "pets", "version": "1"},
    "host": "api.example.com", "basePath": "/v1", "schemes": ["https", "http"],
    "consumes": ["application/json"], "produces": ["application/json"],
    "securityDefinitions": {"key": {"type": "apiKey", "in": "header", "name": "X-Key"},
                            "oauth": {"type": "oauth2", "flow": "application", "tokenUrl": "https://t",
                                      "scopes": {"pets:write": "w"}}},
    "parameters": {"Limit": {"name": "limit", "in": "query", "type": "integer", "minimum": 1}},
    "responses": {"Pet": {"description": "a pet", "schema": {"$ref": "#/definitions/Pet"}}},
    "definitions": {
        "Pet": {"type": "object", "required": ["name"], "properties": {
            "id": {"type": "integer", "readOnly": True},
            "name": {"type": "string", "x-nullable": True},
            "parent": {"$ref": "#/definitions/Pet"}}},
    },
    "paths": {
        "/pets": {
            "get": {"operationId": "listPets", "parameters": [
                {"$ref": "#/parameters/Limit"},
                {"name": "tags", "in": "query", "type": "array", "items": {"type": "string"},
                 "collectionFormat": "multi"},
                {"name": "ids", "in": "query", "type": "array", "items": {"type": "integer"},
                 "collectionFormat": "pipes"},
                {"name": "X-Key", "in": "header", "type": "string"}],
                "responses": {"200": {"description": "ok", "schema": {"type": "array",
                                                                      "items": {"$ref": "#/definitions/Pet"}}}}},
            "post": {"operationId": "addPet", "security": [{"oauth": ["pets:write"]}],
                     "parameters": [{"name": "pet", "in": "body", "required": True,
                                     "schema": {"$ref": "#/definitions/Pet"}}],
                     "responses": {"201": {"$ref": "#/responses/Pet"}}},
        },
        "/pets/{id}/photo": {"post": {
            "operationId": "upload", "consumes": ["multipart/form-data"],
            "parameters": [{"name": "id", "in": "path", "required": True, "type": "integer"},
                           {"name": "file", "in": "formData", "type": "file", "required": True},
                           {"name": "note", "in": "formData", "type": "string"}],
            "responses": {"200": {"description": "ok"}}}},
    },
}


def test_swagger_2_operations_become_tools() -> None:
    catalog = compile_document(SWAGGER, api="pets", file="pets.json")
    assert not catalog.errors
    assert [t.name for t in catalog] == ["listPets", "addPet", "upload"]
    assert [s.url for s in catalog.apis["pets"].servers] == ["https://api.example.com/v1",
                                                              "http://api.example.com/v1"]
    for tool in catalog:
        Draft202012Validator.check_schema(tool.input_schema)


def test_swagger_parameters_collection_formats_and_credentials() -> None:
    tool = compile_document(SWAGGER, api="pets").get("listPets")
    args = {a.name: a for a in tool.arguments}
    assert set(args) == {"limit", "tags", "ids"}  # X-Key is the apiKey credential
    assert (args["tags"].style, args["tags"].explode) == ("form", True)
    assert (args["ids"].style, args["ids"].explode) == ("pipeDelimited", False)
    assert tool.input_schema["properties"]["limit"] == {"type": "integer", "minimum": 1}
    assert tool.output_schema["items"] == {"$ref": "#/$defs/Pet"}


def test_swagger_body_and_definitions() -> None:
    tool = compile_document(SWAGGER, api="pets").get("addPet")
    assert tool.body.media_type == "application/json" and tool.body.argument is None
    assert set(tool.input_schema["properties"]) == {"name", "parent"}
    assert tool.input_schema["properties"]["name"] == {"type": ["string", "null"]}
    assert "id" not in tool.input_schema["$defs"]["Pet"]["properties"]
    assert tool.output_schema["properties"]["id"] == {"type": "integer", "readOnly": True}
    assert tool.security == ({"oauth": ("pets:write",)},)
    assert "pets:write" in tool.description


def test_swagger_form_data_with_file_is_multipart() -> None:
    tool = compile_document(SWAGGER, api="pets").get("upload")
    assert tool.body.media_type == "multipart/form-data" and tool.body.required
    assert tool.input_schema["properties"]["file"] == {
        "type": "string", "format": "binary", "contentEncoding": "base64"}
    assert tool.input_schema["required"] == ["id", "file"]
