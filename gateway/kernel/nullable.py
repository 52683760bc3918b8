"""How a JSON Schema also accepts null: the compiler's translation of OAS 3.0 `nullable` and OpenAI's strict
mode (an optional property becomes a required one that may be null) both need it."""

from __future__ import annotations

from typing import Any


def make_nullable(schema: dict[str, Any], *, lift_description: bool = False) -> dict[str, Any]:
    """`schema` also accepting null: `null` added to its `type` (and `enum`), else wrapped in an `anyOf`.

    `lift_description` keeps a wrapped schema's description beside the `anyOf`, where a model reads it
    (the OpenAI strict rendering wants that); an empty schema already accepts null and is returned as is.
    """
    kind = schema.get("type")
    if isinstance(kind, str):
        if kind != "null":
            schema["type"] = [kind, "null"]
    elif isinstance(kind, list):
        if "null" not in kind:
            schema["type"] = [*kind, "null"]
    else:
        if not schema:
            return schema
        description = schema.pop("description", None) if lift_description else None
        wrapped: dict[str, Any] = {"anyOf": [schema, {"type": "null"}]}
        if description:
            wrapped["description"] = description
        return wrapped
    enum = schema.get("enum")
    if enum is not None and None not in enum:
        schema["enum"] = [*enum, None]
    return schema
