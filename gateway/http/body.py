"""Request bodies: JSON (and +json / vendor JSON types), form-urlencoded, multipart, XML, text and binary.

The media type the spec declares is the Content-Type sent. Binary content (octet-stream bodies, multipart
file parts) reaches the model's side as base64 text and is decoded here; a file part whose schema does not
say `contentEncoding: base64` is sent as the text given.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

from ..catalog import Argument, BodyBinding, Encoding, JSONSchema, Tool
from ..errors import ArgumentError
from .serialize import check_header_value, parameter_identity, serialize_query, to_text

_BINARY_TOP_TYPES = ("image/", "audio/", "video/", "font/")
_BINARY_TYPES = {"application/octet-stream", "application/pdf", "application/zip", "application/gzip"}


@dataclass(slots=True)
class Body:
    content: bytes
    content_type: str


def essence(media_type: str) -> str:
    """`application/json; charset=utf-8` -> `application/json`."""
    return media_type.split(";", 1)[0].strip().lower()


def is_json_type(media_type: str) -> bool:
    """application/json, +json, vendor JSON (`application/x-amz-json-1.1`), text/json."""
    kind = essence(media_type)
    if "/" not in kind:
        return False
    top, sub = kind.split("/", 1)
    return top in ("application", "text") and "json" in sub and "jsonl" not in sub and "ndjson" not in sub


def is_binary_type(media_type: str) -> bool:
    kind = essence(media_type)
    return kind in _BINARY_TYPES or kind.startswith(_BINARY_TOP_TYPES)


def build_body(tool: Tool, arguments: dict[str, Any]) -> Body | None:
    """The encoded body for this call, or None when it has none."""
    binding = tool.body
    if binding is None:
        return None
    value, schema = _body_value(tool, binding, arguments)
    if value is None:
        return None
    media_type = binding.media_type or "application/json"
    kind = essence(media_type)
    if kind == "multipart/form-data" or (kind.startswith("multipart/") and isinstance(value, dict)):
        return _multipart(value, schema, tool, binding, kind)
    if kind == "application/x-www-form-urlencoded":
        return Body(_form(value, binding), media_type)
    if is_json_type(media_type) or kind in ("*/*", "application/*"):
        content_type = media_type if "*" not in kind else "application/json"
        return Body(_json_bytes(value), content_type)
    # A structured value under a binary type is a spec quirk (Docker declares JSON objects as
    # octet-stream): it goes as JSON. Only text is taken for base64.
    if (_is_base64_schema(schema, tool) or is_binary_type(media_type)) and isinstance(value, str):
        content_type = media_type if "*" not in kind else "application/octet-stream"
        return Body(_decode_base64(value, binding.argument or "body"), content_type)
    content_type = media_type if "*" not in kind else "text/plain"
    if _is_xml_type(kind) and not isinstance(value, str):
        from .xml_body import xml_bytes  # here: Python's XML modules only for the rare API that takes XML

        return Body(xml_bytes(value, binding.xml), content_type)
    if isinstance(value, str):
        return Body(value.encode("utf-8"), content_type)
    return Body(_json_bytes(value), content_type)


def _body_value(tool: Tool, binding: BodyBinding, arguments: dict[str, Any]) -> tuple[Any, JSONSchema]:
    properties = tool.input_schema.get("properties") or {}
    if binding.argument is not None:
        value = arguments.get(binding.argument)
        if value is None and binding.required:
            raise ArgumentError(f"{binding.argument}: the request body is required")
        return value, resolve(properties.get(binding.argument) or {}, tool.input_schema)
    spread = [a for a in tool.arguments if a.location == "body"]
    value = {a.wire_name: arguments[a.name] for a in spread if a.name in arguments}
    schema = {"type": "object", "properties": {a.wire_name: properties.get(a.name) or {} for a in spread}}
    if not value and not binding.required:
        return None, schema
    return value, schema


def resolve(schema: Any, root: JSONSchema, depth: int = 0) -> JSONSchema:
    """Follow local `$ref`s (`#/$defs/...`); the catalog's schemas carry the `$defs` they use."""
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and depth < 32:
        ref = schema["$ref"]
        if not ref.startswith("#/"):
            return {}
        target: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, dict) else None
        schema = target
        depth += 1
    return schema if isinstance(schema, dict) else {}


def _is_xml_type(kind: str) -> bool:
    return kind in ("application/xml", "text/xml") or kind.endswith("+xml")


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _is_base64_schema(schema: JSONSchema, tool: Tool) -> bool:
    return _decodes_base64(resolve(schema, tool.input_schema))


def _decodes_base64(schema: JSONSchema) -> bool:
    """Whether the model's base64 text stands for raw bytes to send. `format: byte` is base64 *on the wire*
    (OpenAPI 3.0's "base64 encoded characters"), so it goes as the text given."""
    return schema.get("contentEncoding") == "base64" and schema.get("format") != "byte"


