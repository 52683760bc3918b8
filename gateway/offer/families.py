"""Families of functions called on one path (gateway.offer.index's last step): Graph's 124 usage reports under
`/reports` (`/reports/microsoft.graph.getSharePointSiteUsagePages(period='{period}')`) are one family, which takes at
most `FAMILY_CAP` of the first `FAMILY_SPAN` places, so that "list the SharePoint sites" shows `/sites` among the
reports whose names say SharePoint site more often."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

FAMILY_CAP = 2
FAMILY_SPAN = 5

_T = TypeVar("_T")


def family_of(path: str) -> str:
    """The path a function is called on (`/reports` for `/reports/microsoft.graph.getX(period='{period}')`), else ""."""
    parent, _, last = path.rstrip("/").rpartition("/")
    return parent if "." in last and "(" in last else ""


def diversified(scored: list[tuple[_T, float]], family: Callable[[_T], str]) -> list[tuple[_T, float]]:
    """`scored` (best first) with at most `FAMILY_CAP` of one family among the first `FAMILY_SPAN`."""
    front: list[tuple[_T, float]] = []
    held: list[tuple[_T, float]] = []
    seen: dict[str, int] = {}
    for pair in scored:
        named = family(pair[0])
        if len(front) < FAMILY_SPAN and named and seen.get(named, 0) >= FAMILY_CAP:
            held.append(pair)
            continue
        if named:
            seen[named] = seen.get(named, 0) + 1
        front.append(pair)
    return front[:FAMILY_SPAN] + sorted(held + front[FAMILY_SPAN:], key=lambda pair: -pair[1])
