"""What a short word stands for in one api: initials of words of its names (a CRD is a custom resource definition, a
PVC a persistent volume claim) and the prefix of an id (`cus_42` is a customer, `pi_5` a payment intent, `acct_9` an
account), read from the api's own names and paths when its index is opened; and a request with them spelled out."""

from __future__ import annotations

import collections
import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence

from ..catalog import Tool
from .index_build import resources
from .query import STOP, Request, addressed_of, expression_of, singular, stems, words

_ACRONYM_WORDS = 4
_PREFIXED_ID = re.compile(r"^([A-Za-z]{2,5})_[A-Za-z0-9_]*[0-9][A-Za-z0-9_]*$")
"""An id that says its kind in a prefix before an underscore: cus_42, pi_3abc, acct_9, sub_sched_1 (hyphens join
names, not kinds: web-7f9c4 is a pod's name)."""

_NAME = re.compile(r"^[a-z][a-z0-9]*-[a-z0-9-]*[0-9][a-z0-9-]*[,.;:?!]?$")
"""A name with a hyphen and a digit (api-6d8b, web-7f9c4): what it says before its hyphen may be a kind (node-3) or
a part of the name."""


class Abbreviations:
    """The short words of one api's names and paths, made when first asked."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self._tools = tools
        self._initials: dict[str, str] | None = None
        self._resources: list[str] | None = None
        self._path_initials: dict[str, str] | None = None

    def spelled_out(self, acronym: str) -> str:
        """The words of its names whose initials `acronym` is (the most frequent), or ""."""
        if self._initials is None:
            self._initials = _initials(words(tool.operation_id or tool.name).split() for tool in self._tools)
        return self._initials.get(acronym, "")

    def kind_of(self, prefix: str) -> str:
        """What an id's prefix names: the resource of its paths whose words' initials it is (`pi`: payment intents),
        else (3 letters or more) the most frequent resource that begins with it (`cus`: customers) or abbreviates
        it, its letters in order (`acct`: accounts, `txn`: transactions); the words singular, or ""."""
        if self._resources is None or self._path_initials is None:
            counts: collections.Counter[str] = collections.Counter()
            runs = []
            for tool in self._tools:
                named = [words(segment) for segment in reversed(resources(tool.path))
                         if segment.isascii() and not any(character.isdigit() for character in segment)]
                counts.update(named)
                runs.append(" ".join(named).split())
            self._resources = [resource for resource, _ in counts.most_common()]
            self._path_initials = _initials(runs)
        prefix = prefix.lower()
        found = self._path_initials.get(prefix, "")
        if not found and len(prefix) >= 3:
            found = next((resource for resource in self._resources if resource.replace(" ", "").startswith(prefix)),
                         "") or next((resource for resource in self._resources
                                      if resource[0] == prefix[0] and _in_order(prefix, resource.replace(" ", ""))),
                                     "")
        return " ".join(singular(word) for word in found.split())


def _initials(runs: Iterable[list[str]]) -> dict[str, str]:
    """The most frequent run of 2 to `_ACRONYM_WORDS` words for each string of initials."""
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    for said in runs:
        for size in range(2, _ACRONYM_WORDS + 1):
            for start in range(len(said) - size + 1):
                run = said[start:start + size]
                if all(word.isalpha() and len(word) >= 2 for word in run):
                    counts["".join(word[0] for word in run), " ".join(run)] += 1
    spelled: dict[str, str] = {}
    for (initials, phrase), _ in counts.most_common():
        spelled.setdefault(initials, phrase)
    return spelled


def _in_order(letters: str, word: str) -> bool:
    remaining = iter(word)
    return all(letter in remaining for letter in letters)


def kinds_named(query: str, request: Request, abbreviations: Abbreviations, knows: Callable[[str], bool],
                addresses: Callable[[frozenset[str]], bool]) -> str:
    """`query` with each id whose prefix the api does not know as a word replaced by what the prefix names, when the
    request says none of its words already: "let go of the hold on pi_5" asks about a payment intent, "switch sub_12 to
    yearly" about a subscription; "customer cus_1" (the word before names it) is left as it is, and so is an id whose
kind the request says anywhere. A name with a hyphen beside a thing the api has is that thing's name, no word to
match: "kill pod api-6d8b" asks for no `api`."""
    tokens = query.split()
    changed = False
    for position, token in enumerate(tokens):
        beside = [tokens[at].lower().rstrip(",.;:?!") for at in (position - 1, position + 1) if 0 <= at < len(tokens)]
        if _NAME.match(token) and any(word not in STOP and word.isalpha() and addresses(frozenset(stems(word)))
                                      for word in beside):
            tokens[position] = ""  # "kill pod api-6d8b", "the orders-5d4f replicaset": a name, not the api's "api"
            changed = True
            continue
        prefixed = _PREFIXED_ID.match(token.rstrip(",.;:?!"))
        if prefixed is None or knows(prefixed.group(1).lower()):
            continue
        if position and tokens[position - 1].lower() not in STOP and knows(tokens[position - 1].lower()):
            continue  # "transfer tr_4", "customer cus_1": the word before names it
        kind = abbreviations.kind_of(prefixed.group(1))
        if kind and not stems(kind) & request.stems:
            tokens[position] = kind
            changed = True
    return " ".join(tokens) if changed else query


def spelled_out(request: Request, abbreviations: Abbreviations, knows: Callable[[str], bool]) -> Request:
    """`request` with each word in capitals the api does not know, that is the initials of words of its names, spelled
    out: "list the CRDs" asks for custom resource definitions, "is the PVC bound" for a persistent volume claim."""
    terms: list[tuple[str, ...]] = []
    things = request.things
    for alternatives in request.terms:
        word = alternatives[0]
        short = singular(word)
        phrase = (abbreviations.spelled_out(short) if word in request.capitals and 3 <= len(short) <= 5
                  and short.isalpha() and not knows(word) else "")
        if phrase:
            joined = phrase.replace(" ", "")
            alternatives = (*alternatives, phrase, joined)
            if short in things:
                things = things | {joined}
        terms.append(alternatives)
    if terms == request.terms:
        return request
    return dataclasses.replace(request, terms=terms, expression=expression_of(terms), things=things,
                               addressed=addressed_of(things, request.acts),
                               stems=request.stems | stems(" ".join(a for group in terms for a in group)))
