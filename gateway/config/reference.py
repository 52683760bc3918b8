"""The agents.yaml reference as Markdown, made from the JSON Schema: `gateway schema --markdown` prints it.

docs/agents-yaml-reference.md is this text, and a test keeps it so: every key the settings model knows is named
there, with its type, default and description, under the path it is written at (`agents.<name>.tools[].api`).
Objects used at several paths (a hook, a budget limit) are listed once, with every path that holds them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from .schema import PLACEHOLDER, agents_schema

COMMAND = "gateway schema --markdown > docs/agents-yaml-reference.md"


@dataclass
class _Section:
    """One object of the file: where it is written, what it is, and its keys."""

    paths: list[str]
    description: str
    schema: dict[str, Any]
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)


def agents_reference() -> str:
    """The Markdown reference of every key of agents.yaml."""
    return _Reference(agents_schema()).render()


class _Reference:
    def __init__(self, schema: dict[str, Any]) -> None:
        self.definitions: dict[str, Any] = schema.get("$defs", {})
        self.sections: list[_Section] = []
        self.by_definition: dict[str, _Section] = {}
        self._object("", schema, schema.get("description", ""), definition=None)

    # -- walking: every object with properties becomes a section, each $ref'd definition once

    def _object(self, path: str, node: dict[str, Any], description: str, definition: str | None) -> _Section:
        if definition is not None and definition in self.by_definition:
            section = self.by_definition[definition]
            section.paths.append(path)
            return section
        section = _Section([path], description, node)
        self.sections.append(section)
        if definition is not None:
            self.by_definition[definition] = section
        required = set(node.get("required", ()))
        for key, value in node.get("properties", {}).items():
            key_path = f"{path}.{key}" if path else key
            kind = self._kind(key_path, value)
            note = "required" if key in required else _default(value)
            section.rows.append((key, kind, note, _one_line(value.get("description") or self._described(value))))
        return section

    def _described(self, node: dict[str, Any]) -> str:
        ref = node.get("$ref")
        return str(self.definitions[ref.rsplit("/", 1)[1]].get("description", "")) if ref else ""

    def _defined(self, path: str, ref: str) -> int:
        """The section of the definition `ref` points at (written at `path`), by its index."""
        name = ref.rsplit("/", 1)[1]
        target = self.definitions[name]
        section = self._object(path, target, str(target.get("description", "")), definition=name)
        return self.sections.index(section)

    def _kind(self, path: str, node: dict[str, Any]) -> str:
        """How a value is written (descending into the objects it holds, which become sections of their own)."""
        if node is PLACEHOLDER or node == PLACEHOLDER:
            return ""
        if "$ref" in node:
            return f"object ({_LINK.format(self._defined(path, node['$ref']))})"
        if "const" in node:
            return f"`{json.dumps(node['const'])}`"
        if "discriminator" in node:  # one of several objects, told apart by a key (`type: bearer`)
            tag = node["discriminator"]["propertyName"]
            links = []
            for choice in node["oneOf"]:
                target = self.definitions[choice["$ref"].rsplit("/", 1)[1]]
                value = target["properties"][tag]["const"]
                links.append(_LINK.format(f"{self._defined(path, choice['$ref'])}:`{value}`"))
            return f"object, by `{tag}`: " + ", ".join(links)
        for key in ("anyOf", "oneOf"):
            if key in node:  # a single value's shape first: its path is the one the section is named by
                choices = sorted(node[key], key=lambda choice: choice.get("type") == "array")
                kinds = _unique(k for k in (self._kind(path, choice) for choice in choices) if k and k != "null")
                if len(kinds) == 2 and kinds[1] == f"list of {_plural(kinds[0])}" and kinds[0].startswith("object"):
                    return f"{kinds[0]}, or a list of them"
                return " or ".join(kinds)
        if "enum" in node:
            return " \\| ".join(f"`{value}`" for value in node["enum"])
        kind = node.get("type")
        if kind == "array":
            items = self._kind(f"{path}[]", node.get("items", {}))
            return ("list of: " + items if " or " in items else f"list of {_plural(items)}") if items else "list"
        if kind == "object" or "properties" in node:
            if "properties" in node:  # an object written in place: the same shape at several paths is one section
                shape = json.dumps(node, sort_keys=True)
                section = self._object(path, node, str(node.get("description", "")), definition=f"inline:{shape}")
                return f"object ({_LINK.format(self.sections.index(section))})"
            values = node.get("additionalProperties")
            if isinstance(values, dict):
                return f"map of name to {self._kind(f'{path}.<name>', values)}"
            for pattern, values in node.get("patternProperties", {}).items():
                return f"map of name (`{pattern}`) to {self._kind(f'{path}.<name>', values)}"
            return "object"
        return _scalar(node)

    # -- rendering

    def render(self) -> str:
        lines = ["# agents.yaml reference", "",
                 f"Generated from the settings model (gateway/config/) by `{COMMAND}`; a test fails when it is "
                 "out of date. [agents-yaml.md](agents-yaml.md) explains the file with examples.", "",
                 "Every checked value (a number, a boolean, a choice, a pattern) may also be written as `${VAR}` or "
                 "`${VAR:-default}`, read from the environment at load time. `<name>` stands for a key you choose; "
                 "`[]` for each item of a list. Unknown keys are refused everywhere, with a did-you-mean.", ""]
        titles = [_title(section) for section in self.sections]

        def linked(text: str) -> str:
            return re.sub(r"\x00(\d+)(?::([^\x00]*))?\x00",
                          lambda m: f"[{m[2] or titles[int(m[1])]}](#{_anchor(titles[int(m[1])])})", text)

        for section, title in zip(self.sections, titles, strict=True):
            lines += [f"## {title}", ""]
            others = [path for path in section.paths if path != _shortest(section.paths)]
            if others:
                lines += ["Also at " + ", ".join(f"`{path}`" for path in others) + ".", ""]
            if section.description:
                lines += [_one_line(section.description), ""]
            lines += ["| key | type | default | description |", "| --- | --- | --- | --- |"]
            lines += [f"| `{key}` | {linked(kind)} | {note} | {_cell(text)} |"
                      for key, kind, note, text in section.rows]
            lines.append("")
        return "\n".join(lines)


_LINK = "\x00{}\x00"  # where a section's link goes, once every path of it is known


def _shortest(paths: list[str]) -> str:
    return min(paths, key=lambda path: (path.count(".") + path.count("[]"), paths.index(path)))


def _title(section: _Section) -> str:
    """The section's shortest path, and for one of several kinds (`type: bearer`) that kind."""
    title = _shortest(section.paths) or "top level"
    kind = section.schema.get("properties", {}).get("type", {}).get("const")
    return f"{title} (type: {kind})" if kind else title


def _scalar(node: dict[str, Any]) -> str:
    kind = str(node.get("type", "any"))
    if "minimum" in node:
        return f"{kind} ≥ {node['minimum']}"
    if "exclusiveMinimum" in node:
        return f"{kind} > {node['exclusiveMinimum']}"
    return kind


def _default(node: dict[str, Any]) -> str:
    if "default" not in node or node["default"] in (None, [], {}, ""):
        return ""
    value = node["default"]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{json.dumps(value) if not isinstance(value, str) else value}`"


def _anchor(path: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    text = path or "top level"
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def _plural(kind: str) -> str:
    return kind + "s" if kind in ("string", "integer", "number", "boolean") else kind


def _unique(kinds: Any) -> list[str]:
    seen: list[str] = []
    for kind in kinds:
        if kind not in seen:
            seen.append(kind)
    return seen


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
