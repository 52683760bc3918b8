"""Two kinds of question a request can be, read off its words alone (gateway.offer.query): how much or how many
over a stretch of time, which a usage report answers, and who may do something, which a permission answers."""

from __future__ import annotations

import re
from collections.abc import Iterable

USAGE = ("activity", "usage", "report")
"""The words of a usage report, which answers how much or how many over a stretch of time."""
_PERIODS = frozenset("day days week weeks month months quarter quarters year years today yesterday".split())
_AMOUNTS = frozenset("many much often usage activity".split())


def asks_over_period(words: Iterable[str]) -> bool:
    """Whether a request of these (lower-case) words asks how much or how many over a stretch of time ("how many
    emails did people send last month")."""
    said = set(words)
    return bool(said & _PERIODS) and bool(said & _AMOUNTS)


PERMISSION = ("permission", "access")
"""The words of what answers who may do something."""
_ASKING = re.compile(r"^\s*(?:who\s+can\s+(?!be\b)\w|can\s+i\b|am\s+i\s+allowed\b)", re.IGNORECASE)
"""A question of who may do something: "who can see this file", "can I delete pods" (not "who can be assigned":
who is assignable)."""


def asks_permission(query: str) -> bool:
    """Whether `query` asks who may do something (`_ASKING`)."""
    return bool(_ASKING.match(query))
