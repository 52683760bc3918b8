"""How deep the JSON the gateway reads may nest: a request's body, a model's arguments, an upstream's answer.

orjson reads documents up to 1,024 levels deep, Python's own parser up to about 1,000, but the gateway's code that
walks a value (redaction, the audit's copy, a stored Response's shape, error texts) is Python and recurses a frame
or two a level, within Python's recursion limit of 1,000 frames, some of which the server's own stack holds. So a
body of 500 nested lists, read fine, was a RecursionError later: a 500 answer to a caller's request, a whole chat
run lost to an upstream's answer. Nothing real nests that deep (a tool's arguments a few levels; a JSON Schema of
60 levels is 120 of JSON), so what nests deeper than `MAX_DEPTH` is refused where it is read, with a reason.

`MAX_DEPTH` is what orjson writes (it refuses a deeper value), so the check is orjson writing the value, in C: a
walk in Python cost more than the parse itself on a body of 600,000 empty lists (531 against 305 ms).
"""

from __future__ import annotations

from typing import Any

import orjson

MAX_DEPTH = 254
"""Levels of nested arrays and objects the gateway reads (the document itself is level 1): what orjson writes."""


def too_deep(value: Any, raw: bytes | str | None = None) -> bool:
    """Whether parsed JSON `value` nests more than `MAX_DEPTH` arrays and objects deep. `raw`, its text when at
    hand, answers at once for the usual document: one with no more brackets than that cannot nest deeper."""
    if raw is not None:
        brackets = raw.count("[") + raw.count("{") if isinstance(raw, str) else raw.count(b"[") + raw.count(b"{")
        if brackets <= MAX_DEPTH:
            return False
    if not isinstance(value, dict | list):
        return False
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        # Deeper than orjson writes, or holding what it does not write (an integer past 64 bits, which Python's
        # parser reads): the walk tells which. Rare: only such documents pay for it.
        return _deeper(value)
    return False


def _deeper(value: Any) -> bool:
    """A walk with a stack of its own (a recursive one would meet the very limit it is here to keep)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False
