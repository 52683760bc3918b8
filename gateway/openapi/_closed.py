"""Closed objects that no instance could satisfy, read the way the spec means them.

`additionalProperties: false` only sees the `properties` written beside it, never those an `allOf`
brings. So the shape ShipEngine uses on most of its request bodies,

    {additionalProperties: false, allOf: [{$ref: package_type}], required: [name, package_code]}

read strictly refuses every object (`name` is "unexpected" at that level, yet required by it), and
the model could never call the operation; validators such as Prism accept it, as the author meant. The
translator therefore merges the properties and `required` names of the `allOf` members (followed
through `$ref`s and nested `allOf`s) into the level that closes the object, with a warning; a member
that also says something else (`oneOf`, `enum`, a non-object `type`, ...) stays in the `allOf` too.
The same holds for a `oneOf`/`anyOf` beside the closure whose branches declare properties: they are
declared at the closed level as well, and a name the level requires but only branches declare is
required by those branches instead (ShipEngine's "a shipment_id or a shipment").

`gather_all_of` does the reading of the raw members, `closed_composition` what they bring beyond the
object's own properties; `_schema.SchemaTranslator` does the translating.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._documents import Documents, RefError

_MERGEABLE = frozenset({
    "properties", "required", "type", "title", "description", "allOf", "additionalProperties", "example",
    "examples", "nullable", "x-nullable", "deprecated", "discriminator", "xml", "externalDocs", "$comment",
})
"""Keywords of an `allOf` member that merging keeps the meaning of; any other keeps the member in the `allOf`."""


@dataclass(slots=True)
class Members:
    """What the `allOf` members of a closed object bring to it."""

    properties: dict[str, tuple[Any, str, str]] = field(default_factory=dict)
    """Property name -> (raw schema, the file and pointer of the schema whose `properties` declare it); the first
    member to declare a name wins."""
    required: list[str] = field(default_factory=list)
    leftovers: list[tuple[Any, str, str]] = field(default_factory=list)
    """Members (as written, with their file and pointer) that say more than properties: they stay in the `allOf`."""


def gather_all_of(members: list[Any], file: str, documents: Documents, at: list[str] | None = None) -> Members:
    """The properties, required names and non-mergeable members of an `allOf` list met in `file`; `at`: each
    member's pointer in `file` (so a warning about what it brings is told where that is written).

    Raises `RefError` for a member reference that cannot be followed.
    """
    found = Members()
    seen: set[tuple[str, str]] = set()
    places = at if at is not None else [""] * len(members)
    work = [(member, file, place) for member, place in zip(reversed(members), reversed(places), strict=True)]
    while work:
        member, member_file, place = work.pop()
        target, target_file, pointer = documents.resolve(member, member_file)
        if pointer:
            if (target_file, pointer) in seen:  # a member reached twice (or a cycle): once is enough
                continue
            seen.add((target_file, pointer))
        if not isinstance(target, dict):
            continue
        if not _mergeable(target):
            found.leftovers.append((member, member_file, place))
        written = pointer if pointer else place  # where the target is: its `$ref`'s, else where the member is
        properties = target.get("properties")
        for name, schema in properties.items() if isinstance(properties, dict) else ():
            found.properties.setdefault(str(name), (schema, target_file, written))
        required = target.get("required")
        if isinstance(required, list):
            found.required.extend(name for name in required if isinstance(name, str))
        nested = target.get("allOf")
        if isinstance(nested, list):
            work.extend((child, target_file, f"{written}/allOf/{index}")
                        for index, child in reversed(list(enumerate(nested))))
    return found


def _mergeable(schema: dict[str, Any]) -> bool:
    kind = schema.get("type", "object")
    if kind != "object" and not (isinstance(kind, list) and "object" in kind):
        return False
    return all(key in _MERGEABLE or key.startswith("x-") for key in schema)


def hidden(schema: Any, flag: str, documents: Documents, file: str) -> bool:
    """True when a property schema (or the schema its `$ref` names) carries `flag` (readOnly / writeOnly)."""
    if not isinstance(schema, dict):
        return False
    if schema.get(flag) is True:
        return True
    if "$ref" in schema:
        target = documents.resolve(schema, file)[0]
        return isinstance(target, dict) and target.get(flag) is True
    return False


def closed_composition(
    node: dict[str, Any], file: str, documents: Documents, where: str = "",
) -> tuple[Members, dict[str, Any], dict[str, list[set[str]]]] | None:
    """What the `allOf` members and `oneOf`/`anyOf` branches of a closed object (at `where` in `file`) declare
    beyond its own properties; None when they declare nothing more (the object is read as written). Raises
    `RefError`."""
    all_of = node.get("allOf") or []
    members = gather_all_of(all_of, file, documents, [f"{where}/allOf/{index}" for index in range(len(all_of))])
    branches = gather_all_of([], file, documents)
    per_branch: dict[str, list[set[str]]] = {}
    for key in ("oneOf", "anyOf"):
        for index, branch in enumerate(node.get(key) or () if isinstance(node.get(key), list) else ()):
            declared = gather_all_of([branch], file, documents, [f"{where}/{key}/{index}"]).properties
            per_branch.setdefault(key, []).append(set(declared))
            for name, found in declared.items():
                branches.properties.setdefault(name, found)
    own = node["properties"] if isinstance(node.get("properties"), dict) else {}
    if not isinstance(node.get("allOf"), list) and not set(branches.properties) - set(own):
        return None
    return members, {name: found for name, found in branches.properties.items() if name not in own}, per_branch


def require_in_branches(out: dict[str, Any], names: list[str], per_branch: dict[str, list[set[str]]]) -> None:
    """Each branch that declares some of `names` requires them (the branches are shared: wrapped, not changed)."""
    for key, declared in per_branch.items():
        branches = out.get(key)
        if not isinstance(branches, list) or len(branches) != len(declared):
            continue
        for index, names_here in enumerate(declared):
            wanted = [name for name in names if name in names_here]
            if wanted:
                branches[index] = {"allOf": [branches[index], {"required": wanted}]}


def drop_undeclared(out: dict[str, Any]) -> list[str]:
    """Required names that a closed object does not declare can never be sent: not required. The names dropped
    (the translator warns about them)."""
    declared = out.get("properties") or {}
    undeclared = [name for name in out["required"] if name not in declared]
    if not undeclared:
        return undeclared
    kept = [name for name in out["required"] if name in declared]
    if kept:
        out["required"] = kept
    else:
        del out["required"]
    return undeclared


def drop_hidden_required(node: dict[str, Any], out: dict[str, Any], file: str, flag: str,
                         documents: Documents) -> None:
    """Required names that an `allOf` member declares `flag` (readOnly for input, writeOnly for output) apply to
    the other direction only (OAS 3.0): not required here."""
    own = out.get("properties") or {}
    candidates = [name for name in out["required"] if name not in own]
    if not candidates:
        return
    try:
        members = gather_all_of(node["allOf"], file, documents)
        gone = {name for name in candidates if name in members.properties
                and hidden(members.properties[name][0], flag, documents, members.properties[name][1])}
    except RefError:
        return
    if gone:
        kept = [name for name in out["required"] if name not in gone]
        if kept:
            out["required"] = kept
        else:
            del out["required"]
