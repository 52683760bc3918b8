"""An action the request's verb names (gateway.offer.index): many APIs write a change that is not a plain create,
replace or delete as a POST to a path that names it, `/workspaces/{gid}/removeUser`, `/stars.remove`,
`/groupLifecyclePolicies/{id}/microsoft.graph.removeGroup`, `/containers/{id}/restart`. A request whose verb is that
action ("take him out of the workspace": remove) asks for it, though its verb asks for another method (DELETE).

So an operation whose path ends with a segment that begins with the verb, and is not an item, answers with POST what
the verb asks, and such operations are candidates as those of the thing named are. A read (get, list, show) names no
action: the reads an api writes as functions are read as the verb's reads are. Written from the development
requests' misses on six APIs (bench/README.md, branch rank37)."""

from __future__ import annotations

READS = frozenset({"GET"})
"""The methods of a read: a request that only reads names no action (and reads its target: `gateway.offer.targets`)."""
_LETTERS = 5
"""How much of the verb an action's first word begins with: as much as of the verb's own resource
(`gateway.offer.path_words.prefixes`, which imports the index's build and so cannot be imported here: remove ->
`remov`, removeUser; close -> `close`, microsoft.graph.security.close)."""


def action_of(verb: str, methods: frozenset[str]) -> str:
    """The beginning of an action's first word that the request's `verb` (its root: remove, close, restart) names
    when it asks for a change (`methods`), else ""."""
    return verb[:_LETTERS] if len(verb) >= 3 and verb.isalpha() and methods and methods != READS else ""


def performs(action: str, method: str, item: bool, words: tuple[str, ...]) -> bool:
    """Whether an operation (its `method`, whether its path ends with a parameter, the words of what its path
    addresses) is the `action` (`action_of`): a POST to a path whose last segment begins with it."""
    return bool(action) and method == "POST" and not item and bool(words) and words[0].startswith(action)
