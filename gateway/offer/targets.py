"""A request about a thing of a target, as one api reads it (gateway.offer.index): "add a label to the pod" changes
the pod, "what's the cluster IP of the service" reads it, "remove bob from the group" removes one of its members."""

from __future__ import annotations

import dataclasses
from typing import Protocol

from .actions import READS
from .query import Request, stems

UPDATES = frozenset({"PATCH", "PUT"})


class Api(Protocol):
    """What of an api's opened index the reading asks (`gateway.offer.index.OpenedApi`)."""

    @property
    def methods(self) -> frozenset[str]: ...

    def addresses(self, things: frozenset[str]) -> bool: ...

    def addresses_under(self, things: frozenset[str], targets: frozenset[str]) -> bool: ...

    def mentions(self, word: str) -> bool: ...


def of_api(request: Request,
           opened: Api) -> tuple[Request, frozenset[str], frozenset[str], frozenset[str]]:
    """`request` as `opened`'s api reads it, and the methods that change (or read) an item when the request changes
    (or asks for) a property of its target: a thing named that none of the api's paths addresses, before a target
    that one does ("add a label to the pod": a patch of the pod; "what's the cluster IP of the service": a read of
    it), is a property of the target; so is a thing it addresses, but never under the target, when the request sets
    or changes it ("set the fix version of API-77": an edit of the issue), or names the target by a tracker's key
    ("add the frontend label to WEB-210", "what's the status of PAY-311"); those things are then `displaced`. The
    other two answers: the things the request is `within` when it names a person, and the `displaced` things."""
    none: frozenset[str] = frozenset()
    if not request.target or not request.things or not opened.addresses(request.target):
        return request, none, none, none
    displaced = request.things if opened.addresses(request.things) else none
    if displaced and (not request.methods or not (request.methods <= UPDATES or request.keyed)
                      or opened.addresses_under(request.things, request.target)):
        return request, none, none, none
    if not request.determined and not any(opened.mentions(thing) for thing in request.things):
        # a name ("remove bob from the group"), not a word the api happens not to have ("the summary of PROJ-7")
        members = " OR ".join(f'"{stem}"' for stem in sorted(_MEMBERS))
        return dataclasses.replace(request, things=_MEMBERS, named=frozenset(),
                                   expression=f"{request.expression} OR ({members})",
                                   addressed=f"resource : ({members}) AND {request.target_addressed}"), none, \
            request.target, none
    # "what's the cluster IP of the db service" reads the service
    changes = READS if request.methods == READS else UPDATES & opened.methods or frozenset({"POST"})
    return dataclasses.replace(request, things=request.target, named=frozenset(),
                               addressed=request.target_addressed), changes, none, displaced


_MEMBERS = frozenset(stems("member membership collaborator user"))
"""What a name that the api does not know is, in "remove bob from the group": a person, one of its members."""
