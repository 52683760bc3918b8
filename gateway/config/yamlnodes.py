"""YAML with line numbers and `${VAR}` substitution, for the manifest loader.

`yaml.safe_load` forgets where a value came from and silently keeps the last of two duplicate keys.
Here the document is composed into nodes first, then built into plain Python values while every
key path is mapped to its 1-based line, so each diagnostic can say `agents.yaml:9: agents.x.model: ...`.

Key paths are tuples of mapping keys (str) and sequence indexes (int); `format_path` renders them as
`agents.reader.tools[1].api`. Mapping keys are always taken literally as strings (`yes:` is the
key "yes", not True), because agent, api and operation names are text.

`${VAR}` and `${VAR:-default}` inside string values read the environment; `$${` stands for a
literal `${`. A plain (unquoted) value that is a single substitution is typed again afterwards, so
`max_iterations: ${MAX_ITER:-40}` gives the int 40.

`{api_key: ${KEY}}` is not valid YAML (`{` ends a plain scalar in flow style), yet DESIGN.md writes it so.
Before parsing, every `${...}` is therefore swapped for an inert placeholder of the same line, and
swapped back in each value after parsing; environment values never reach the YAML parser, so they
cannot change the document's structure.

The document is composed within `gateway.yamlbounds` (file size, alias expansion): the builder below
walks aliases again for every use, so an alias bomb is refused before it starts.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..catalog import Diagnostic
from ..yamlbounds import DocumentTooLarge, compose_bounded

KeyPath = tuple[str | int, ...]

_VAR = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_ANY_VAR = re.compile(r"\$\{([^}]*)\}?")
_RETYPED_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool")
_SIMPLE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_EXPRESSION = re.compile(r"\$?\$\{[^}\n]*\}")

try:
    _FAST_LOADER: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _FAST_LOADER = yaml.SafeLoader


class _Missing:
    """The value of a scalar whose substitution failed (already reported): checks skip it."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class KeyLines(dict[KeyPath, int]):
    """Each key path's 1-based line; `variables` names the environment variables each value read (a warning
    about an empty value can then say which variable to set)."""

    def __init__(self) -> None:
        super().__init__()
        self.variables: dict[KeyPath, list[str]] = {}

    def variables_under(self, prefix: KeyPath) -> list[str]:
        """The variables read by the values at or under `prefix`, in order, once each."""
        found = [name for path, names in self.variables.items() if path[:len(prefix)] == prefix for name in names]
        return list(dict.fromkeys(found))


