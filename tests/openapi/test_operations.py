from __future__ import annotations

import json

from jsonschema import Draft202012Validator

from gateway.execution.executor import validate_arguments
from gateway.http.body import build_body
from gateway.openapi import compile_document


def _compile(paths: dict, **extra):
    spec = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": paths, **extra}
    return compile_document(spec, api="t", file="t.yaml")


def _op(**fields) -> dict:
    return {"responses": {"200": {"description": "ok"}}, **fields}


def test_every_parameter_location_is_bound_with_default_styles() -> None:
    catalog = _compile({"/items/{id}": {"get": _op(operationId="get", parameters=[
        {"name": "id", "in": "path", "schema": {"type": "integer"}},
        {"name": "tags", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
        {"name": "filter", "in": "query", "style": "deepObject", "explode": True, "schema": {"type": "object"}},
        {"name": "X-Trace", "in": "header", "required": True, "schema": {"type": "string"}},
        {"name": "session", "in": "cookie", "schema": {"type": "string"}},
        {"name": "q", "in": "query", "content": {"application/json": {"schema": {"type": "object"}}}},
    ])}})
    tool = catalog.get("get")
    by_name = {a.name: a for a in tool.arguments}
    assert (by_name["id"].location, by_name["id"].style, by_name["id"].explode, by_name["id"].required) == (
        "path", "simple", False, True)
    assert (by_name["tags"].location, by_name["tags"].style, by_name["tags"].explode) == ("query", "form", True)
    assert (by_name["filter"].style, by_name["filter"].explode) == ("deepObject", True)
    assert (by_name["X-Trace"].location, by_name["X-Trace"].style, by_name["X-Trace"].required) == (
        "header", "simple", True)
    assert (by_name["session"].location, by_name["session"].style) == ("cookie", "form")
    assert by_name["q"].content_type == "application/json"
    assert tool.input_schema["required"] == ["id", "X-Trace"]
    assert set(tool.input_schema["properties"]) == set(by_name)
    assert tool.body is None


def test_path_level_parameters_merge_and_operation_wins() -> None:
    catalog = _compile({"/a/{id}": {
        "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                       {"name": "limit", "in": "query", "schema": {"type": "integer"}}],
        "get": _op(operationId="get", parameters=[{"name": "limit", "in": "query", "schema": {"type": "string"}}]),
    }})
    tool = catalog.get("get")
    assert [a.name for a in tool.arguments] == ["id", "limit"]
    assert tool.input_schema["properties"]["limit"] == {"type": "string"}


def test_same_name_in_two_locations_is_renamed_deterministically() -> None:
    catalog = _compile({"/a/{id}": {"get": _op(operationId="get", parameters=[
        {"name": "id", "in": "query", "schema": {"type": "string"}},
        {"name": "id", "in": "header", "schema": {"type": "string"}},
        {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}},
    ])}})
    tool = catalog.get("get")
    names = {a.name: (a.location, a.wire_name) for a in tool.arguments}
    assert names == {"id": ("path", "id"), "query_id": ("query", "id"), "header_id": ("header", "id")}


def test_object_body_is_spread_unless_a_name_collides() -> None:
    body = {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "required": ["title"],
        "properties": {"title": {"type": "string"}, "labels": {"type": "array", "items": {"type": "string"}}}}}}}
    catalog = _compile({
        "/spread/{owner}": {"post": _op(operationId="spread", requestBody=body, parameters=[
            {"name": "owner", "in": "path", "required": True, "schema": {"type": "string"}}])},
        "/clash/{title}": {"post": _op(operationId="clash", requestBody=body, parameters=[
            {"name": "title", "in": "path", "required": True, "schema": {"type": "string"}}])},
    })
    spread = catalog.get("spread")
    assert spread.body.argument is None and spread.body.media_type == "application/json"
    assert [(a.name, a.location, a.required) for a in spread.arguments] == [
        ("owner", "path", True), ("title", "body", True), ("labels", "body", False)]
    assert spread.input_schema["required"] == ["owner", "title"]
    clash = catalog.get("clash")
    assert clash.body.argument == "body"
    assert [(a.name, a.location) for a in clash.arguments] == [("title", "path"), ("body", "body")]
    assert clash.input_schema["properties"]["body"]["required"] == ["title"]
    assert clash.input_schema["required"] == ["title", "body"]


