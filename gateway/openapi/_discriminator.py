"""OAS 3.x `discriminator` beside a `oneOf`/`anyOf` of `$ref`s, in input schemas: each branch pins the discriminating
property to the values that route to it (the `mapping` keys that point at it, or its component name when none do:
the implicit mapping), so a value that would route to another schema is refused, as OpenAPI validators do.
"""

from __future__ import annotations

from typing import Any

from ._documents import Documents, RefError


def _component_name(pointer: str) -> str | None:
    """`Dog` for `/components/schemas/Dog`: the discriminator value that routes to it implicitly."""
    tokens = pointer.split("/")
    if len(tokens) != 4 or tokens[1:3] != ["components", "schemas"]:
        return None
    return tokens[3].replace("~1", "/").replace("~0", "~") or None


def pin_discriminator(node: dict[str, Any], out: dict[str, Any], file: str, documents: Documents) -> None:
    """Pin the discriminating property in each `$ref` branch of the union beside `discriminator`."""
    discriminator = node["discriminator"]
    name = discriminator.get("propertyName")
    key = "oneOf" if "oneOf" in out else "anyOf"
    raw_branches = node.get(key)
    if not isinstance(name, str) or not name or key not in out or not isinstance(raw_branches, list):
        return
    mapping = discriminator.get("mapping")
    targets: dict[tuple[str, str], list[str]] = {}
    for value, target in (mapping.items() if isinstance(mapping, dict) else ()):
        if not isinstance(target, str) or not value:
            continue
        if "/" not in target and "#" not in target:  # a bare schema name
            target = "#/components/schemas/" + target
        try:
            targets.setdefault(documents.split_ref(target, file), []).append(value)
        except RefError:
            continue
    taken = set(mapping) if isinstance(mapping, dict) else set()
    branches = []
    for raw, translated in zip(raw_branches, out[key], strict=True):
        values = None
        if isinstance(raw, dict) and isinstance(raw.get("$ref"), str):
            try:
                location = documents.split_ref(raw["$ref"], file)
            except RefError:
                location = None
            values = targets.get(location) if location is not None else None
            if values is None and location is not None:
                implicit = _component_name(location[1])
                values = [implicit] if implicit and implicit not in taken else None
        if not values:
            branches.append(translated)
            continue
        pin = {"const": values[0]} if len(values) == 1 else {"enum": values}
        branches.append({"allOf": [translated, {"properties": {name: pin}, "required": [name]}]})
    out[key] = branches
