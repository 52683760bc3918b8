"""The api's paths a request quotes (gateway.offer.index's reading of a request, per api).

A token with a digit is an argument to the request's reading (an id, a version, an amount: `gateway.offer.arguments`),
so its words match nothing. Some such tokens are the api's own paths: Kubernetes' API groups and versions
(`networking.k8s.io/v1`, `batch/v1`), HERE Tracking's versioned paths (`/aliases/v2`), NetBox's `l2vpns` (`L2VPN`),
Graph's `oauth2PermissionGrants`. Every spec states its paths, so a token whose parts between slashes are all literal
segments of the api's paths is read there as the words of those segments, and the operation at that path (not one
under it) as the one the request names.

A developer also quotes an operation as the spec writes it, with its values in place of its parameters and the
server's base path before it, often after its method: "GET /api/dcim/interfaces/8812/", "PATCH /api/users/users/88/",
"GET Calls/CA5.json", "DELETE /v1/ephemeral_keys/ephkey_1", "GET /projects/{gid}". Such a token (it starts with a
slash, follows a method in capitals or writes a parameter in braces) is an operation's path when the path's last
segments are the token's, a parameter standing for any value; its literal segments' words are read as Kubernetes'
groups are, and the method before it, if any, is the one the request names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .query import STOP, singular, words

_QUOTE_MARKS = ",.;:?!()'\"`"
_POSSESSIVE = re.compile(r"['’]s$")
_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
_PARAMETER = re.compile(r"\{[^}/]*\}")
_DIGIT = re.compile(r"[0-9]")


@dataclass(slots=True, frozen=True)
class Quoted:
    """A path a request quotes: its parts between slashes, lower case (values where the spec has parameters), and
    the method in capitals before it, if any."""

    parts: tuple[str, ...]
    method: str = ""
    literal: tuple[str, ...] = ()
    """The parts that are literal segments of the api's paths (their words are the request's)."""
    plain: frozenset[str] = frozenset()
    """The other parts written as plain words, lower case ("delta" in `/applications/delta`): a word, not a value, so
    no parameter of a path stands for it (a value has a digit, a mark or capitals: 17, cus_Z, CA5.json, BR)."""


def _literals(path: str) -> set[str]:
    """The segments of one path that are no parameter, lower case."""
    return {segment.lower() for segment in path.split("/") if segment and not segment.startswith("{")}


def literal_segments(paths: Iterable[str]) -> frozenset[str]:
    """The segments of an api's paths that are no parameter, lower case, and each one's singular
    (`networking.k8s.io`, `v1`, `l2vpns` and `l2vpn`)."""
    found = {segment for path in paths for segment in _literals(path)}
    return frozenset(found | {singular(segment) for segment in found})


def quoted(query: str, segments: frozenset[str]) -> tuple[Quoted, ...]:
    """The api's paths the request quotes: a token with a digit and a letter whose parts between slashes are all
    `segments` (a segment or its singular: `l2vpn`), or two or more such parts (`calendarView/delta`); or a token
    written as a path (it starts with a slash, follows a method in capitals or has a parameter in braces) with one
    part or more among `segments` (`/api/users/tokens/17/`, `Calls/CA5.json`)."""
    found: list[Quoted] = []
    tokens = query.split()
    for position, token in enumerate(tokens):
        method = tokens[position - 1] if position and tokens[position - 1] in _METHODS else ""
        if not method and "/" not in token and "{" not in token and not _DIGIT.search(token):
            continue  # a plain word, the most of any request: none of the forms below
        said = _POSSESSIVE.sub("", token.strip(_QUOTE_MARKS)).partition("?")[0].strip(_QUOTE_MARKS)
        parts = tuple(part for part in said.lower().split("/") if part)
        if not parts:
            continue
        literal = tuple(part for part in parts if part in segments)
        written = said.startswith("/") or bool(method) or "{" in said
        digit = any(character.isdigit() for character in said) and any(character.isalpha() for character in said)
        if (len(literal) == len(parts) and (digit or len(parts) >= 2)) or (written and literal):
            plain = frozenset(part for part in said.split("/") if part.isalpha() and part.islower()) - set(literal)
            found.append(Quoted(parts, method if written else "", literal, plain))
    return tuple(dict.fromkeys(found))


def quoted_words(runs: tuple[Quoted, ...]) -> tuple[str, ...]:
    """The words of the quoted paths' literal segments, as the index reads a path: `networking`, `k8s`, `io`, `v1`."""
    return tuple(dict.fromkeys(word for run in runs for part in run.literal for word in words(part).split()
                               if word not in STOP))


def ends_with(method: str, path: str, runs: tuple[Quoted, ...]) -> bool:
    """Whether the path's last segments are one of the quoted paths' (of its method, when one was said):
    `/apis/batch/v1/` for `batch/v1`, `/api/ipam/l2vpns/` for `L2VPN`, `/users/tokens/{id}/` for
    `/api/users/tokens/17/`; not `/apis/batch/v1/jobs`, a path under it."""
    segments = [segment for segment in path.split("/") if segment]
    return any((not run.method or run.method == method) and _tail(segments, run) for run in runs)


def _tail(segments: list[str], run: Quoted) -> bool:
    """Whether the quoted parts are the path's last segments (or the path is the quoted token's last parts: a server's
    base path, `/api`, before it), at least one of them literal, a parameter standing for any value."""
    size = min(len(run.parts), len(segments)) if run.method or len(run.parts) > len(run.literal) else len(run.parts)
    if not size or size > len(segments):
        return False
    pairs = list(zip(run.parts[-size:], segments[-size:], strict=True))
    return (any("{" not in segment for _, segment in pairs)
            and all(_same(said, segment) and ("{" not in segment or said not in run.plain) for said, segment in pairs))


def _same(said: str, segment: str) -> bool:
    if "{" not in segment:
        lowered = segment.lower()
        return said in (lowered, singular(lowered))
    if "{" in said:  # the spec's own template, quoted: `/projects/{gid}`
        return True
    pattern = ".+".join(re.escape(piece.lower()) for piece in _PARAMETER.split(segment))
    return re.fullmatch(pattern, said) is not None


class QuotedRows:
    """The operations (row numbers from 0) whose paths end with a quoted path, found among those whose paths hold its
    last literal segment; the look-up is built on the first request that quotes a path."""

    def __init__(self, operations: Sequence[tuple[str, str]]) -> None:
        self._operations = operations
        """Each operation's method and path, in the index's order."""
        self._holding: dict[str, list[int]] | None = None

    def rows(self, runs: tuple[Quoted, ...]) -> list[int]:
        if self._holding is None:  # two threads may both build it: the same dict, assigned at once
            holding: dict[str, list[int]] = {}
            for at, (_, path) in enumerate(self._operations):
                for segment in _literals(path):
                    for said in {segment, singular(segment)}:
                        holding.setdefault(said, []).append(at)
            self._holding = holding
        found = {at for run in runs if run.literal for at in self._holding.get(run.literal[-1], ())
                 if ends_with(*self._operations[at], (run,))}
        return sorted(found)