def test_non_object_and_optional_bodies() -> None:
    catalog = _compile({
        "/arr": {"post": _op(operationId="arr", requestBody={"content": {"application/json": {
            "schema": {"type": "array", "items": {"type": "integer"}}}}})},
        "/bin": {"put": _op(operationId="bin", requestBody={"required": True, "content": {
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}})},
        "/opt": {"patch": _op(operationId="opt", requestBody={"content": {"application/json": {"schema": {
            "type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}}}})},
        "/named": {"post": _op(operationId="named", parameters=[{"name": "body", "in": "query", "schema": {}}],
                               requestBody={"content": {"text/plain": {"schema": {"type": "string"}}}})},
    })
    assert catalog.get("arr").body.argument == "body"
    assert catalog.get("arr").input_schema["properties"]["body"]["type"] == "array"
    binary = catalog.get("bin")
    assert (binary.body.media_type, binary.body.required, binary.input_schema["required"]) == (
        "application/octet-stream", True, ["body"])
    optional = catalog.get("opt")
    assert optional.body.argument is None and "required" not in optional.input_schema
    assert catalog.get("named").body.argument == "request_body"


def test_optional_spread_body_requires_its_required_properties_once_sent() -> None:
    catalog = _compile({"/opt": {"patch": _op(operationId="opt", parameters=[
        {"name": "q", "in": "query", "schema": {"type": "string"}}],
        requestBody={"content": {"application/json": {"schema": {
            "type": "object", "required": ["a", "b", "ghost"],
            "properties": {"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "string"}}}}}})}})
    schema = catalog.get("opt").input_schema
    Draft202012Validator.check_schema(schema)
    assert "required" not in schema
    assert schema["dependentRequired"] == {"a": ["b"], "b": ["a"], "c": ["a", "b"]}
    validator = Draft202012Validator(schema)
    assert validator.is_valid({}) and validator.is_valid({"q": "x"})
    assert validator.is_valid({"a": "x", "b": 1}) and validator.is_valid({"a": "x", "b": 1, "c": "y"})
    assert not validator.is_valid({"c": "y"}) and not validator.is_valid({"a": "x"})
    # The executor's side of the contract: no body unless a body property is given, and then a complete one.
    tool = catalog.get("opt")
    assert build_body(tool, {"q": "x"}) is None
    assert validate_arguments(tool, {"c": "y"})
    assert json.loads(build_body(tool, {"a": "x", "b": 1}).content) == {"a": "x", "b": 1}


def test_required_spread_body_needs_no_conditions() -> None:
    catalog = _compile({"/req": {"post": _op(operationId="req", requestBody={"required": True, "content": {
        "application/json": {"schema": {"type": "object", "required": ["a"],
                                        "properties": {"a": {"type": "string"}, "b": {}}}}}})}})
    schema = catalog.get("req").input_schema
    assert schema["required"] == ["a"] and "dependentRequired" not in schema


def test_form_and_multipart_bodies_keep_encoding() -> None:
    catalog = _compile({"/up": {"post": _op(operationId="up", requestBody={"content": {"multipart/form-data": {
        "schema": {"type": "object", "properties": {"file": {"type": "string", "format": "binary"},
                                                    "meta": {"type": "object", "properties": {"a": {}}}}},
        "encoding": {"meta": {"contentType": "application/json"}}}}})}})
    tool = catalog.get("up")
    assert tool.body.media_type == "multipart/form-data"
    assert tool.body.encoding["meta"].content_type == "application/json"
    assert [a.name for a in tool.arguments] == ["file", "meta"]
    # The file property says base64, and the executor sends the decoded bytes as the file part.
    assert tool.input_schema["properties"]["file"]["contentEncoding"] == "base64"
    sent = build_body(tool, {"file": "AAEC/w==", "meta": {"a": 1}}).content
    assert b'filename="file"' in sent and b"\r\n\r\n\x00\x01\x02\xff\r\n" in sent


def test_owned_headers_and_api_key_credentials_are_left_out() -> None:
    components = {"securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                                      "q": {"type": "apiKey", "in": "query", "name": "api_key"}}}
    catalog = _compile({"/a": {"get": _op(operationId="get", parameters=[
        {"name": name, "in": "header", "schema": {"type": "string"}}
        for name in ("Host", "Content-Length", "Transfer-Encoding", "Connection", "Authorization", "x-api-key",
                     "X-Keep")
    ] + [{"name": "api_key", "in": "query", "schema": {"type": "string"}},
         {"name": "api_key", "in": "cookie", "schema": {"type": "string"}}])}}, components=components)
    assert [(a.name, a.location) for a in catalog.get("get").arguments] == [("X-Keep", "header"),
                                                                            ("api_key", "cookie")]


def test_output_schema_is_first_2xx_json_response() -> None:
    catalog = _compile({"/a": {"get": {"operationId": "get", "responses": {
        "404": {"description": "no", "content": {"application/json": {"schema": {"type": "string"}}}},
        "202": {"description": "accepted", "content": {"text/plain": {"schema": {"type": "string"}}}},
        "200": {"description": "ok", "content": {"application/vnd.x+json": {"schema": {
            "type": "object", "properties": {"n": {"type": "integer"}}}}}},
    }}}})
    tool = catalog.get("get")
    assert tool.output_schema == {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert tool.response_media_types == ("text/plain", "application/vnd.x+json")


def test_undeclared_path_parameter_is_added_with_a_warning() -> None:
    catalog = _compile({"/a/{id}": {"get": _op(operationId="get")}})
    assert catalog.get("get").input_schema["properties"]["id"] == {"type": "string"}
    assert any("not declared" in d.message for d in catalog.diagnostics)


def test_description_trim_keeps_deprecated_and_scopes() -> None:
    spec = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
            "security": [{"oauth": ["read:items"]}],
            "paths": {"/a": {"get": _op(operationId="get", summary="List items", description="x" * 5000,
                                        deprecated=True, security=[{"oauth": ["write:items", "read:items"]}])}}}
    tool = compile_document(spec, api="t", file="t.yaml", max_description=200).get("get")
    assert len(tool.description) <= 200
    assert tool.description.startswith("List items\n\nxxx")
    assert tool.description.endswith("Deprecated. Required scopes: read:items, write:items.")
    assert tool.deprecated and tool.security == ({"oauth": ("write:items", "read:items")},)


def test_servers_most_specific_wins() -> None:
    catalog = _compile({"/a": {"servers": [{"url": "https://path.example"}],
                               "get": _op(operationId="get"),
                               "put": _op(operationId="put", servers=[{"url": "https://{region}.op.example",
                                                                      "variables": {"region": {"default": "eu"}}}])}},
                       servers=[{"url": "https://spec.example"}])
    assert catalog.get("get").servers[0].url == "https://path.example"
    assert catalog.get("put").servers[0].resolved() == "https://eu.op.example"
    assert catalog.apis["t"].servers[0].url == "https://spec.example"


def test_broken_operation_is_skipped_with_pointer_and_others_compile() -> None:
    catalog = _compile({"/a/{x}": {
        "get": _op(operationId="bad", parameters=[{"$ref": "#/components/parameters/Missing"}]),
        "put": _op(operationId="good"),
    }})
    assert [t.name for t in catalog] == ["good"]
    [error] = catalog.errors
    assert error.pointer == "/paths/~1a~1{x}/get" and "Missing" in error.message and error.file == "t.yaml"


def test_too_deep_reference_chain_skips_only_that_operation() -> None:
    schemas = {f"S{i}": {"type": "object", "properties": {"n": {"$ref": f"#/components/schemas/S{i + 1}"}}}
               for i in range(3000)}
    schemas["S3000"] = {"type": "string"}
    catalog = _compile({
        "/deep": {"get": {"operationId": "deep", "responses": {"200": {"description": "ok", "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/S0"}}}}}}},
        "/tail": {"get": {"operationId": "tail", "responses": {"200": {"description": "ok", "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/S2990"}}}}}}},
    }, components={"schemas": schemas})
    tail = catalog.get("tail")
    assert tail is not None and sorted(tail.output_schema["$defs"]) == [f"S{i}" for i in range(2991, 3001)]
    assert catalog.get("deep") is None
    assert [d.pointer for d in catalog.errors] == ["/paths/~1deep/get"] and "too deep" in catalog.errors[0].message