def _decode_base64(value: Any, label: str) -> bytes:
    if not isinstance(value, str):
        raise ArgumentError(f"{label}: expected the content as a base64 string, got {type(value).__name__}")
    text = "".join(value.split())
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        pass
    # The URL-safe alphabet too; its decoder silently drops foreign characters, so check them first.
    if re.fullmatch(r"[A-Za-z0-9_-]*=*", text):
        try:
            return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError):
            pass
    raise ArgumentError(f"{label}: expected base64-encoded content")


# -- application/x-www-form-urlencoded -------------------------------------------------------------------


def _form(value: Any, binding: BodyBinding) -> bytes:
    if not isinstance(value, dict):
        raise ArgumentError("body: a form body must be an object")
    items: list[str] = []
    fields = {parameter_identity(str(name)) for name in value}
    for name, inner in value.items():
        if inner is None:
            continue
        encoding = binding.encoding.get(name) or Encoding()
        style = encoding.style or "form"
        explode = encoding.explode if encoding.explode is not None else style == "form"
        if isinstance(inner, dict) and style != "deepObject" and explode and not encoding.content_type:
            # Its keys are sent as field names: one naming another field (a value agents.yaml fixes, say) would
            # send that field twice, and the model's copy wins on an upstream that reads the first. Under every
            # style but deepObject (`serialize_query` spreads a `pipeDelimited` one too: redteam45).
            own = parameter_identity(str(name))
            for key in inner:
                if (identity := parameter_identity(str(key))) in fields and identity != own:
                    raise ArgumentError(f"{name}: the key {key!r} names another field of the form; leave it out")
        argument = Argument(
            name=name,
            location="query",
            wire_name=name,
            style=style,
            explode=explode,
            allow_reserved=encoding.allow_reserved,
            content_type=encoding.content_type if encoding.content_type and not _is_text_type(encoding) else None,
        )
        items.extend(serialize_query(argument, inner))
    return "&".join(items).encode("ascii")


def _is_text_type(encoding: Encoding) -> bool:
    return essence(encoding.content_type or "text/plain") == "text/plain"


# -- multipart/form-data ----------------------------------------------------------------------------------


def _multipart(value: Any, schema: JSONSchema, tool: Tool, binding: BodyBinding, kind: str) -> Body:
    if not isinstance(value, dict):
        raise ArgumentError("body: a multipart body must be an object")
    properties = schema.get("properties") or {}
    boundary = "gateway-" + secrets.token_hex(12)
    chunks: list[bytes] = []
    for name, inner in value.items():
        if inner is None:
            continue
        prop = resolve(properties.get(name) or {}, tool.input_schema)
        encoding = binding.encoding.get(name) or Encoding()
        if isinstance(inner, list):
            item_schema = resolve(prop.get("items") or {}, tool.input_schema)
            for item in inner:
                chunks.append(_part(boundary, name, item, item_schema, encoding, tool))
        else:
            chunks.append(_part(boundary, name, inner, prop, encoding, tool))
    chunks.append(f"--{boundary}--\r\n".encode())
    return Body(b"".join(chunks), f"{kind}; boundary={boundary}")


def _part(boundary: str, name: str, value: Any, schema: JSONSchema, encoding: Encoding, tool: Tool) -> bytes:
    disposition = f'form-data; name="{_quote_param(name)}"'
    content_type = encoding.content_type
    if _is_file(schema):
        if _decodes_base64(schema):
            data = _decode_base64(value, name)
        else:
            data = to_text(value).encode("utf-8")
        disposition += f'; filename="{_quote_param(name)}"'
        content_type = content_type or schema.get("contentMediaType") or "application/octet-stream"
    elif isinstance(value, (dict, list)):
        data = _json_bytes(value)
        content_type = content_type or "application/json"
    else:
        data = to_text(value).encode("utf-8")
    if content_type and "*" in content_type:
        content_type = "application/octet-stream" if _is_file(schema) else None
    if content_type:
        check_header_value(name, content_type)
    head = f"--{boundary}\r\nContent-Disposition: {disposition}\r\n"
    if content_type:
        head += f"Content-Type: {content_type}\r\n"
    return head.encode("utf-8") + b"\r\n" + data + b"\r\n"


def _is_file(schema: JSONSchema) -> bool:
    return (
        schema.get("format") == "binary"
        or _decodes_base64(schema)
        or ("contentMediaType" in schema and schema.get("type") in (None, "string"))
    )


def _quote_param(text: str) -> str:
    if any(c in text for c in "\r\n\x00"):
        raise ArgumentError(f"multipart field name {text!r} contains a line break")
    return text.replace("\\", "\\\\").replace('"', '\\"')
