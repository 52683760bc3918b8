"""Copies of one operation in a search's answer: one entry each, its copies named with it.

Graph answers one operation at several addresses of one owner: `/me/messages/{id}/move` and
`/users/{id}/messages/{id}/move` (`/me` is the caller's own `/users/{id}`), and a team's channels under
`/teams/{id}`, `/groups/{id}/team`, `/me/joinedTeams/{id}` and `/users/{id}/joinedTeams/{id}`. Both rankers score
such copies alike (BM25 reads the same words, the model nearly the same text), so they took several of a search's
first places and left less room for other operations. Here each operation takes one place, at its best copy's rank
and score; the copies ranked after it are named with it (`copies`), and the places they held go to the next
operations.

Copies are tools of one api with the same method and the same path once such an owner prefix is read as one
(parameter names aside). Addresses of other owners (`/groups/{id}/events`, `/sites/{id}/lists`) are not copies: a
group's calendar answers other requests than a person's, and the request sets say so (bench/README.md, "Copies of one
operation in the first places"; the rule and the owners it reads were chosen there, on the development data).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Mapping, Sequence

from ..catalog import Catalog, Tool

_PERSON = re.compile(r"^/(?:me|users/\{[^}/]*\})(?=/|$)")
"""A person's prefix: the caller (`/me`) or anyone (`/users/{id}`)."""
_TEAM = re.compile(r"^/(?:teams/\{[^}/]*\}|groups/\{[^}/]*\}/team|(?:me|users/\{[^}/]*\})/joinedTeams/\{[^}/]*\})"
                   r"(?=/|$)")
"""A team's prefix: the team, its group's team, or a team a person joined."""
_PARAMETER = re.compile(r"\{[^}/]*\}")
_OWNERS = ("/me", "/users/", "/teams/", "/groups/")
"""Where a person's or a team's prefix can start: the expressions are asked only of these paths."""


def address(tool: Tool) -> str:
    """What the tool's copies share: its api, its method and its path with a person's or a team's prefix read as one
    and parameter names out (`graph GET /~me/messages/{}` for `/me/messages` and `/users/{user-id}/messages`): two
    apis' operations are never copies (Graph's v1.0 and beta beside each other answer apart)."""
    path = tool.path
    if path.startswith(_OWNERS):  # the expressions only where such a prefix can start
        read = _TEAM.sub("/~team", path, count=1)
        path = read if read != path else _PERSON.sub("/~me", path, count=1)
    return f"{tool.api} {tool.method} {_PARAMETER.sub('{}', path) if '{' in path else path}"


def addresses(catalog: Catalog) -> dict[str, str]:
    """Each tool's `address` by its name, made once per catalog: a search folds about a hundred tools, and their
    expressions cost more than the rest of the door's own work (Graph's 11,422 in about 15 ms, at its first search,
    which opens the api's index anyway)."""
    made = _ADDRESSES.get(catalog)
    if made is None:
        made = _ADDRESSES.setdefault(catalog, {tool.name: address(tool) for tool in catalog})
    return made


_ADDRESSES: weakref.WeakKeyDictionary[Catalog, dict[str, str]] = weakref.WeakKeyDictionary()


def fold(ranked: Sequence[tuple[Tool, float]], limit: int,
         known: Mapping[str, str] | None = None) -> list[tuple[Tool, float, list[Tool]]]:
    """The first `limit` operations of `ranked` (best first), each its best copy, that copy's score and the copies
    ranked after it (`known`: the tools' addresses by name, `addresses(catalog)`)."""
    entries: list[tuple[Tool, float, list[Tool]]] = []
    copies: dict[str, list[Tool]] = {}
    for tool, score in ranked:
        key = known[tool.name] if known is not None else address(tool)
        later = copies.get(key)
        if later is not None:
            later.append(tool)
            continue
        if len(entries) == limit:  # the copies of the entries already taken are still named with them
            continue
        copies[key] = []
        entries.append((tool, score, copies[key]))
    return entries
