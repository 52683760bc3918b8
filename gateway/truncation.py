"""A result cut to a size, with a marker saying how much was left out: text at a line or word boundary, JSON
keeping whole array items and object fields (the executor's results, code mode's script results)."""

from __future__ import annotations

from typing import Any

import orjson

CUT_NOTE = ("[truncated: the answer was longer than the gateway's limit (max_result_bytes); for the rest, ask for "
            "a smaller page: a filter, or a page-size argument if the tool has one]")
"""What a model reads after a cut answer, on every door (chat, Responses, MCP, an enforced schema's error too)."""


def cut_text_at_boundary(text: str, max_bytes: int, total: int, *, at_least: bool = False) -> tuple[str, bool]:
    """`text` cut to about `max_bytes` of UTF-8 at a line or word boundary, with a marker naming what of `total`
    bytes was left out (`at_least`: the total is a lower bound)."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes and not at_least:
        return text, False
    budget = max(max_bytes - 80, 0)
    head = encoded[:budget].decode("utf-8", errors="ignore")
    for separator, share in (("\n", 0.8), (" ", 0.9)):
        index = head.rfind(separator)
        if index >= share * len(head):
            head = head[:index]
            break
    left = max(total - len(head.encode("utf-8")), 0)
    amount = f"at least {left}" if at_least else str(left)
    return f"{head}\n[… truncated: {amount} of {'at least ' if at_least else ''}{total} bytes left out]", True


def _size(value: Any) -> int:
    return len(orjson.dumps(value))


def shrink_json(value: Any, max_bytes: int) -> tuple[Any, bool]:
    """`value` cut to about `max_bytes` of JSON, keeping whole items and fields, plus markers."""
    if _size(value) <= max_bytes:
        return value, False
    return _shrink(value, max_bytes), True


def _shrink(value: Any, budget: int) -> Any:
    if isinstance(value, list):
        kept: list[Any] = []
        used = 2
        reserve = 80
        for index, item in enumerate(value):
            size = _size(item) + 1
            if used + size > budget - reserve:
                if not kept and budget - reserve - used > 200 and isinstance(item, (list, dict, str)):
                    kept.append(_shrink(item, budget - reserve - used))
                    index += 1
                rest = value[index:]
                if rest:
                    kept.append(f"[… truncated: {len(rest)} more items ({_size(rest)} bytes) left out]")
                return kept
            kept.append(item)
            used += size
        return kept
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        used = 2
        reserve = 100
        items = list(value.items())
        for index, (key, item) in enumerate(items):
            size = _size(key) + _size(item) + 2
            if used + size > budget - reserve:
                room = budget - reserve - used - _size(key) - 2
                if room > 200 and isinstance(item, (list, dict, str)):
                    out[key] = _shrink(item, room)
                    index += 1
                rest = items[index:]
                if rest:
                    left = sum(_size(k) + _size(v) + 2 for k, v in rest)
                    out["_truncated"] = f"{len(rest)} more fields ({left} bytes) left out"
                return out
            out[key] = item
            used += size
        return out
    if isinstance(value, str):
        text, _ = cut_text_at_boundary(value, max(budget, 100), len(value.encode("utf-8")))
        return text
    return value
