"""XML request bodies, shaped by the compiler's XML mapping (`BodyBinding.xml`, see gateway/openapi/_xml.py).

With a mapping: properties become elements or attributes under their `xml` names, arrays are wrapped
(`<wrapper><item/>...</wrapper>`) or repeated, and namespaces are declared where first used (`xmlns` for
a namespace without a prefix, `xmlns:prefix` otherwise; a declaration already in scope is not repeated).
Without one, property names are used as is. Either way the root is the mapping's name, else a single-key
object names it (S3's `{"CompleteMultipartUpload": {...}}` shape), else `root`; every element and
attribute name is checked, so an argument can never inject markup (text and attribute values are escaped).
"""

from __future__ import annotations

import re
from typing import Any
from xml.etree import ElementTree

from ..errors import ArgumentError
from .serialize import to_text

_DECLARATION = b'<?xml version="1.0" encoding="UTF-8"?>'
_MAX_REFS = 64
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
Node = dict[str, Any]


def xml_bytes(value: Any, mapping: dict[str, Any] | None = None) -> bytes:
    """`value` (a JSON value) as an XML document."""
    writer = _XmlWriter(mapping or {})
    root_node = writer.effective((mapping or {}).get("root"))
    name = root_node.get("name")
    if name is None:
        if isinstance(value, dict) and len(value) == 1:
            key, value = next(iter(value.items()))
            root_node = writer.effective((root_node.get("props") or {}).get(key))
            name = root_node.get("name", key)
        else:
            name = "root"
    root = ElementTree.Element("root")
    writer.fill(root, value, root_node, writer.name_element(root, name, root_node, {}))
    return bytes(_DECLARATION + ElementTree.tostring(root, encoding="utf-8", xml_declaration=False))


class _XmlWriter:
    def __init__(self, mapping: dict[str, Any]) -> None:
        defs = mapping.get("defs")
        self.defs: dict[str, Node] = defs if isinstance(defs, dict) else {}

    def effective(self, node: Any, hops: int = 0) -> Node:
        """`node` with its `ref` (a recursive schema's entry) merged under its own keys."""
        if not isinstance(node, dict):
            return {}
        ref = node.get("ref")
        if ref is None or hops > _MAX_REFS:
            return node
        base = self.effective(self.defs.get(ref), hops + 1)
        merged = {**base, **{k: v for k, v in node.items() if k != "ref"}}
        if "props" in base and "props" in node:
            merged["props"] = {**base["props"], **node["props"]}
        return merged

    def fill(self, element: ElementTree.Element, value: Any, node: Node, scope: dict[str, str]) -> None:
        """`value` as the content of `element`; `scope` is the namespaces in scope inside it (prefix -> uri,
        "" for the default), owned by this element: an attribute's declaration is added to it."""
        if isinstance(value, dict):
            props = node.get("props") or {}
            for key, inner in value.items():
                if inner is None:
                    continue
                self._add_property(element, key, inner, self.effective(props.get(key)), scope)
        elif isinstance(value, list):
            items = self.effective(node.get("items"))
            for item in value:
                self._add_element(element, items.get("name", "item"), item, items, scope)
        else:
            element.text = to_text(value)

    def _add_property(self, parent: ElementTree.Element, key: str, value: Any, node: Node,
                      scope: dict[str, str]) -> None:
        name = node.get("name", key)
        if node.get("attr") and not isinstance(value, (dict, list)):
            qualified = self._qualify(parent, name, node, scope, attribute=True)
            parent.set(qualified, to_text(value))
            return
        if not isinstance(value, list):
            self._add_element(parent, name, value, node, scope)
            return
        items = self.effective(node.get("items"))
        if not ("ns" in items or "prefix" in items):
            items = {**items, **{k: node[k] for k in ("ns", "prefix") if k in node}}
        item_name = str(items.get("name", name))
        if node.get("wrapped"):
            wrapper = ElementTree.SubElement(parent, "wrapper")
            inner_scope = self.name_element(wrapper, name, node, scope)
            for item in value:
                self._add_element(wrapper, item_name, item, items, inner_scope)
        else:
            for item in value:
                self._add_element(parent, item_name, item, items, scope)

    def _add_element(self, parent: ElementTree.Element, name: str, value: Any, node: Node,
                     scope: dict[str, str]) -> None:
        element = ElementTree.SubElement(parent, "element")
        self.fill(element, value, node, self.name_element(element, name, node, scope))

    def name_element(self, element: ElementTree.Element, name: Any, node: Node,
                     scope: dict[str, str]) -> dict[str, str]:
        """Give `element` its qualified name and the declarations it needs; the scope inside it."""
        local = dict(scope)
        for prefix, uri in (node.get("xmlns") or {}).items():
            self._declare(element, prefix, uri, local)
        element.tag = self._qualify(element, name, node, local, attribute=False)
        return local

    def _qualify(self, element: ElementTree.Element, name: Any, node: Node, scope: dict[str, str], *,
                 attribute: bool) -> str:
        _check_name(name)
        namespace, prefix = node.get("ns"), node.get("prefix")
        if prefix is not None:
            _check_name(prefix)
        if not isinstance(namespace, str) or not namespace:
            # A prefix means something only where it is declared; an undeclared one would be malformed XML.
            return f"{prefix}:{name}" if prefix and prefix in scope else str(name)
        if prefix is None and attribute:
            # Unprefixed attributes are in no namespace: a namespaced one needs a prefix of its own.
            prefix = next((p for p, uri in scope.items() if p and uri == namespace), None)
            counter = 0
            while prefix is None or scope.get(prefix, namespace) != namespace:
                counter += 1
                prefix = f"ns{counter}"
        if prefix is None:
            self._declare(element, "", namespace, scope)
            return str(name)
        self._declare(element, prefix, namespace, scope)
        return f"{prefix}:{name}"

    def _declare(self, element: ElementTree.Element, prefix: str, uri: Any, scope: dict[str, str]) -> None:
        if not isinstance(uri, str) or scope.get(prefix) == uri:
            return
        if prefix:
            _check_name(prefix)
        element.set(f"xmlns:{prefix}" if prefix else "xmlns", uri)
        scope[prefix] = uri


def _check_name(name: Any) -> None:
    """Names come from the model's keys and from the spec: neither may carry markup or a prefix of its own."""
    if not isinstance(name, str) or not _NAME.match(name) or name.lower().startswith("xml"):
        raise ArgumentError(f"{name!r} can't be an XML element name")
