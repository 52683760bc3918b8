"""XML request bodies on the wire: the OpenAPI specification's own `xml` object examples, compiled from a spec
document and sent by a real executor to a recording server on 127.0.0.1, plus namespaces, recursion and
injection attempts against `xml_bytes` directly."""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree

import pytest
from corpus_judge import arguments_for
from executor_helpers import executor_for
from recording_server import RecordingServer

from gateway.catalog import Tool
from gateway.config.credentials import ApiKeyAuth
from gateway.errors import ArgumentError
from gateway.http.xml_body import xml_bytes
from gateway.openapi import compile_document
from gateway.openapi._xml import is_xml_media

pytestmark = pytest.mark.anyio

SAMPLE = "http://example.com/schema/sample"

# name -> (the property's schema as in the spec's example, the JSON value sent, the XML the example shows)
# Each property sits in a component `Zoo`, so the root element is <Zoo> (the component's name).
EXAMPLES: dict[str, tuple[dict[str, Any], Any, str]] = {
    "no_xml_string": ({"type": "string"}, "...", "<animals>...</animals>"),
    "no_xml_array": ({"type": "array", "items": {"type": "string"}}, ["...", "...", "..."],
                     "<animals>...</animals><animals>...</animals><animals>...</animals>"),
    "name_replacement": ({"type": "string", "xml": {"name": "animal"}}, "...", "<animal>...</animal>"),
    "array_item_names": ({"type": "array", "items": {"type": "string", "xml": {"name": "animal"}}},
                         ["value", "value"], "<animal>value</animal><animal>value</animal>"),
    "external_name_no_effect": (
        {"type": "array", "items": {"type": "string", "xml": {"name": "animal"}}, "xml": {"name": "aliens"}},
        ["value", "value"], "<animal>value</animal><animal>value</animal>"),
    "wrapped_same_name": ({"type": "array", "items": {"type": "string"}, "xml": {"wrapped": True}},
                          ["value", "value"], "<animals><animals>value</animals><animals>value</animals></animals>"),
    "wrapped_item_name": (
        {"type": "array", "items": {"type": "string", "xml": {"name": "animal"}}, "xml": {"wrapped": True}},
        ["value", "value"], "<animals><animal>value</animal><animal>value</animal></animals>"),
    "wrapped_both_names": (
        {"type": "array", "items": {"type": "string", "xml": {"name": "animal"}},
         "xml": {"name": "aliens", "wrapped": True}},
        ["value", "value"], "<aliens><animal>value</animal><animal>value</animal></aliens>"),
    "wrapped_external_name": (
        {"type": "array", "items": {"type": "string"}, "xml": {"name": "aliens", "wrapped": True}},
        ["value", "value"], "<aliens><aliens>value</aliens><aliens>value</aliens></aliens>"),
}


def _spec(components: dict[str, Any], media: str = "application/xml") -> dict[str, Any]:
    paths = {
        f"/{name}": {"post": {
            "operationId": name, "responses": {"200": {"description": "ok"}},
            "requestBody": {"required": True, "content": {media: {"schema": {"$ref": f"#/components/schemas/{name}"}}}},
        }} for name in components
    }
    return {"openapi": "3.1.0", "info": {"title": "xml", "version": "1"}, "paths": paths,
            "components": {"schemas": components}}


def _canonical(xml: bytes | str) -> str:
    text = xml.decode("utf-8") if isinstance(xml, bytes) else xml
    return ElementTree.canonicalize(text, strip_text=True)


async def _send(server: RecordingServer, spec: dict[str, Any], operation: str, arguments: dict[str, Any]) -> Any:
    catalog = compile_document(spec, api="demo", file="xml.yaml")
    tool = catalog.get(operation)
    assert tool is not None, [str(d) for d in catalog.diagnostics]
    executor = executor_for(server.url, tool)
    try:
        return await executor.execute(tool, arguments)
    finally:
        await executor.aclose()


@pytest.mark.parametrize("example", sorted(EXAMPLES))
async def test_the_specification_xml_examples(upstream: RecordingServer, example: str) -> None:
    schema, value, expected = EXAMPLES[example]
    zoo = {"type": "object", "properties": {"animals": schema}}
    result = await _send(upstream, _spec({"Zoo": zoo}), "Zoo", {"animals": value})
    assert result.ok, result.error
    assert upstream.last.header("Content-Type") == "application/xml"
    assert upstream.last.body.startswith(b'<?xml version="1.0" encoding="UTF-8"?>')
    assert _canonical(upstream.last.body) == _canonical(f"<Zoo>{expected}</Zoo>")


async def test_the_specification_attribute_prefix_and_namespace_example(upstream: RecordingServer) -> None:
    person = {"type": "object", "properties": {
        "id": {"type": "integer", "format": "int32", "xml": {"attribute": True}},
        "name": {"type": "string", "xml": {"namespace": SAMPLE, "prefix": "sample"}},
    }}
    result = await _send(upstream, _spec({"Person": person}), "Person", {"id": 123, "name": "example"})
    assert result.ok, result.error
    expected = f'<Person id="123"><sample:name xmlns:sample="{SAMPLE}">example</sample:name></Person>'
    assert _canonical(upstream.last.body) == _canonical(expected)
    root = ElementTree.fromstring(upstream.last.body)
    assert root.tag == "Person" and root.attrib == {"id": "123"}
    assert [child.tag for child in root] == [f"{{{SAMPLE}}}name"]


