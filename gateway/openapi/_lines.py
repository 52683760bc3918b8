"""Line numbers for spec diagnostics, found after the fact from their JSON pointers.

The compiler reads specs into plain values (fast, and what the cache stores), so its diagnostics carry
a pointer, not a line. `gateway validate` wants `file:line` too: for the files that have diagnostics,
the file is composed again into YAML nodes (libyaml keeps every node's position) and each pointer is
walked down to the deepest node it reaches; the line is that node's key (or item) line. JSON is YAML's
flow style, so JSON files go the same way while they are small enough for that to stay cheap
(`MAX_JSON_BYTES`); a file that cannot be composed keeps `line: null`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..catalog import Diagnostic
from ..yamlbounds import DocumentTooLarge, compose_bounded

MAX_JSON_BYTES = 4 * 1024 * 1024
"""Larger JSON specs get no line numbers: composing them as YAML takes about half a second per MiB."""

try:
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _Loader = yaml.SafeLoader


def add_lines(specs_dir: Path, diagnostics: Iterable[Diagnostic]) -> None:
    """Set `line` on each diagnostic that has a pointer into a readable spec file and none yet."""
    by_file: dict[str, list[Diagnostic]] = {}
    for diagnostic in diagnostics:
        if diagnostic.line is None and diagnostic.file:
            by_file.setdefault(diagnostic.file, []).append(diagnostic)
    for file, found in by_file.items():
        root = _compose(Path(specs_dir) / file)
        if root is None:
            continue
        for diagnostic in found:
            diagnostic.line = line_of(root, diagnostic.pointer)


def _compose(path: Path) -> Node | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if path.suffix.lower() == ".json" and len(data) > MAX_JSON_BYTES:
        return None
    try:
        loader, node = compose_bounded(data, _Loader)
    except (yaml.YAMLError, DocumentTooLarge, ValueError):
        return None
    loader.dispose()
    return node


def line_of(root: Node, pointer: str) -> int:
    """1-based line of the deepest node `pointer` reaches (the line of its key in a mapping)."""
    node, line = root, int(root.start_mark.line) + 1
    for raw in pointer.split("/")[1:] if pointer.startswith("/") else ():
        token = raw.replace("~1", "/").replace("~0", "~")
        child = _child(node, token)
        if child is None:
            break
        node, line = child[0], child[1]
    return line


def _child(node: Node, token: str) -> tuple[Node, int] | None:
    if isinstance(node, MappingNode):
        for key, value in node.value:
            if isinstance(key, ScalarNode) and str(key.value) == token:
                return value, int(key.start_mark.line) + 1
        return None
    if isinstance(node, SequenceNode) and token.isdigit() and int(token) < len(node.value):
        item = node.value[int(token)]
        return item, int(item.start_mark.line) + 1
    return None
