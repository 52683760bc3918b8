"""agents.yaml's text composed by PyYAML into a `Document`: its values as written, the line of every key path, and
where `${VAR}` is to be read (`gateway.config.yamlnodes` reads it, and keeps documents by content).

This is the only module of the settings' reading that imports `yaml`: PyYAML compiles its regular expressions at
import (its reader's class of printable characters alone is most of it), and a start whose agents.yaml is cached
does not need any of it.

`{api_key: ${KEY}}` is not valid YAML (`{` ends a plain scalar in flow style), yet DESIGN.md writes it so.
Before parsing, every `${...}` is therefore swapped for an inert placeholder of the same line, and swapped back in
each value after parsing; environment values never reach the YAML parser, so they cannot change the document's
structure.

The document is composed within `gateway.yamlbounds` (file size, alias expansion): the builder below walks aliases
again for every use, so an alias bomb is refused before it starts.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..catalog import Diagnostic
from ..yamlbounds import DocumentTooLarge, compose_bounded
from .yamlnodes import RETYPED_TAGS, Document, KeyPath

_EXPRESSION = re.compile(r"\$?\$\{[^}\n]*\}")

try:
    _FAST_LOADER: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _FAST_LOADER = yaml.SafeLoader


class _Builder:
    """The composed nodes as plain values; a string holding `$` is left as written and noted (`Document.sites`)."""

    def __init__(self, expressions: dict[str, str]) -> None:
        self.expressions = expressions
        self._placeholder = re.compile("|".join(map(re.escape, expressions)) or "(?!)")
        self.document = Document()
        self.constructor = SafeConstructor()

    def build(self, node: Node, path: KeyPath) -> Any:
        if isinstance(node, MappingNode):
            return self._build_mapping(node, path)
        if isinstance(node, SequenceNode):
            items = []
            for index, child in enumerate(node.value):
                self.document.lines[(*path, index)] = child.start_mark.line + 1
                items.append(self.build(child, (*path, index)))
            return items
        assert isinstance(node, ScalarNode)  # YAML has no fourth kind of node
        return self._build_scalar(node, path)

    def _build_mapping(self, node: MappingNode, path: KeyPath) -> dict[str, Any]:
        self.constructor.flatten_mapping(node)  # resolves `<<: *anchor` merge keys in place
        result: dict[str, Any] = {}
        lines = self.document.lines
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, ScalarNode):
                self.document.events.append(("error", path, line, "a key must be a plain string, not a list or "
                                                                  "mapping"))
                continue
            key = self._restore(str(key_node.value))
            child = (*path, key)
            if key in result:
                self.document.events.append(("error", child, line, f"duplicate key {key!r} (first at line "
                                                                   f"{lines[child]})"))
                continue
            lines[child] = line
            result[key] = self.build(value_node, child)
        return result

    def _build_scalar(self, node: ScalarNode, path: KeyPath) -> Any:
        value = self.constructor.construct_object(node, deep=True)
        if not isinstance(value, str):
            return value
        value = self._restore(value)
        if "$" in value:  # read from the environment at every load (`Document.resolve`)
            plain = not node.style  # PyYAML's style None, libyaml's ""
            self.document.events.append(("variable", path, node.start_mark.line + 1, value, plain))
        return value

    def _restore(self, text: str) -> str:
        if not self.expressions:
            return text
        return self._placeholder.sub(lambda match: self.expressions[match.group(0)], text)


def _compose(text: str) -> tuple[Any, Node | None]:
    """The document composed by libyaml (every command reads agents.yaml at its start: PyYAML's own composer takes
    about 20 times as long); a document libyaml refuses is composed by PyYAML, whose result or error decides, so a
    mistake is reported in its words (they name more: the tab it found, what it expected)."""
    try:
        return compose_bounded(text, _FAST_LOADER)
    except yaml.YAMLError:
        return compose_bounded(text, yaml.SafeLoader)


def compose_document(text: str, *, file: str) -> Document | Diagnostic:
    """The document in `text`, or the diagnostic saying why it is not YAML (with the line YAML reported)."""
    expressions: dict[str, str] = {}
    token = secrets.token_hex(4)

    def hide(match: re.Match[str]) -> str:
        placeholder = f"_gwvar{len(expressions)}x{token}_"
        expressions[placeholder] = match.group(0)
        return placeholder

    text = _EXPRESSION.sub(hide, text)
    try:
        loader, node = _compose(text)
        loader.dispose()
    except DocumentTooLarge as exc:
        return Diagnostic(level="error", file=file, line=1, message=f"refused: {exc}")
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        message = f"invalid YAML: {exc.problem or exc.context or exc}"
        if exc.problem == "mapping values are not allowed here":  # `store: memory:`, `instructions: Note: ...`
            message += " (a value ending in ':' or holding ': ' is read as a key: quote it, as in store: \"memory:\")"
        return Diagnostic(level="error", file=file, line=line, message=message)
    except yaml.YAMLError as exc:
        return Diagnostic(level="error", file=file, line=1, message=f"invalid YAML: {exc}")
    if node is None:
        return Document(data={}, lines={(): 1})
    builder = _Builder(expressions)
    builder.document.lines[()] = node.start_mark.line + 1
    try:
        builder.document.data = builder.build(node, ())
    except yaml.YAMLError as exc:  # a bad scalar (e.g. an impossible timestamp) fails at construction
        line = getattr(getattr(exc, "problem_mark", None), "line", 0) + 1
        return Diagnostic(level="error", file=file, line=line, message=f"invalid YAML: {exc}")
    return builder.document


def retype(text: str) -> Any:
    """A plain `${VAR}`'s substituted text typed as YAML would type it written there (an int, a float, a boolean),
    else the text itself."""
    tag = yaml.resolver.Resolver().resolve(ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
    if tag in RETYPED_TAGS:
        return SafeConstructor().construct_object(ScalarNode(tag, text), deep=True)
    return text
