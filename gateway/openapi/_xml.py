"""The XML mapping of a request body: OpenAPI's `xml` objects, kept beside the tool's schema.

The model-facing input schema stays plain JSON Schema (the translator drops `xml`), so what XML needs is
compiled here into a small JSON tree the executor reads (gateway/http/xml_body.py builds the XML):

    {"root": node, "defs": {key: node}}         ("defs" only for recursive schemas)
    node = {"name": str, "ns": uri, "prefix": str, "attr": true, "wrapped": true, "xmlns": {prefix: uri},
            "props": {property: node}, "items": node, "ref": key}

Every key is optional and a node without anything to say is left out, so a body without `xml` objects
and without a named root has no mapping at all. `ref` points into `defs` (a schema met again inside
itself); the node's own keys win over the entry's.

Rules:
- The root element is named by the schema's `xml.name`, else by the name of the `$ref`'d component
  (`#/components/schemas/Pet`, `#/definitions/Pet`), as OpenAPI's examples do.
- A property's `xml` comes from its own schema, then its `allOf`/`anyOf`/`oneOf` members (inline ones
  before `$ref`'d ones: `allOf: [{$ref: List}, {xml: {name: Part}}]` renames), then its `$ref` target.
- The items of an array without a name of their own take the array's element name, wrapped or not
  (OpenAPI's wrapped examples; swagger-ui and AWS-generated specs do the same when unwrapped).
- A name written `prefix:local` without a `prefix` is split. The XML Schema instance namespace (`xsi`)
  defines attributes only: a scalar in it is an attribute, and on an element it is only declared.
- Invalid names or prefixes are dropped with a warning; cycles become `ref`s; depth and size are bounded.
"""

from __future__ import annotations

import re
from typing import Any

from ._documents import Documents, RefError

XSI = "http://www.w3.org/2001/XMLSchema-instance"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_MAX_DEPTH = 40
_MAX_NODES = 5000
_MEMBERS = ("allOf", "anyOf", "oneOf")


def is_xml_media(media: str) -> bool:
    kind = media.split(";", 1)[0].strip().lower()
    return kind in ("application/xml", "text/xml") or kind.endswith("+xml")


def valid_xml_name(name: Any) -> bool:
    """An XML name without a prefix; names starting with `xml` are reserved."""
    return isinstance(name, str) and bool(_NAME.match(name)) and not name.lower().startswith("xml")


def xml_mapping(raw: Any, documents: Documents, file: str, warn: Any, pointer: str) -> dict[str, Any] | None:
    """The mapping of a request body schema (as written in the spec, `$ref`s unresolved), or None."""
    builder = _MappingBuilder(documents, warn, pointer)
    root = dict(builder.node(raw, file, 0))
    if "name" not in root and "name" not in builder.defs.get(root.get("ref", ""), {}):
        component = _component_name(raw, documents, file)
        if component is not None:
            root["name"] = component
    mapping: dict[str, Any] = {}
    if root:
        mapping["root"] = root
    if builder.defs:
        mapping["defs"] = builder.defs
    return mapping or None


def _component_name(raw: Any, documents: Documents, file: str) -> str | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("$ref"), str):
        return None
    try:
        pointer = documents.split_ref(raw["$ref"], file)[1]
    except RefError:
        return None
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]
    if len(tokens) == 3 and tokens[:2] == ["components", "schemas"] or len(tokens) == 2 and tokens[0] == "definitions":
        name = tokens[-1]
        if ":" in name:
            name = name.rsplit(":", 1)[1]
        return name if valid_xml_name(name) else None
    return None


