"""How deep the JSON the gateway reads may nest: a request's body, a model's arguments, an upstream's answer.

orjson reads documents up to 1,024 levels deep, Python's own parser up to about 1,000, but the gateway's code that
walks a value (redaction, the audit's copy, a stored Response's shape, error texts) is Python and recurses a frame
or more a level, within Python's recursion limit of 1,000 frames, some of which the server's own stack holds. So
a body of 500 nested lists, read fine, was a RecursionError later: a 500 answer to a caller's request, a whole chat
run lost to an upstream's answer. Nothing real nests that deep (a tool's arguments a few levels; a JSON Schema of
60 levels is 120 of JSON), so what nests deeper than `MAX_DEPTH` is refused where it is read, with a reason.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 128
"""Levels of nested arrays and objects the gateway reads (the document itself is level 1)."""


def too_deep(value: Any, raw: bytes | str | None = None, limit: int = MAX_DEPTH) -> bool:
    """Whether parsed JSON `value` nests more than `limit` arrays and objects deep. `raw`, its text when at hand,
    answers at once for the usual document: one with no more brackets than `limit` cannot nest deeper."""
    if raw is not None:
        if isinstance(raw, str):
            if raw.count("[") + raw.count("{") <= limit:
                return False
        elif raw.count(b"[") + raw.count(b"{") <= limit:
            return False
    if not isinstance(value, dict | list):
        return False
    # Iterative, level by level: a walk that recursed would meet the very limit it is here to keep.
    level: list[Any] = [value]
    depth = 1
    while level:
        if depth > limit:
            return True
        below: list[Any] = []
        for item in level:
            children = item.values() if isinstance(item, dict) else item
            below.extend(child for child in children if isinstance(child, dict | list))
        level = below
        depth += 1
    return False
