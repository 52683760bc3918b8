from __future__ import annotations

import json

from jsonschema import Draft202012Validator

from gateway.openapi import compile_document


def _spec(schemas: dict, body: dict | None = None, response: dict | None = None, version: str = "3.0.3") -> dict:
    operation: dict = {"operationId": "op", "responses": {"200": {"description": "ok"}}}
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    if response is not None:
        operation["responses"]["200"]["content"] = {"application/json": {"schema": response}}
    return {"openapi": version, "info": {"title": "t", "version": "1"}, "paths": {"/x": {"post": operation}},
            "components": {"schemas": schemas}}


def _tool(spec: dict):
    catalog = compile_document(spec, api="t", file="t.yaml")
    assert not catalog.errors, catalog.errors
    return catalog.get("op")


def test_nullable_joins_null_to_type_and_enum() -> None:
    tool = _tool(_spec({}, body={"type": "object", "properties": {
        "a": {"type": "string", "nullable": True, "enum": ["x", "y"]},
        "b": {"allOf": [{"type": "integer"}], "nullable": True},
    }}))
    props = tool.input_schema["properties"]
    assert props["a"] == {"type": ["string", "null"], "enum": ["x", "y", None]}
    assert props["b"] == {"anyOf": [{"allOf": [{"type": "integer"}]}, {"type": "null"}]}
    validator = Draft202012Validator(tool.input_schema)
    assert validator.is_valid({"a": None, "b": None})
    assert not validator.is_valid({"a": "z", "b": 1})


def test_boolean_exclusive_bounds_become_numeric() -> None:
    tool = _tool(_spec({}, body={"type": "object", "properties": {
        "n": {"type": "number", "minimum": 1, "exclusiveMinimum": True, "maximum": 5, "exclusiveMaximum": False},
    }}))
    assert tool.input_schema["properties"]["n"] == {"type": "number", "exclusiveMinimum": 1, "maximum": 5}


UUID = "123e4567-e89b-12d3-a456-426614174000"


def test_example_becomes_examples_and_oas_keywords_are_dropped() -> None:
    tool = _tool(_spec({}, body={"type": "object", "properties": {
        "s": {"type": "string", "format": "uuid", "example": UUID, "xml": {"name": "S"},
              "externalDocs": {"url": "https://example.com"}, "x-internal": 1},
    }}))
    assert tool.input_schema["properties"]["s"] == {"type": "string", "format": "uuid", "examples": [UUID]}


def test_read_only_out_of_inputs_and_write_only_out_of_outputs() -> None:
    user = {"type": "object", "required": ["id", "password", "name"], "properties": {
        "id": {"type": "integer", "readOnly": True},
        "password": {"type": "string", "writeOnly": True},
        "name": {"type": "string"},
    }}
    ref = {"$ref": "#/components/schemas/User"}
    tool = _tool(_spec({"User": user}, body={"type": "object", "properties": {"user": ref}}, response=ref))
    in_user = tool.input_schema["$defs"]["User"]
    assert set(in_user["properties"]) == {"password", "name"}
    assert in_user["required"] == ["password", "name"]
    assert set(tool.output_schema["properties"]) == {"id", "name"}
    assert tool.output_schema["required"] == ["id", "name"]


