from __future__ import annotations

import json
from urllib.parse import parse_qsl

import pytest
from executor_helpers import arg, make_tool

from gateway.catalog import BodyBinding, Encoding
from gateway.errors import ArgumentError
from gateway.http.body import build_body, is_binary_type, is_json_type


@pytest.mark.parametrize("media_type", ["application/json", "application/vnd.github+json", "text/json",
                                        "application/x-amz-json-1.1", "application/merge-patch+json; charset=utf-8"])
def test_json_types(media_type: str) -> None:
    assert is_json_type(media_type)


@pytest.mark.parametrize("media_type", ["application/x-ndjson", "text/plain", "application/xml", "image/png"])
def test_not_json_types(media_type: str) -> None:
    assert not is_json_type(media_type)


def test_binary_types() -> None:
    assert is_binary_type("application/octet-stream") and is_binary_type("image/png")
    assert not is_binary_type("text/csv")


def test_form_property_with_a_json_content_type() -> None:
    binding = BodyBinding(media_type="application/x-www-form-urlencoded",
                          encoding={"meta": Encoding(content_type="application/json")})
    tool = make_tool(arg("meta", "body", {"type": "object"}), arg("flag", "body", {"type": "boolean"}),
                     method="POST", body=binding)
    body = build_body(tool, {"meta": {"a": [1]}, "flag": False})
    assert body is not None
    pairs = dict(parse_qsl(body.content.decode()))
    assert json.loads(pairs["meta"]) == {"a": [1]} and pairs["flag"] == "false"


def test_optional_spread_body_absent_sends_nothing_and_required_sends_empty_object() -> None:
    optional = make_tool(arg("name", "body"), method="POST", body=BodyBinding(media_type="application/json"))
    assert build_body(optional, {}) is None
    required = make_tool(arg("name", "body"), method="POST",
                         body=BodyBinding(media_type="application/json", required=True))
    assert build_body(required, {}).content == b"{}"  # type: ignore[union-attr]


def test_wildcard_media_type_sends_json() -> None:
    tool = make_tool(method="POST", body=BodyBinding(media_type="*/*", argument="body"), body_schema={})
    body = build_body(tool, {"body": {"a": 1}})
    assert body is not None and body.content_type == "application/json" and body.content == b'{"a":1}'


def test_multipart_field_names_cannot_break_the_part_header() -> None:
    tool = make_tool(method="POST", body=BodyBinding(media_type="multipart/form-data", argument="body"),
                     body_schema={"type": "object"})
    body = build_body(tool, {"body": {'a"b': "x"}})
    assert body is not None and b'name="a\\"b"' in body.content
    with pytest.raises(ArgumentError):
        build_body(tool, {"body": {"a\r\nX-Evil: 1": "x"}})


def test_binary_body_requires_base64_text() -> None:
    tool = make_tool(method="PUT", body=BodyBinding(media_type="image/png", argument="body"))
    assert build_body(tool, {"body": "iVBORw=="}).content == b"\x89PNG"  # type: ignore[union-attr]
    with pytest.raises(ArgumentError, match="base64"):
        build_body(tool, {"body": "%%%"})


def test_format_byte_is_base64_on_the_wire_and_sent_as_given() -> None:
    schema = {"type": "object", "properties": {
        "file": {"type": "string", "format": "binary", "contentEncoding": "base64"},
        "checksum": {"type": "string", "format": "byte", "contentEncoding": "base64"}}}
    tool = make_tool(method="POST", body=BodyBinding(media_type="multipart/form-data", argument="body"),
                     body_schema=schema)
    body = build_body(tool, {"body": {"file": "iVBORw==", "checksum": "q83vEjRW"}})
    assert body is not None
    assert b'name="file"; filename="file"\r\nContent-Type: application/octet-stream\r\n\r\n\x89PNG\r\n' in body.content
    assert b'name="checksum"\r\n\r\nq83vEjRW\r\n' in body.content
    whole = make_tool(method="PUT", body=BodyBinding(media_type="text/plain", argument="body"),
                      body_schema={"type": "string", "format": "byte", "contentEncoding": "base64"})
    assert build_body(whole, {"body": "q83vEjRW"}).content == b"q83vEjRW"  # type: ignore[union-attr]
