"""What tool search reads of the words of an api's paths (gateway.offer.index's signals), once per word.

A search weighs about a hundred candidates, and Graph answers one operation under many copies of a path
(`/me/...`, `/users/{id}/...`), so the same resource words come back in every search: their stems, their singulars,
their last word and the resources a path sits under are worked out once per word (or path) and kept. The words are
the api's own, so the caches stay as small as its vocabulary (bounded all the same); a request's acts and things
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


@functools.lru_cache(maxsize=WORDS_CACHED)
def singulars(resource: str) -> tuple[str, ...]:
    """The words of what a path addresses (`_Facts.resource`), each singular."""
    return tuple(singular(word) for word in resource.split())


@functools.lru_cache(maxsize=WORDS_CACHED)
def last_word(resource: str) -> str:
    return (resource.split() or [""])[-1]


@functools.lru_cache(maxsize=WORDS_CACHED)
def above(path: str) -> tuple[str, ...]:
    """The resources a path addresses its own under (`resources(path)[1:]`)."""
    return tuple(resources(path)[1:])


@functools.lru_cache(maxsize=256)
def prefixes(acts: tuple[str, ...]) -> tuple[str, ...]:
    """What a resource's word begins with when it is one of the acts (gateway.offer.index's `_addresses`): an act
    of 3 letters or more, its first 5 (`accept`, `attachments` for "attach", `reviews` for "who reviewed")."""
    return tuple(act[:5] for act in acts if len(act) >= 3)


@functools.lru_cache(maxsize=256)
def suffixes(things: frozenset[str]) -> tuple[str, ...]:
    """The things a word can end with (`names`): those of 3 letters or more."""
    return tuple(thing for thing in things if len(thing) >= 3)
