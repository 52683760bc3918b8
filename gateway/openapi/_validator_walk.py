"""How long openapi-spec-validator would walk a spec's schemas, found before it is asked to.

For each schema it checks, the validator collects every property name reachable through `allOf`, `anyOf`,
`oneOf`, `items` and `not` (`SchemaValidator._collect_properties`), following `$ref`s, without remembering a schema
it has seen. So a schema reached by two branches, level after level, is walked 2**depth times: a 1 KB spec of
`S_i: {allOf: [S_i+1, S_i+1]}` 14 levels deep held `gateway validate` 21 s, 16 levels 63 s, 18 levels 266 s
(redteam47). `costly_walk` counts that walk for every schema of a document, each schema once (memoized, cycles
counted once), and names the first whose walk passes `MAX_WALK` steps: full validation is then skipped, saying
where; the compiler's own checks still run (and its ambiguity warning names the same schemas).
"""

from __future__ import annotations

from typing import Any

from ._documents import Documents, RefError, escape_token

MAX_WALK = 2_000
"""Schemas one property collection of the validator may visit: at about half a millisecond a step there, 1 s (the
corpus's specs reach 71 at most: GitHub's)."""
_BRANCHES = ("allOf", "anyOf", "oneOf")


def costly_walk(document: Any, documents: Documents, file: str) -> str | None:
    """The JSON pointer (in `file`) of a schema whose walk by the validator passes `MAX_WALK`, or None."""
    counts: dict[int, int] = {}
    stack: list[tuple[Any, str, str]] = [(document, file, "")]
    while stack:
        node, where, pointer = stack.pop()
        if isinstance(node, dict):
            target, target_file, at = _target(node, documents, where)  # one in another file is walked from here
            if target is not None and _is_schema(target) and _walk(target, documents, target_file, counts) > MAX_WALK:
                return at if at and target_file == file else pointer  # where the schema itself is written
            stack.extend(reversed([(value, where, f"{pointer}/{escape_token(str(key))}") for key, value
                                   in node.items() if isinstance(value, dict | list)]))  # in the file's order
        elif isinstance(node, list):
            stack.extend(reversed([(value, where, f"{pointer}/{index}") for index, value in enumerate(node)
                                   if isinstance(value, dict | list)]))
    return None


def _target(node: dict[str, Any], documents: Documents, file: str) -> tuple[dict[str, Any] | None, str, str]:
    """The schema `node` is (its `$ref`s followed), its file and pointer ("" when `node` is no reference)."""
    if "$ref" not in node:
        return node, file, ""
    try:
        target, target_file, pointer = documents.resolve(node, file)
    except RefError:
        return None, file, ""
    return (target, target_file, pointer) if isinstance(target, dict) else (None, file, "")


def _is_schema(node: dict[str, Any]) -> bool:
    return any(key in node for key in _BRANCHES) or "items" in node or "not" in node


def _children(node: Any, documents: Documents, file: str) -> list[tuple[Any, str]]:
    """The schemas the validator's collection goes on to from `node` (each `$ref` followed), with their files."""
    found: list[tuple[Any, str]] = []
    parts = [item for key in _BRANCHES if isinstance(node.get(key), list) for item in node[key]]
    parts += [node[key] for key in ("items", "not") if isinstance(node.get(key), dict)]
    for part in parts:
        if isinstance(part, dict):
            target, target_file, _ = _target(part, documents, file)  # a broken `$ref`: the validator says so
            if target is not None:
                found.append((target, target_file))
    return found


def _walk(start: dict[str, Any], documents: Documents, file: str, counts: dict[int, int]) -> int:
    """Schemas one collection from `start` visits: 1 + its children's, each worked out once (no recursion: a
    chain of references may be thousands long). A schema met again while it is being worked out counts 1."""
    if id(start) in counts:
        return counts[id(start)]
    open_nodes: set[int] = set()
    stack: list[tuple[dict[str, Any], str, bool]] = [(start, file, False)]
    while stack:
        node, where, expanded = stack.pop()
        key = id(node)
        if expanded:
            total = 1
            for child, _ in _children(node, documents, where):
                total += counts.get(id(child), 1)
                if total > MAX_WALK:
                    break
            counts[key] = min(total, MAX_WALK + 1)
            open_nodes.discard(key)
            continue
        if key in counts or key in open_nodes:
            continue
        open_nodes.add(key)
        stack.append((node, where, True))
        stack.extend((child, child_file, False) for child, child_file in _children(node, documents, where)
                     if id(child) not in counts and id(child) not in open_nodes)
    return counts[id(start)]