class _MappingBuilder:
    def __init__(self, documents: Documents, warn: Any, pointer: str) -> None:
        self.documents = documents
        self.warn = warn
        self.pointer = pointer
        self.defs: dict[str, dict[str, Any]] = {}
        self._active: set[str] = set()
        self._recursive: set[str] = set()
        self._memo: dict[str, dict[str, Any]] = {}
        self._visited = 0
        self._warned: set[str] = set()

    def _warn_once(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            self.warn(self.pointer + "/requestBody", message)

    def node(self, schema: Any, file: str, depth: int) -> dict[str, Any]:
        """What XML needs of `schema`: its own `xml`, then its members' and `$ref` target's."""
        self._visited += 1
        if depth > _MAX_DEPTH or self._visited > _MAX_NODES:
            self._warn_once("XML mapping: the body schema is too deep or too large; the rest uses property names")
            return {}
        if not isinstance(schema, dict):
            return {}
        own = self._own(schema)
        inline: list[dict[str, Any]] = []
        referenced: list[dict[str, Any]] = []
        for key in _MEMBERS:
            members = schema.get(key)
            for member in members if isinstance(members, list) else ():
                target = referenced if isinstance(member, dict) and "$ref" in member else inline
                target.append(self.node(member, file, depth + 1))
        if isinstance(schema.get("$ref"), str):
            referenced.append(self._reference(schema["$ref"], file, depth))
        structure: dict[str, Any] = {}
        properties = schema.get("properties")
        if isinstance(properties, dict):
            props = {}
            for name, sub in properties.items():
                child = self.node(sub, file, depth + 1)
                if child:
                    props[name] = child
            if props:
                structure["props"] = props
        items = schema.get("items")
        if isinstance(items, dict):
            child = self.node(items, file, depth + 1)
            if child:
                structure["items"] = child
        node = _merge([own, structure, *inline, *referenced])
        return self._place_xsi(node, schema)

    def _reference(self, ref: str, file: str, depth: int) -> dict[str, Any]:
        try:
            target_file, pointer = self.documents.split_ref(ref, file)
            target = self.documents.lookup(target_file, pointer)
        except RefError:
            return {}  # the translator reports broken references
        key = f"{target_file}#{pointer}"
        if key in self._active:
            self._recursive.add(key)
            return {"ref": key}
        found = self._memo.get(key)
        if found is not None:
            return found
        self._active.add(key)
        try:
            node = self.node(target, target_file, depth + 1)
        finally:
            self._active.discard(key)
        if key in self._recursive:
            self.defs[key] = node
            node = {"ref": key}
        self._memo[key] = node
        return node

    def _own(self, schema: dict[str, Any]) -> dict[str, Any]:
        xml = schema.get("xml")
        if not isinstance(xml, dict):
            return {}
        node: dict[str, Any] = {}
        name, prefix = xml.get("name"), xml.get("prefix")
        if isinstance(name, str) and ":" in name and prefix is None:
            prefix, name = name.split(":", 1)
        if name is not None:
            if valid_xml_name(name):
                node["name"] = name
            else:
                self._warn_once(f"XML mapping: xml name {name!r} is not a valid XML name: the property name is used")
        if prefix is not None:
            if valid_xml_name(prefix):
                node["prefix"] = prefix
            else:
                self._warn_once(f"XML mapping: xml prefix {prefix!r} is not a valid XML prefix: dropped")
        namespace = xml.get("namespace")
        if isinstance(namespace, str) and namespace:
            node["ns"] = namespace
        elif node.get("prefix") == "xsi":
            node["ns"] = XSI
        for key, flag in (("attribute", "attr"), ("wrapped", "wrapped")):
            if isinstance(xml.get(key), bool):
                node[flag] = xml[key]
        return node

    def _place_xsi(self, node: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        """The `xsi` namespace holds attributes only (`xsi:type`): a scalar in it is an attribute, and a
        container that names it only declares it for its children."""
        if node.get("ns") != XSI:
            return node
        node = dict(node)
        if _is_container(schema, node):
            del node["ns"]
            node.pop("attr", None)
            if node.get("prefix") == "xsi":
                del node["prefix"]
            node["xmlns"] = {**node.get("xmlns", {}), "xsi": XSI}
        else:
            node["attr"] = True
            node.setdefault("prefix", "xsi")
        return node


def _is_container(schema: dict[str, Any], node: dict[str, Any]) -> bool:
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    return "props" in node or "items" in node or "properties" in schema or "items" in schema or (
        "object" in kinds or "array" in kinds)


def _merge(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Earlier nodes win key by key; `props` are merged property by property, the first node's first."""
    merged: dict[str, Any] = {}
    for node in nodes:
        for key, value in node.items():
            if key == "props" and "props" in merged:
                merged["props"] = {**value, **merged["props"]}
            elif key == "xmlns" and "xmlns" in merged:
                merged["xmlns"] = {**value, **merged["xmlns"]}
            elif key not in merged:
                merged[key] = value
    return merged
