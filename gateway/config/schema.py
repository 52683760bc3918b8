"""The JSON Schema (2020-12) of agents.yaml, made from the settings model: `gateway schema` prints it.

Editors use it for completion and checks (`# yaml-language-server: $schema=...` as the file's first line), and
the agents.yaml reference in docs/ is checked against it. It describes the file as written: wherever it checks
a value (a number, a boolean, a choice, a pattern), a `${VAR}` placeholder is accepted too, since the
environment fills it in at load time. The loader remains the judge of what the schema cannot say (names that
refer to each other, files, the specs).
"""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue
from pydantic_core import CoreSchema

from .model import Manifest

PLACEHOLDER: dict[str, Any] = {"type": "string", "pattern": r"^\$\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\}$",
                               "description": "`${VAR}` or `${VAR:-default}`: read from the environment at load"}


class FileSchema(GenerateJsonSchema):
    """pydantic's generator, where each checked value may also be written as a `${VAR}` placeholder."""

    def generate(self, schema: CoreSchema, mode: JsonSchemaMode = "validation") -> JsonSchemaValue:
        generated = _with_placeholders(super().generate(schema, mode=mode))
        return {"$schema": self.schema_dialect, **generated}


_SCALARS = ("integer", "number", "boolean")
_ANNOTATIONS = ("title", "description", "default", "examples")


def _with_placeholders(node: Any) -> Any:
    """`node` where each checked scalar (a number, a boolean, a choice, a pattern) may also be a placeholder."""
    if isinstance(node, list):
        return [_with_placeholders(item) for item in node]
    if not isinstance(node, dict) or node is PLACEHOLDER:
        return node
    node = {key: _with_placeholders(value) for key, value in node.items()}
    checked = node.get("type") in _SCALARS or "enum" in node or ("pattern" in node and node.get("type") == "string")
    if not checked:
        return node
    outer = {key: node.pop(key) for key in _ANNOTATIONS if key in node}
    return {**outer, "anyOf": [node, PLACEHOLDER]}


def agents_schema() -> dict[str, Any]:
    """The JSON Schema of agents.yaml."""
    return Manifest.model_json_schema(by_alias=True, mode="validation", schema_generator=FileSchema)