async def test_a_root_namespace_is_the_default_for_its_children(upstream: RecordingServer) -> None:
    order = {"type": "object", "xml": {"name": "order", "namespace": "urn:shop"}, "properties": {
        "lines": {"type": "array", "xml": {"wrapped": True}, "items": {"$ref": "#/components/schemas/Line"}},
    }}
    line = {"type": "object", "xml": {"name": "line"}, "properties": {
        "sku": {"type": "string", "xml": {"attribute": True}}, "qty": {"type": "integer"}}}
    spec = _spec({"Order": order, "Line": line}, media="application/vnd.shop+xml")
    result = await _send(upstream, spec, "Order", {"lines": [{"sku": "a-1", "qty": 2}, {"sku": "b&2", "qty": 1}]})
    assert result.ok, result.error
    assert upstream.last.header("Content-Type") == "application/vnd.shop+xml"
    expected = ('<order xmlns="urn:shop"><lines><line sku="a-1"><qty>2</qty></line>'
                '<line sku="b&amp;2"><qty>1</qty></line></lines></order>')
    assert _canonical(upstream.last.body) == _canonical(expected)
    assert upstream.last.body.count(b"xmlns=") == 1


async def test_the_s3_shape_single_key_root_with_renamed_unwrapped_parts(upstream: RecordingServer) -> None:
    # As in the corpus's S3 spec: an inline body whose one property names the root element.
    spec = _spec({"Complete": {"type": "object", "properties": {"CompleteMultipartUpload": {
        "type": "object", "properties": {"Parts": {"allOf": [
            {"type": "array", "items": {"type": "object", "properties": {"ETag": {"type": "string"},
                                                                         "PartNumber": {"type": "integer"}}},
             "xml": {"wrapped": False}},
            {"xml": {"name": "Part"}}]}}}}}})
    spec["paths"]["/Complete"]["post"]["requestBody"]["content"]["application/xml"]["schema"] = (
        spec["components"]["schemas"].pop("Complete"))
    parts = [{"ETag": '"e1"', "PartNumber": 1}, {"ETag": '"e2"', "PartNumber": 2}]
    result = await _send(upstream, spec, "Complete", {"CompleteMultipartUpload": {"Parts": parts}})
    assert result.ok, result.error
    expected = ('<CompleteMultipartUpload><Part><ETag>"e1"</ETag><PartNumber>1</PartNumber></Part>'
                '<Part><ETag>"e2"</ETag><PartNumber>2</PartNumber></Part></CompleteMultipartUpload>')
    assert _canonical(upstream.last.body) == _canonical(expected)


async def test_a_bad_property_name_is_refused_before_anything_is_sent(upstream: RecordingServer) -> None:
    free = {"type": "object", "additionalProperties": True, "properties": {"x": {"type": "string",
                                                                                 "xml": {"name": "y"}}}}
    spec = _spec({"Free": free})
    result = await _send(upstream, spec, "Free", {"body": {"x": "1", "a><b": "2"}})
    assert not result.ok and result.error_type == "invalid_arguments" and "XML" in (result.error or "")
    assert upstream.requests == []


# -- xml_bytes with hand-built mappings ----------------------------------------------------------------


def test_without_a_mapping_the_old_shape_is_kept() -> None:
    value = {"Done": {"Part": [{"N": 1}, {"N": 2}], "Note": "a<b", "Skip": None}}
    assert xml_bytes(value).endswith(b"<Done><Part><N>1</N></Part><Part><N>2</N></Part><Note>a&lt;b</Note></Done>")
    assert xml_bytes({"a": 1, "b": [True, None]}).endswith(b"<root><a>1</a><b>true</b><b /></root>")
    assert xml_bytes([1, 2]).endswith(b"<root><item>1</item><item>2</item></root>")


def test_recursive_refs_are_followed_for_as_deep_as_the_value_goes() -> None:
    key = "t.yaml#/components/schemas/Node"
    node = {"name": "node", "props": {"label": {"attr": True},
                                      "children": {"name": "kids", "wrapped": True, "items": {"ref": key}}}}
    mapping = {"root": {"ref": key}, "defs": {key: node}}
    value = {"label": "a", "children": [{"label": "b", "children": [{"label": "c"}]}]}
    expected = '<node label="a"><kids><node label="b"><kids><node label="c"></node></kids></node></kids></node>'
    assert _canonical(xml_bytes(value, mapping)) == _canonical(expected)


