"""Who may decide and who may read: a caller's rights over the work of others (approvals, audit rows, runs).

With `clients` in agents.yaml every caller is one client, and what it may do follows from `agents.yaml`:

* a plain key uses its agents, and sees only its own audit rows, approvals and runs; it may not decide (with
  `gateway.auth`, a signed-in user's own are the user's: two users mapped onto one client by their claims do not
  read each other's calls, pending approvals or answers; the client's static key reads all of its client's);
* `approver: true` also decides the pending calls of the agents it may use, and so sees them and their audit rows;
* `admin: true` uses every agent, sees everything and decides everything.

Without `clients` (a loopback gateway with no keys) nobody is told apart, and everyone may do everything, as
before (`Rights.OPEN`; so do `gateway approvals` and the other commands at the operator's terminal). A resumed
run goes on as its owner (the client that started it), and its answer is that owner's: a decider who is not the
owner learns the decision's outcome, not the answer.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from ..store import ApprovalRecord, AuditQuery


@dataclass(slots=True, frozen=True)
class Rights:
    """What one caller may do with the work of others."""

    client: str | None
    """The caller's client name; None when no clients are configured (then `everything` is true)."""
    agents: frozenset[str] | None
    """The agents it may use; None: every agent."""
    admin: bool = False
    approver: bool = False
    everything: bool = False
    """No clients configured (or the operator's own terminal): nothing is told apart."""
    subject: str | None = None
    """The signed-in user (`gateway.auth`); None for a static key, which owns all of its client's work."""

    OPEN: ClassVar[Rights]
    NOBODY: ClassVar[Rights]

    def may_use(self, agent: str) -> bool:
        return self.agents is None or agent in self.agents

    @property
    def decides(self) -> bool:
        """May decide approvals at all (of the agents it may use)."""
        return self.everything or self.admin or self.approver

    def owns(self, client: str | None, subject: str | None = None) -> bool:
        """Whether work recorded for `client` (and the signed-in user `subject`) is this caller's own."""
        if self.everything:
            return True
        return self.client is not None and client == self.client and (self.subject is None or subject == self.subject)

    def as_user(self, subject: str) -> Rights:
        """These rights for one signed-in user of the client."""
        return dataclasses.replace(self, subject=subject)

    def may_decide(self, approval: ApprovalRecord) -> bool:
        return self.decides and self.may_use(approval.agent)

    def sees(self, approval: ApprovalRecord, subject: str | None = None) -> bool:
        """A pending call is shown to those who may decide it and to its owner (`subject`: its run's user)."""
        return self.may_use(approval.agent) and (self.decides or self.owns(approval.client, subject))

    def audit_query(self, query: AuditQuery) -> AuditQuery | None:
        """`query` narrowed to the rows this caller may read; None when none can match (a plain key asking for
        another client's rows)."""
        narrowed = query.within(None if self.agents is None else set(self.agents))
        if self.decides:
            return narrowed  # deciders read the whole log of the agents they decide for
        if self.client is None or (query.client is not None and query.client != self.client):
            return None
        return dataclasses.replace(narrowed, client=self.client, subject=self.subject)


Rights.OPEN = Rights(client=None, agents=None, admin=True, approver=True, everything=True)
Rights.NOBODY = Rights(client=None, agents=frozenset())
"""What a request the auth layer did not see may do: nothing (a route reached without the middleware)."""
