"""The XML mapping of request bodies: OpenAPI `xml` objects kept beside the (plain JSON Schema) input schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.openapi import compile_document, compile_specs
from gateway.openapi._xml import XSI, is_xml_media


def _spec(body_schema: Any, media: str = "application/xml", **schemas: Any) -> dict[str, Any]:
    return {
        "openapi": "3.1.0", "info": {"title": "t", "version": "1"},
        "paths": {"/things": {"post": {
            "operationId": "send", "responses": {"200": {"description": "ok"}},
            "requestBody": {"required": True, "content": {media: {"schema": body_schema}}},
        }}},
        "components": {"schemas": schemas},
    }


def _mapping(body_schema: Any, media: str = "application/xml", **schemas: Any) -> dict[str, Any] | None:
    catalog = compile_document(_spec(body_schema, media, **schemas), api="t", file="t.yaml")
    tool = catalog.get("send")
    assert tool is not None and tool.body is not None, [str(d) for d in catalog.diagnostics]
    return tool.body.xml


PERSON = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "format": "int32", "xml": {"attribute": True}},
        "name": {"type": "string", "xml": {"namespace": "http://example.com/schema/sample", "prefix": "sample"}},
    },
}


@pytest.mark.parametrize(("media", "expected"), [
    ("application/xml", True), ("text/xml; charset=utf-8", True), ("application/atom+xml", True),
    ("application/json", False), ("text/plain", False), ("application/xml-dtd", False),
])
def test_xml_media_types(media: str, expected: bool) -> None:
    assert is_xml_media(media) is expected


def test_the_mapping_sits_beside_a_plain_input_schema() -> None:
    catalog = compile_document(_spec({"$ref": "#/components/schemas/Person"}, Person=PERSON), api="t", file="t.yaml")
    tool = catalog.get("send")
    assert tool is not None and tool.body is not None
    assert tool.body.xml == {"root": {"name": "Person", "props": {
        "id": {"attr": True},
        "name": {"ns": "http://example.com/schema/sample", "prefix": "sample"},
    }}}
    assert "xml" not in json.dumps(tool.input_schema)
    json.dumps(tool.body.xml)  # JSON-serialisable, like the rest of the catalog


def test_root_name_is_xml_name_else_the_component_name_else_none() -> None:
    renamed = {**PERSON, "xml": {"name": "human", "namespace": "urn:people"}}
    assert _mapping({"$ref": "#/components/schemas/Person"}, Person=renamed)["root"]["name"] == "human"
    assert _mapping({"$ref": "#/components/schemas/Person"}, Person=renamed)["root"]["ns"] == "urn:people"
    assert _mapping({"$ref": "#/components/schemas/Pet"}, Pet={"type": "object"}) == {"root": {"name": "Pet"}}
    assert _mapping({"type": "object", "properties": {"a": {"type": "string"}}}) is None


def test_json_bodies_get_no_mapping() -> None:
    assert _mapping({"$ref": "#/components/schemas/Person"}, "application/json", Person=PERSON) is None


def test_allof_inline_xml_wins_over_the_referenced_schema() -> None:
    # The S3 shape: `allOf: [{$ref: List}, {xml: {name: Part}}]` renames the (unwrapped) list's elements.
    schemas = {
        "PartList": {"type": "array", "items": {"$ref": "#/components/schemas/Part"}, "xml": {"wrapped": False,
                                                                                              "name": "Ignored"}},
        "Part": {"type": "object", "properties": {"ETag": {"type": "string", "xml": {"name": "ETag2"}}}},
    }
    body = {"type": "object", "properties": {"Parts": {"allOf": [
        {"$ref": "#/components/schemas/PartList"}, {"xml": {"name": "Part"}, "description": "the parts"}]}}}
    parts = _mapping(body, **schemas)["root"]["props"]["Parts"]
    assert parts["name"] == "Part" and parts["wrapped"] is False
    assert parts["items"] == {"props": {"ETag": {"name": "ETag2"}}}


def test_wrapped_arrays_keep_wrapper_and_item_names() -> None:
    body = {"type": "object", "properties": {"animals": {
        "type": "array", "items": {"type": "string", "xml": {"name": "animal"}},
        "xml": {"name": "aliens", "wrapped": True}}}}
    assert _mapping(body)["root"]["props"]["animals"] == {"name": "aliens", "wrapped": True,
                                                          "items": {"name": "animal"}}


def test_recursive_schemas_become_refs_into_defs() -> None:
    node = {"type": "object", "xml": {"name": "node"}, "properties": {
        "label": {"type": "string", "xml": {"attribute": True}},
        "children": {"type": "array", "xml": {"wrapped": True, "name": "kids"},
                     "items": {"$ref": "#/components/schemas/Node"}},
    }}
    mapping = _mapping({"$ref": "#/components/schemas/Node"}, Node=node)
    key = "t.yaml#/components/schemas/Node"
    assert mapping["root"] == {"ref": key}  # the name is the entry's own `xml.name`
    entry = mapping["defs"][key]
    assert entry["name"] == "node" and entry["props"]["label"] == {"attr": True}
    assert entry["props"]["children"] == {"name": "kids", "wrapped": True, "items": {"ref": key}}


def test_a_prefixed_name_is_split_and_xsi_holds_attributes_only() -> None:
    grantee = {"type": "object", "xml": {"namespace": XSI, "attribute": True}, "properties": {
        "Type": {"allOf": [{"type": "string"}, {"xml": {"name": "xsi:type"}}]},
        "ID": {"type": "string", "xml": {"name": "ns:ident", "namespace": "urn:ids"}},
    }}
    root = _mapping({"$ref": "#/components/schemas/Grantee"}, Grantee=grantee)["root"]
    assert root["xmlns"] == {"xsi": XSI} and "ns" not in root and "attr" not in root
    assert root["props"]["Type"] == {"name": "type", "prefix": "xsi", "ns": XSI, "attr": True}
    assert root["props"]["ID"] == {"name": "ident", "prefix": "ns", "ns": "urn:ids"}


def test_invalid_names_are_dropped_with_a_warning() -> None:
    body = {"type": "object", "properties": {
        "a": {"type": "string", "xml": {"name": "x><evil"}},
        "b": {"type": "string", "xml": {"name": "ok", "prefix": "p q"}},
    }}
    catalog = compile_document(_spec(body), api="t", file="t.yaml")
    tool = catalog.get("send")
    assert tool is not None and tool.body is not None
    assert tool.body.xml == {"root": {"props": {"b": {"name": "ok"}}}}
    warnings = [d for d in catalog.diagnostics if "XML mapping" in d.message]
    assert {d.pointer for d in warnings} == {"/paths/~1things/post/requestBody"}
    assert any("x><evil" in d.message for d in warnings) and any("'p q'" in d.message for d in warnings)


def test_deep_inline_nesting_is_cut_with_a_warning() -> None:
    schema: dict[str, Any] = {"type": "string", "xml": {"name": "leaf"}}
    for _ in range(60):
        schema = {"type": "object", "properties": {"n": schema}}
    catalog = compile_document(_spec(schema), api="t", file="t.yaml")
    tool = catalog.get("send")
    assert tool is not None and tool.body is not None and tool.body.xml is None  # the named leaf is too deep
    assert any("too deep or too large" in d.message for d in catalog.diagnostics)
    assert not catalog.errors


def test_swagger_2_xml_body_parameter() -> None:
    spec = {
        "swagger": "2.0", "info": {"title": "t", "version": "1"}, "consumes": ["application/xml"],
        "paths": {"/pets": {"post": {"operationId": "send", "responses": {"200": {"description": "ok"}},
                                     "parameters": [{"in": "body", "name": "pet", "required": True,
                                                     "schema": {"$ref": "#/definitions/Pet"}}]}}},
        "definitions": {"Pet": {"type": "object", "properties": {
            "tags": {"type": "array", "xml": {"wrapped": True}, "items": {"type": "string", "xml": {"name": "tag"}}}}}},
    }
    tool = compile_document(spec, api="t", file="t.yaml").get("send")
    assert tool is not None and tool.body is not None
    assert tool.body.xml == {"root": {"name": "Pet", "props": {"tags": {"wrapped": True, "items": {"name": "tag"}}}}}


def test_the_mapping_survives_the_catalog_cache(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "people.json").write_text(json.dumps(_spec({"$ref": "#/components/schemas/Person"}, Person=PERSON)))
    fresh = compile_specs(specs, cache_dir=tmp_path / "cache")
    lines: list[str] = []
    cached = compile_specs(specs, cache_dir=tmp_path / "cache", progress=lines.append)
    assert any(line.endswith("cached") for line in lines)
    fresh_tool, cached_tool = fresh.get("send"), cached.get("send")
    assert fresh_tool is not None and cached_tool is not None and cached_tool.body is not None
    assert cached_tool.body.xml == fresh_tool.body.xml == {"root": {"name": "Person", "props": {
        "id": {"attr": True}, "name": {"ns": "http://example.com/schema/sample", "prefix": "sample"}}}}


def _count(node: Any, key: str) -> int:
    if not isinstance(node, dict):
        return 0
    own = 1 if node.get(key) else 0
    children = [node.get("items"), *(node.get("props") or {}).values()]
    return own + sum(_count(child, key) for child in children)


def test_corpus_s3_xml_bodies(s3_spec: dict) -> None:
    catalog = compile_document(s3_spec, api="s3", file="s3.json")
    xml_tools = [tool for tool in catalog if tool.body is not None and is_xml_media(tool.body.media_type)]
    assert len(xml_tools) >= 30
    assert not [d for d in catalog.diagnostics if "XML mapping" in d.message]
    complete = catalog.get("CompleteMultipartUpload")
    assert complete is not None and complete.body is not None and complete.body.xml is not None
    parts = complete.body.xml["root"]["props"]["CompleteMultipartUpload"]["props"]["Parts"]
    assert parts["name"] == "Part" and not parts.get("wrapped")
    acl = catalog.get("PutBucketAcl")
    assert acl is not None and acl.body is not None and acl.body.xml is not None
    assert _count(acl.body.xml["root"], "attr") == 1  # xsi:type on the grantee
    for tool in xml_tools:
        json.dumps(tool.body.xml)  # type: ignore[union-attr]
