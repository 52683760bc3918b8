"""`ByIdentity`: what is derived once from an object the derivation does not own, kept by the object's identity.

A tool's chain of stages and a door's plan for it are derived from an `AgentTool`, which is neither hashable nor
owned by what derives from it, and lives as long as its generation. Each entry keeps its object alive beside the
value, so an id is never reused while its entry stands; a door that makes objects per request (code mode's tools)
cannot grow the table past `limit` (it is emptied then, and values are derived again).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class ByIdentity(Generic[K, V]):
    """Values by the identity of their object, each derived once by `derive` (at most `limit` kept)."""

    __slots__ = ("_derive", "_items", "limit")

    def __init__(self, derive: Callable[[K], V], limit: int = 4096) -> None:
        self._derive = derive
        self._items: dict[int, tuple[K, V]] = {}
        self.limit = limit

    def __call__(self, key: K) -> V:
        kept = self._items.get(id(key))
        if kept is not None and kept[0] is key:
            return kept[1]
        if len(self._items) >= self.limit:
            self._items.clear()
        value = self._derive(key)
        self._items[id(key)] = (key, value)
        return value
