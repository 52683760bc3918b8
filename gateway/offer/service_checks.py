"""A service's own check: where a request names one of an api's services and asks whether it answers, or which
version it runs, that service's health (or version) operation is lifted to the first places.

HERE Tracking is twenty-five services, each with its own `GET /{service}/{v}/health` and `/version` ("Gets service
health"). A dispatcher asks "is the shipments service up", "could HERE's event side be down", "which release of the
bulk jobs API are we hitting": BM25 reads the service's name in each of its ten operations and "up", "down" or
"release" in none, so the check ranked 6th to 20th, under the service's reads (bench/README.md, "The misses nobody's
words reach": 12 of `round26`..`round28`'s 204 fused misses, 35 of BM25 alone's 496, were such checks). Nothing per
api is listed: the checks are read from the spec, the words that ask are the language's.

- **A check** (`ServiceChecks`): a GET with no parameter in its path whose last segment is `health`, `healthz`,
  `livez`, `readyz`, `ping`, `status` (a health check) or `version`, else whose summary says health, ping or version.
  Its service: the words of its path's other segments (a version segment such as `v3` apart; segments in half the
  api's paths out, Jira's `rest`, `api`) and of its tags, less the check's own words: Kubernetes' `/version/`, tagged
  `version`, names no service, so "which version of apps/v1 is served" asks no check.
- **Asked** (`ServiceChecks.asked`): the request says the service is up, down, alive, healthy, running, answering,
  responding, reachable or online (a health check), or asks its version, release or build; and its words hold one of
  a service's (stemmed as `gateway.offer.query.stems` stems them). The check of that kind under the service with the
  most of its words held is asked (a version the request names, `v3`, breaks a tie); none when two services still
  tie ("the sensor rules service": `sensors` and `rules` are both HERE services).

The index then scores the check asked at `Weights.service_check` times the api's first score (where it was not
already above), so both rankers read it first (`gateway.offer.index`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from ..catalog import Tool
from .query import stems

CHECK_SEGMENTS = {"health": "health", "healthz": "health", "livez": "health", "readyz": "health", "ping": "health",
                  "status": "health", "version": "version"}
"""A check by its path's last segment (letters only: Docker's `_ping`), and what it answers."""
ASKS = {**dict.fromkeys(("up", "down", "alive", "healthy", "health", "running", "answering", "responding",
                         "reachable", "online"), "health"),
        **dict.fromkeys(("version", "release", "build"), "version")}
"""A request's words that ask whether a service answers, or which version it runs."""
_SUMMARY = re.compile(r"\b(health|ping|version)\b")
_VERSION = re.compile(r"^v\d+$")
_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"([a-z])([A-Z])")


def _words(text: str) -> str:
    """A path segment's or a tag's words: `device-associations`, `Bulk jobs`, `deviceUploads`."""
    return _CAMEL.sub(r"\1 \2", text).replace("-", " ").replace("_", " ").lower()


def answered_by(tool: Tool) -> str | None:
    """What the tool checks of its service ("health" or "version"), or None when it is no check (the module's)."""
    literal = [segment for segment in tool.path.split("/") if segment]
    if tool.method != "GET" or "{" in tool.path or not literal:
        return None
    said = _SUMMARY.search((tool.summary or "").lower())
    answers = CHECK_SEGMENTS.get(re.sub(r"[^a-z]", "", literal[-1].lower())) or (said.group(1) if said else None)
    return None if answers is None else "version" if answers == "version" else "health"


class ServiceChecks:
    """An api's service checks (the module's), read once when its index is opened."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        segments = Counter(segment for tool in tools for segment in {s for s in tool.path.split("/") if s})
        common = {segment for segment, count in segments.items() if count > len(tools) / 2}
        self.checks: list[tuple[int, str, frozenset[str], str]] = []
        """Each check's place among `tools`, what it answers, its service's stems and its version segment."""
        for at, tool in enumerate(tools):
            answers = answered_by(tool)
            if answers is None:
                continue
            literal = [segment for segment in tool.path.split("/") if segment]
            service = " ".join(_words(text) for text in (*literal[:-1], *tool.tags)
                               if text not in common and not _VERSION.match(text))
            # named by other words than the check's own: Kubernetes' `/version/` (tagged `version`) names no service
            named = frozenset(stems(service) - stems(" ".join((literal[-1], *ASKS))))
            if named:
                version = next((segment for segment in literal if _VERSION.match(segment)), "")
                self.checks.append((at, answers, named, version))

    def asked(self, query: str) -> int | None:
        """The place among the api's tools of the check the request asks for, or None."""
        if not self.checks:
            return None
        said = _WORD.findall(query.lower())
        kinds = {ASKS[word] for word in said if word in ASKS}
        if not kinds:  # most requests: no word asks whether something answers
            return None
        held = stems(query)
        best: list[tuple[float, int, frozenset[str]]] = []
        for at, answers, service, version in self.checks:
            if answers in kinds and service & held:
                best.append((len(service & held) + (0.5 if version and version in said else 0.0), at, service))
        if not best:
            return None
        best.sort(key=lambda found: -found[0])
        if len(best) > 1 and best[1][0] == best[0][0] and best[1][2] != best[0][2]:
            return None  # two services hold as many of its words: neither is named
        return best[0][1]
