"""YAML documents within bounds: a file-size cap and a limit on how far aliases may expand a document.

An alias (`*a`) repeats a whole anchored node. PyYAML builds each anchored node once and shares it, so
loading stays small, but every consumer that walks or serializes the result (a schema copied into a
tool, a JSON rendering, a pickle-free cache, a validator) expands it: nine nested lists of nine aliases
are 1 KB of YAML and 9**9 values once expanded ("billion laughs"). PyYAML has no limit of its own, so
the composed node graph is measured before anything is built from it: the expanded node count (each
alias counted as the whole subtree it repeats, memoized per node, so measuring is linear) may exceed
the written node count only by `ALIAS_BUDGET` nodes.

`compose_bounded` is used for specs (`gateway.openapi`) and for agents.yaml (`gateway.config`); the
error message names what was refused and by how much, the caller adds the file name.
"""

from __future__ import annotations

from typing import Any

from yaml.nodes import MappingNode, Node, SequenceNode

MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
"""The largest spec or manifest file read at all (the biggest real specs are ~25 MB)."""

ALIAS_BUDGET = 1_000_000
"""Nodes that aliases may add to a document beyond the nodes written in it."""


class DocumentTooLarge(Exception):
    """A document over the byte cap, or one whose aliases expand it beyond the budget."""


def check_size(size: int, limit: int = MAX_DOCUMENT_BYTES) -> None:
    if size > limit:
        raise DocumentTooLarge(f"the file has {size} bytes, more than the {limit} accepted")


def compose_bounded(data: str | bytes, loader_class: Any, *, budget: int = ALIAS_BUDGET) -> tuple[Any, Node | None]:
    """Compose one YAML document with `loader_class`; `(loader, node)` once its expansion is within bounds.

    The caller builds values with `loader.construct_document(node)` and then calls `loader.dispose()`.
    Raises `yaml.YAMLError` for invalid YAML and `DocumentTooLarge` for an alias bomb.
    """
    check_size(len(data))
    loader = loader_class(data)
    try:
        node = loader.get_single_node()
        if node is not None and _may_alias(data):
            written, expanded = node_counts(node)
            if expanded - written > budget:
                raise DocumentTooLarge(
                    f"its YAML aliases would expand {written:,} written nodes to {expanded:,} (at most "
                    f"{budget:,} more than written are accepted): an alias bomb?")
    except BaseException:
        loader.dispose()
        raise
    return loader, node


def _may_alias(data: str | bytes) -> bool:
    """No `&` anywhere means no anchor, so no alias: the measuring walk is skipped."""
    return (b"&" in data) if isinstance(data, bytes) else ("&" in data)


def node_counts(root: Node) -> tuple[int, int]:
    """`(distinct nodes, nodes once every alias is expanded)` of a composed document, in linear time.

    Raises `DocumentTooLarge` for a recursive document (an alias inside the node it names): it never ends.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise DocumentTooLarge("a YAML alias refers to a node that contains it: the document never ends")
        children = _children(node)
        if not children:
            sizes[key] = 1
            continue
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return len(sizes), sizes[id(root)]


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def load_bounded(data: str | bytes, loader_class: Any, *, budget: int = ALIAS_BUDGET) -> Any:
    """`yaml.load` with the bounds of `compose_bounded`."""
    loader, node = compose_bounded(data, loader_class, budget=budget)
    try:
        return loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()


__all__ = ["ALIAS_BUDGET", "MAX_DOCUMENT_BYTES", "DocumentTooLarge", "check_size", "compose_bounded",
           "load_bounded", "node_counts"]
