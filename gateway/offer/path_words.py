"""What tool search reads of the words of an api's paths (gateway.offer.signals).

The index computes a tool's words into its facts when it opens (`singulars`, `last_word`, `above`, `stem_of`); a
search still asks `names` of the resources it weighs, so a word's stem is kept once worked out (the words are the
api's own, so that cache stays as small as its vocabulary, bounded all the same), and a request's acts and things
(a few words) are kept per request.
"""

from __future__ import annotations

import functools

from .index_build import resources
from .query import singular, stems

WORDS_CACHED = 1 << 16
"""Entries per cache of an api's words."""


def names(word: str, things: frozenset[str]) -> bool:
    """Whether a resource's word is one of the things (its end: `persistentvolumeclaims` is a claim)."""
    return stem_of(word).endswith(suffixes(things))


@functools.lru_cache(maxsize=WORDS_CACHED)
def stem_of(word: str) -> str:
    return next(iter(stems(word)), word)


def singulars(resource: str) -> tuple[str, ...]:
    """The words of what a path addresses (`_Facts.resource`), each singular."""
    return tuple(singular(word) for word in resource.split())


def last_word(resource: str) -> str:
    return (resource.split() or [""])[-1]


def above(path: str) -> tuple[str, ...]:
    """The resources a path addresses its own under (`resources(path)[1:]`)."""
    return tuple(resources(path)[1:])


@functools.lru_cache(maxsize=256)
def prefixes(acts: tuple[str, ...]) -> tuple[str, ...]:
    """What a resource's word begins with when it is one of the acts (gateway.offer.signals' `_addresses`): an act
    of 3 letters or more, its first 5 (`accept`, `attachments` for "attach", `reviews` for "who reviewed")."""
    return tuple(act[:5] for act in acts if len(act) >= 3)


@functools.lru_cache(maxsize=256)
def suffixes(things: frozenset[str]) -> tuple[str, ...]:
    """The things a word can end with (`names`): those of 3 letters or more."""
    return tuple(thing for thing in things if len(thing) >= 3)
