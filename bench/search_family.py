"""A request's hard negatives from its right operation's own family in the spec, by structure alone (#30, branch
train36; `python bench/search_finetune.py train --negatives family [--hard N]`).

The misses left on the judges are mostly siblings of the right operation: on Kubernetes another kind of the same
group first, and writes ranked above the watch for a stream of changes; on Graph the same operation under another
owner; on GitHub and Stripe an org's setting for a repo's, or another verb on a sub-resource. Until now a request
trained against its batch's tools and the unchanged model's best tool that is not a right one, which is a sibling
only when the model already confuses the two. Here the siblings are read off the spec.

A tool's *shape* is its path read as steps: a literal segment together with the parameters that follow it
(`/repos/{owner}/{repo}/issues/{issue_number}/labels` is `repos/{}/{}`, `issues/{}`, `labels`; a parameter's name
says nothing of the structure). A step is how a path names one thing (the repo, the issue, the labels), so an owner
written with one parameter or two, or an item and its collection, are one step apart. The *distance* between two
tools of one spec is the fewest step edits (insert, delete or replace one) from one shape to the other, plus one
when their methods differ. A tool's *family* is the tools at distance 1 or 2; each kind of sibling the misses show is
at distance 1:

- the same path with another method (a label put on an issue, or all of them taken off);
- the same method on a sibling path: the same parent with another last step (`namespaces/{}`, `jobs` and
  `cronjobs`), the same template with another resource (`issues/{}`, `labels` and `pulls/{}`, `labels`), an item
  and its collection (`pods/{}` and `pods`), a sub-resource and its owner (`customers/{}`, `sources` and
  `customers/{}`);
- the same operation in another scope or API version: `orgs/{}` or `repos/{}/{}` before `actions`, `permissions`;
  `me` or `groups/{}` before `events`; a namespace's pods or every namespace's (`namespaces/{}` left out);
  `batch`, `v1` or `batch`, `v1beta1`; the watch of a list (`watch` put in);

and at distance 2 the mixes: another method on a sibling path (the create beside the watch; the label taken off
beside the labels' list), another scope's sibling.

Never a negative: a request's own operations, and the copies of one (`gateway.offer.copies.address`: one operation
at a person's two addresses, `/me/...` and `/users/{}/...`), which the product answers in one place and the request
sets do not all name: training them apart would fight that fold and teach the model that a right answer is wrong.

Order and cap: the family of every operation of the request, each tool at its distance to the nearest of them; the
nearest first, and among tools at one distance the unchanged model's highest scored for the request first (then the
spec's order); at most `count`. Nearest first because that is the question (does the model learn the spec's
structure?); the model orders a tier because a tier is often larger than the cap (Stripe's retrieve of one object
has every other object's retrieve at distance 1, Slack's flat methods are each other's siblings), and with the
loss's temperature of 0.05 a negative the model already puts well below the right tool adds almost nothing to the
softmax (a cosine 0.15 lower weighs e^-3 of the right tool's term). Nothing here reads a word of a tool or a request:
the family is the spec's paths and methods, and the model's scores only order a tier the structure chose.
Deterministic (a stable sort, the spec's order last).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import combinations
from typing import Any

from gateway.catalog import Tool
from gateway.offer.copies import address

REACH = 2
"""The largest distance of a family member."""


def shape(path: str) -> tuple[str, ...]:
    """A path's steps: each literal segment with the parameters after it (`{owner}`, a segment holding one such as
    `{name}.json`, read as `{}`); a parameter with no literal before it is a step of its own."""
    steps: list[str] = []
    for segment in path.strip("/").split("/"):
        if not segment:
            continue
        if "{" in segment and steps:
            steps[-1] += "/{}"
        else:
            steps.append("{}" if "{" in segment else segment)
    return tuple(steps)


def edits(first: Sequence[str], second: Sequence[str]) -> int:
    """The fewest step insertions, deletions and replacements that turn `first` into `second` (Levenshtein)."""
    previous = list(range(len(second) + 1))
    for i, a in enumerate(first, start=1):
        current = [i]
        for j, b in enumerate(second, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a != b)))
        previous = current
    return previous[-1]


def _deletions(steps: tuple[str, ...], depth: int) -> set[tuple[str, ...]]:
    """`steps` with every choice of at most `depth` of them left out: two shapes within `depth` edits of each other
    share one (a replacement is a deletion on each side), so this finds the candidates without comparing every pair
    (Graph has 11,422 tools)."""
    return {tuple(s for k, s in enumerate(steps) if k not in gone)
            for size in range(min(depth, len(steps)) + 1) for gone in combinations(range(len(steps)), size)}


class Family:
    """The structural neighbours of one API's tools (`tools` in the order the training indexes them)."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.methods = [tool.method for tool in tools]
        self.shapes = [shape(tool.path) for tool in tools]
        self.addresses = [address(tool) for tool in tools]
        self._by_key: dict[tuple[str, ...], list[int]] = {}
        for i, steps in enumerate(self.shapes):
            for key in _deletions(steps, REACH):
                self._by_key.setdefault(key, []).append(i)
        self._near: dict[int, dict[int, int]] = {}

    def near(self, tool: int) -> dict[int, int]:
        """The tools within `REACH` of `tool` (itself excluded), each with its distance."""
        found = self._near.get(tool)
        if found is None:
            steps, method = self.shapes[tool], self.methods[tool]
            candidates = {other for key in _deletions(steps, REACH) for other in self._by_key.get(key, ())}
            found = {}
            for other in sorted(candidates - {tool}):
                distance = edits(steps, self.shapes[other]) + (self.methods[other] != method)
                if distance <= REACH:
                    found[other] = distance
            self._near[tool] = found
        return found

    def of(self, wanted: Iterable[int]) -> dict[int, int]:
        """The family of a request whose operations are `wanted`: each member at its distance to the nearest one;
        neither the operations nor a copy of one (the same `address`)."""
        wanted = list(wanted)
        own = {self.addresses[tool] for tool in wanted}
        members: dict[int, int] = {}
        for tool in wanted:
            for other, distance in self.near(tool).items():
                if self.addresses[other] not in own and distance < members.get(other, REACH + 1):
                    members[other] = distance
        return members


def family_negatives(family: Family, tool_vectors: Any, query_vectors: Any, positives: list[list[int]],
                     count: int, first: list[list[int]] | None = None) -> list[list[int]]:
    """Each request's negatives: `first` (the model's own negative, kept) and then up to `count` members of its
    family, the nearest first, at one distance the unchanged model's highest scored first (`tool_vectors @ query`),
    then the spec's order."""
    negatives = []
    for row, (query, wanted) in enumerate(zip(query_vectors, positives, strict=True)):
        chosen = list(first[row]) if first is not None else []
        members = family.of(wanted)
        if members:
            ids = sorted(members)
            scores = tool_vectors[ids] @ query
            order = sorted(range(len(ids)), key=lambda k: (members[ids[k]], -float(scores[k]), ids[k]))
            chosen += [ids[k] for k in order if ids[k] not in chosen][:count]
        negatives.append(chosen)
    return negatives
