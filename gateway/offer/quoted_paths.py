"""The api's paths a request quotes (gateway.offer.index's reading of a request, per api).

A token with a digit is an argument to the request's reading (an id, a version, an amount: `gateway.offer.arguments`),
so its words match nothing. Some such tokens are the api's own paths: Kubernetes' API groups and versions
(`networking.k8s.io/v1`, `batch/v1`), HERE Tracking's versioned paths (`/aliases/v2`), NetBox's `l2vpns` (`L2VPN`),
Graph's `oauth2PermissionGrants`. Every spec states its paths, so a token whose parts between slashes are all literal
segments of the api's paths is read there as the words of those segments, and the operation at that path (not one
under it) as the one the request names.
"""

from __future__ import annotations

from collections.abc import Iterable

from .query import STOP, singular, words

_QUOTE_MARKS = ",.;:?!()'\"`"


def literal_segments(paths: Iterable[str]) -> frozenset[str]:
    """The segments of an api's paths that are no parameter, lower case, and each one's singular
    (`networking.k8s.io`, `v1`, `l2vpns` and `l2vpn`)."""
    found = {segment.lower() for path in paths for segment in path.split("/")
             if segment and not segment.startswith("{")}
    return frozenset(found | {singular(segment) for segment in found})


def quoted(query: str, segments: frozenset[str]) -> tuple[tuple[str, ...], ...]:
    """The runs of the api's path segments (`literal_segments`) the request quotes in a token with a digit and a
    letter: each of the token's parts between slashes is one of `segments` (a segment or its singular: `l2vpn`)."""
    found: list[tuple[str, ...]] = []
    for token in query.split():
        said = token.strip(_QUOTE_MARKS).lower()
        if not any(character.isdigit() for character in said) or not any(character.isalpha() for character in said):
            continue
        parts = tuple(part for part in said.split("/") if part)
        if parts and all(part in segments for part in parts):
            found.append(parts)
    return tuple(dict.fromkeys(found))


def quoted_words(runs: tuple[tuple[str, ...], ...]) -> tuple[str, ...]:
    """The words of the quoted runs, as the index reads a path: `networking`, `k8s`, `io`, `v1`."""
    return tuple(dict.fromkeys(word for run in runs for part in run for word in words(part).split()
                               if word not in STOP))


def ends_with(path: str, runs: tuple[tuple[str, ...], ...]) -> bool:
    """Whether the path's last segments are one of the quoted runs: `/apis/batch/v1/` for `batch/v1`,
    `/api/ipam/l2vpns/` for `L2VPN`; not `/apis/batch/v1/jobs`, a path under it."""
    segments = [segment.lower() for segment in path.split("/") if segment]
    return any(len(run) <= len(segments) and all(said in (segment, singular(segment)) for said, segment
                                                 in zip(run, segments[-len(run):], strict=True)) for run in runs)