def test_recursive_schema_becomes_defs_and_ref() -> None:
    children = {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}
    node = {"type": "object", "properties": {"value": {"type": "string"}, "children": children}}
    tool = _tool(_spec({"Node": node, "Unused": {"type": "string"}}, body={"$ref": "#/components/schemas/Node"},
                       response={"$ref": "#/components/schemas/Node"}))
    assert tool.input_schema["properties"]["children"] == {"type": "array", "items": {"$ref": "#/$defs/Node"}}
    assert list(tool.input_schema["$defs"]) == ["Node"]
    assert tool.output_schema["$defs"]["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    Draft202012Validator.check_schema(tool.input_schema)
    validator = Draft202012Validator(tool.input_schema)
    assert validator.is_valid({"value": "a", "children": [{"value": "b", "children": [{"value": "c"}]}]})
    assert not validator.is_valid({"children": [{"children": [{"value": 1}]}]})


def test_mutually_recursive_defs_only_those_reached() -> None:
    schemas = {
        "A": {"type": "object", "properties": {"b": {"$ref": "#/components/schemas/B"}}},
        "B": {"type": "object", "properties": {"a": {"$ref": "#/components/schemas/A"}}},
        "C": {"type": "string"},
    }
    tool = _tool(_spec(schemas, response={"$ref": "#/components/schemas/B"}))
    assert sorted(tool.output_schema["$defs"]) == ["A", "B"]


def test_malformed_keywords_are_dropped_with_a_warning() -> None:
    spec = _spec({}, body={"type": "object", "required": True, "properties": {
        "p": {"type": "string", "pattern": "[unclosed", "minLength": -1},
        "q": {"type": "int"},
        "r": False,
    }})
    catalog = compile_document(spec, api="t", file="t.yaml")
    tool = catalog.get("op")
    assert tool.input_schema["properties"]["p"] == {"type": "string"}
    assert tool.input_schema["properties"]["q"] == {}
    assert tool.input_schema["properties"]["r"] is False
    Draft202012Validator.check_schema(tool.input_schema)
    messages = " ".join(d.message for d in catalog.diagnostics)
    assert "pattern" in messages and "minLength" in messages and "unknown type" in messages


def test_openapi_31_type_arrays_and_defs_pass_through() -> None:
    spec = _spec({"Id": {"type": ["string", "null"], "const": "x", "examples": ["x"]}},
                 body={"type": "object", "properties": {"id": {"$ref": "#/components/schemas/Id",
                                                               "description": "the id"}}},
                 version="3.1.0")
    tool = _tool(spec)
    assert tool.input_schema["properties"]["id"] == {"$ref": "#/$defs/Id", "description": "the id"}
    assert tool.input_schema["$defs"]["Id"] == {"type": ["string", "null"], "const": "x", "examples": ["x"]}


def _pets() -> dict:
    kind = {"type": "object", "required": ["kind"], "properties": {"kind": {"type": "string"}, "name": {}}}
    return {"Cat": kind, "Dog": kind, "Bird": kind}


def test_discriminator_pins_the_property_per_branch_from_the_mapping_or_the_schema_name() -> None:
    body = {"oneOf": [{"$ref": "#/components/schemas/Cat"}, {"$ref": "#/components/schemas/Dog"},
                      {"$ref": "#/components/schemas/Bird"}],
            "discriminator": {"propertyName": "kind", "mapping": {
                "cat": "#/components/schemas/Cat", "kitten": "Cat", "dog": "#/components/schemas/Dog"}}}
    tool = _tool(_spec(_pets(), body=body))
    schema = tool.input_schema["properties"]["body"]
    Draft202012Validator.check_schema(tool.input_schema)
    assert "discriminator" not in schema
    pins = [branch["allOf"][1] for branch in schema["oneOf"]]
    assert [branch["allOf"][0] for branch in schema["oneOf"]] == [
        {"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}, {"$ref": "#/$defs/Bird"}]
    assert pins[0] == {"properties": {"kind": {"enum": ["cat", "kitten"]}}, "required": ["kind"]}
    assert pins[1]["properties"]["kind"] == {"const": "dog"}
    assert pins[2]["properties"]["kind"] == {"const": "Bird"}  # no mapping entry: the implicit schema name
    validator = Draft202012Validator(tool.input_schema)
    for good in ({"kind": "cat"}, {"kind": "kitten"}, {"kind": "dog"}, {"kind": "Bird"}):
        assert validator.is_valid({"body": good}), good
    for bad in ({"kind": "a"}, {"kind": "Cat"}, {"name": "x"}):
        assert not validator.is_valid({"body": bad}), bad


def test_discriminator_in_output_schemas_keeps_the_plain_union() -> None:
    union = {"anyOf": [{"$ref": "#/components/schemas/Cat"}, {"$ref": "#/components/schemas/Dog"}],
             "discriminator": {"propertyName": "kind"}}
    tool = _tool(_spec(_pets(), response=union))
    assert tool.output_schema["anyOf"] == [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]


def test_binary_and_byte_strings_are_base64_encoded_content() -> None:
    tool = _tool(_spec({}, body={"type": "object", "properties": {
        "file": {"type": "string", "format": "binary"}, "blob": {"type": "string", "format": "byte"},
        "either": {"type": "string", "format": "byte", "nullable": True},
        "raw": {"type": "string", "format": "binary", "contentEncoding": "base32"}, "id": {"format": "binary"},
    }}))
    props = tool.input_schema["properties"]
    assert props["file"] == {"type": "string", "format": "binary", "contentEncoding": "base64"}
    assert props["blob"] == {"type": "string", "format": "byte", "contentEncoding": "base64"}
    assert props["either"]["contentEncoding"] == "base64"
    assert props["raw"]["contentEncoding"] == "base32"  # the spec's own encoding wins
    assert "contentEncoding" not in props["id"]  # not a string


def test_shared_refs_never_explode_inline() -> None:
    # Each level points twice at the next: inlining would give 2**20 copies of the leaf.
    schemas = {f"L{i}": {"type": "object", "properties": {"a": {"$ref": f"#/components/schemas/L{i + 1}"},
                                                           "b": {"$ref": f"#/components/schemas/L{i + 1}"}}}
               for i in range(20)}
    schemas["L20"] = {"type": "string"}
    tool = _tool(_spec(schemas, response={"$ref": "#/components/schemas/L0"}))
    assert len(tool.output_schema["$defs"]) == 20
    assert len(json.dumps(tool.output_schema)) < 5000