def format_path(path: KeyPath) -> str:
    """`("agents", "reader", "tools", 1, "api")` -> `agents.reader.tools[1].api`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _SIMPLE_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out


class _Builder:
    def __init__(self, file: str, environ: Mapping[str, str], expressions: dict[str, str]) -> None:
        self.expressions = expressions
        self._placeholder = re.compile("|".join(map(re.escape, expressions)) or "(?!)")
        self.file = file
        self.environ = environ
        self.lines = KeyLines()
        self.diagnostics: list[Diagnostic] = []
        self.constructor = SafeConstructor()
        self.resolver = yaml.resolver.Resolver()

    def error(self, path: KeyPath, line: int, message: str) -> None:
        self.diagnostics.append(
            Diagnostic(level="error", file=self.file, pointer=format_path(path), line=line, message=message)
        )

    def build(self, node: Node, path: KeyPath) -> Any:
        if isinstance(node, MappingNode):
            return self._build_mapping(node, path)
        if isinstance(node, SequenceNode):
            items = []
            for index, child in enumerate(node.value):
                self.lines[(*path, index)] = child.start_mark.line + 1
                items.append(self.build(child, (*path, index)))
            return items
        assert isinstance(node, ScalarNode)  # YAML has no fourth kind of node
        return self._build_scalar(node, path)

    def _build_mapping(self, node: MappingNode, path: KeyPath) -> dict[str, Any]:
        self.constructor.flatten_mapping(node)  # resolves `<<: *anchor` merge keys in place
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, ScalarNode):
                self.error(path, line, "a key must be a plain string, not a list or mapping")
                continue
            key = self._restore(str(key_node.value))
            child = (*path, key)
            if key in result:
                self.error(child, line, f"duplicate key {key!r} (first at line {self.lines[child]})")
                continue
            self.lines[child] = line
            result[key] = self.build(value_node, child)
        return result

    def _build_scalar(self, node: ScalarNode, path: KeyPath) -> Any:
        try:
            value = self.constructor.construct_object(node, deep=True)
        except ValueError as exc:  # an integer of 5,000 digits: more than Python reads (redteam47: a traceback)
            self.error(path, node.start_mark.line + 1, f"invalid value: {str(exc).split(';', 1)[0]}")
            return MISSING
        if not isinstance(value, str):
            return value
        value = self._restore(value)
        if "$" not in value:
            return value
        substituted = self._substitute(value, path, node.start_mark.line + 1)
        if substituted is None:
            return MISSING
        if not node.style and _VAR.fullmatch(value.strip()):  # plain: PyYAML's style None, libyaml's ""
            tag = self.resolver.resolve(ScalarNode, substituted, (True, False))  # type: ignore[no-untyped-call]
            if tag in _RETYPED_TAGS:
                return self.constructor.construct_object(ScalarNode(tag, substituted), deep=True)
        return substituted

    def _restore(self, text: str) -> str:
        if not self.expressions:
            return text
        return self._placeholder.sub(lambda match: self.expressions[match.group(0)], text)

    def _substitute(self, value: str, path: KeyPath, line: int) -> str | None:
        missing: list[str] = []

        def replace(match: re.Match[str]) -> str:
            if match.group(0) == "$${":
                return "${"
            name, default = match.group(1), match.group(2)
            self.lines.variables.setdefault(path, []).append(name)
            if name in self.environ:
                return self.environ[name]
            if default is not None:
                return default
            missing.append(name)
            return ""

        result = _VAR.sub(replace, value)
        for name in missing:
            self.error(path, line, f"environment variable {name} is not set and has no default "
                                   f"(write ${{{name}:-default}} to give one)")
        leftover = _ANY_VAR.search(_VAR.sub("", value))
        if leftover:
            self.error(path, line, f"malformed substitution {leftover.group(0)!r}: "
                                   "use ${NAME} or ${NAME:-default} (NAME: letters, digits, _)")
            return None
        return None if missing else result


def _compose(text: str) -> tuple[Any, Node | None]:
    """The document composed by libyaml (every command reads agents.yaml at its start: PyYAML's own composer takes
    about 20 times as long); a document libyaml refuses is composed by PyYAML, whose result or error decides, so a
    mistake is reported in its words (they name more: the tab it found, what it expected)."""
    try:
        return compose_bounded(text, _FAST_LOADER)
    except yaml.YAMLError:
        return compose_bounded(text, yaml.SafeLoader)


def load_yaml(text: str, *, file: str, environ: Mapping[str, str]) -> tuple[Any, dict[KeyPath, int], list[Diagnostic]]:
    """Parse one YAML document into plain values, a key path -> line map, and diagnostics.

    A syntax error gives `(None, {}, [error])` with the line YAML reported.
    """
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
        return None, {}, [Diagnostic(level="error", file=file, line=1, message=f"refused: {exc}")]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        message = f"invalid YAML: {exc.problem or exc.context or exc}"
        if exc.problem == "mapping values are not allowed here":  # `store: memory:`, `instructions: Note: ...`
            message += " (a value ending in ':' or holding ': ' is read as a key: quote it, as in store: \"memory:\")"
        return None, {}, [Diagnostic(level="error", file=file, line=line, message=message)]
    except yaml.YAMLError as exc:
        return None, {}, [Diagnostic(level="error", file=file, line=1, message=f"invalid YAML: {exc}")]
    if node is None:
        return {}, {(): 1}, []
    builder = _Builder(file, environ, expressions)
    builder.lines[()] = node.start_mark.line + 1
    try:
        data = builder.build(node, ())
    except yaml.YAMLError as exc:  # a bad scalar (e.g. an impossible timestamp) fails at construction
        line = getattr(getattr(exc, "problem_mark", None), "line", 0) + 1
        return None, {}, [Diagnostic(level="error", file=file, line=line, message=f"invalid YAML: {exc}")]
    return data, builder.lines, builder.diagnostics