def test_namespaced_attributes_get_a_prefix_and_declarations_are_not_repeated() -> None:
    mapping = {"root": {"name": "doc", "ns": "urn:a", "prefix": "a", "props": {
        "lang": {"attr": True, "ns": "urn:meta"},
        "kind": {"attr": True, "ns": "urn:a", "prefix": "a"},
        "title": {"ns": "urn:a", "prefix": "a"},
        "note": {"prefix": "undeclared"},
        "meta": {"ns": "urn:meta", "prefix": "m", "props": {"x": {"ns": "urn:meta", "prefix": "m"}}},
    }}}
    body = xml_bytes({"lang": "en", "kind": "k", "title": "T", "note": "n", "meta": {"x": 1}}, mapping)
    expected = ('<a:doc xmlns:a="urn:a" xmlns:ns1="urn:meta" ns1:lang="en" a:kind="k"><a:title>T</a:title>'
                '<note>n</note><m:meta xmlns:m="urn:meta"><m:x>1</m:x></m:meta></a:doc>')
    assert _canonical(body) == _canonical(expected)
    assert body.count(b'xmlns:a="urn:a"') == 1 and body.count(b'xmlns:m="urn:meta"') == 1


def test_xsi_type_goes_out_as_a_declared_attribute() -> None:
    xsi = "http://www.w3.org/2001/XMLSchema-instance"
    mapping = {"root": {"props": {"Grantee": {"xmlns": {"xsi": xsi}, "props": {
        "Type": {"name": "type", "prefix": "xsi", "ns": xsi, "attr": True}}}}}}
    body = xml_bytes({"Grantee": {"Type": "CanonicalUser", "ID": "abc"}}, mapping)
    expected = f'<Grantee xmlns:xsi="{xsi}" xsi:type="CanonicalUser"><ID>abc</ID></Grantee>'
    assert _canonical(body) == _canonical(expected)


@pytest.mark.parametrize("mapping", [
    {"root": {"name": "a b"}},
    {"root": {"name": "ok", "props": {"x": {"name": "y\"><z"}}}},
    {"root": {"name": "ok", "props": {"x": {"ns": "urn:x", "prefix": "p:q"}}}},
    {"root": {"name": "ok", "xmlns": {"bad prefix": "urn:x"}}},
])
def test_names_from_a_mapping_are_checked_too(mapping: dict[str, Any]) -> None:
    with pytest.raises(ArgumentError, match="XML"):
        xml_bytes({"x": "1"}, mapping)


def test_text_and_attribute_values_are_escaped() -> None:
    mapping = {"root": {"name": "r", "props": {"a": {"attr": True}}}}
    body = xml_bytes({"a": '"/><evil x="', "t": "</r><evil/>"}, mapping)
    root = ElementTree.fromstring(body)
    assert root.attrib == {"a": '"/><evil x="'} and [(c.tag, c.text) for c in root] == [("t", "</r><evil/>")]


# -- the corpus: S3's XML bodies -----------------------------------------------------------------------

XSI = "http://www.w3.org/2001/XMLSchema-instance"


async def test_corpus_s3_xml_bodies_go_out_as_the_spec_describes(s3_spec: dict, upstream: RecordingServer) -> None:
    catalog = compile_document(s3_spec, api="demo", file="s3.json")
    tools = [t for t in catalog if t.body is not None and is_xml_media(t.body.media_type)]
    assert len(tools) >= 30
    auth = [ApiKeyAuth(location="header", name="Authorization", value="signature")]
    executor = executor_for(upstream.url, *tools, auth=auth)

    async def send(tool: Tool, arguments: dict[str, Any]) -> ElementTree.Element:
        result = await executor.execute(tool, arguments)
        assert result.ok, (tool.name, result.error)
        assert "xml" in (upstream.last.header("Content-Type") or "")
        return ElementTree.fromstring(upstream.last.body)

    try:
        sent = 0
        for tool in tools:
            arguments = arguments_for(tool)
            if arguments is None or not any(a.location == "body" and a.name in arguments for a in tool.arguments):
                continue
            await send(tool, arguments)  # well-formed, whatever the minimal arguments were
            sent += 1
        assert sent >= 10
        complete = catalog.get("CompleteMultipartUpload")
        assert complete is not None
        root = await send(complete, {"Bucket": "b", "Key": "k", "uploadId": "u", "CompleteMultipartUpload": {
            "Parts": [{"ETag": "e1", "PartNumber": 1}, {"ETag": "e2", "PartNumber": 2}]}})
        assert root.tag == "CompleteMultipartUpload" and [p.tag for p in root] == ["Part", "Part"]
        assert [(c.tag, c.text) for c in root[1]] == [("ETag", "e2"), ("PartNumber", "2")]
        acl = catalog.get("PutBucketAcl")
        assert acl is not None
        grant = {"Grantee": {"Type": "CanonicalUser", "ID": "abc"}, "Permission": "READ"}
        root = await send(acl, {"Bucket": "b", "acl": True, "AccessControlPolicy": {"Grants": [grant]}})
        grantee = root.find("Grant/Grantee")
        assert grantee is not None and grantee.attrib == {f"{{{XSI}}}type": "CanonicalUser"}
        assert b'xmlns:xsi="' + XSI.encode() + b'"' in upstream.last.body
    finally:
        await executor.aclose()
