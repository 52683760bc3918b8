"""MCP sessions (2025 protocol): how many each client may hold, how long an idle one lives, whose it is.

The SDK's session manager caps sessions only in total (10,000 by default, then 503 for everyone), so a single
client could take every slot. The endpoint keeps a ledger of the sessions each client opened and refuses the next
one past `max_sessions_per_client` (429), before the SDK sees the request. A session ends in the ledger on a
successful DELETE, when the SDK no longer knows it (404), or after `session_idle_timeout` seconds with no request
in flight. That last rule is the ledger's alone (the SDK is given no idle timeout): a session's plain requests are
answered without the SDK's transport (`inline`), so only the ledger sees every request in flight; the endpoint
then ends the session in the SDK too (see `MCPEndpoint`).

Ownership is the SDK's: a request carries the identity (client key's name, agent) the endpoint put in its scope
as an authenticated user, and the SDK answers a session used under another identity as if it did not exist.
The stateless 2026-07-28 protocol has no sessions; none of this applies to it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ...config.mcp_limits import SessionLimits

__all__ = ["SessionLedger", "SessionLimits"]

@dataclass(slots=True)
class _Session:
    owner: str
    agent: str
    last_active: float
    in_flight: int = 0


@dataclass
class SessionLedger:
    """The open sessions of each owner (client key's name, or `peer:<address>`), as far as requests show them."""

    limits: SessionLimits
    clock: Callable[[], float] = time.monotonic
    on_end: Callable[[str], None] | None = None
    """Called with a session's id when the ledger forgets it (what the session kept goes with it)."""
    on_idle: Callable[[str], None] | None = None
    """Called with a session's id when the ledger ends it for idleness (before `on_end`): the SDK, which keeps no
    idle timeout of its own here, is to end it too."""
    _sessions: dict[str, _Session] = field(default_factory=dict)
    _by_owner: dict[str, set[str]] = field(default_factory=dict)
    _opening: dict[str, int] = field(default_factory=dict)
    _opened_since_sweep: int = 0

    def open_count(self, owner: str) -> int:
        """Sessions `owner` holds now, counting the ones being opened."""
        self._expire(list(self._by_owner.get(owner, ())))
        return len(self._by_owner.get(owner, ())) + self._opening.get(owner, 0)

    def reserve(self, owner: str) -> bool:
        """Hold a slot for a session `owner` is opening; False at its cap. Call `release` once answered."""
        if self.open_count(owner) >= self.limits.max_sessions_per_client:
            return False
        self._opening[owner] = self._opening.get(owner, 0) + 1
        return True

    def release(self, owner: str) -> None:
        left = self._opening.get(owner, 0) - 1
        if left > 0:
            self._opening[owner] = left
        else:
            self._opening.pop(owner, None)

    def opened(self, session_id: str, owner: str, agent: str) -> None:
        self._sessions[session_id] = _Session(owner, agent, self.clock())
        self._by_owner.setdefault(owner, set()).add(session_id)
        self._opened_since_sweep += 1
        if self._opened_since_sweep >= 256:  # owners who never come back are swept now and then
            self._opened_since_sweep = 0
            self.sweep()

    def request_started(self, session_id: str) -> bool:
        """A request on `session_id` arrived: counted in flight, unless the session had been idle past the timeout,
        which ends it (as `expire` would) and is said (True). One lookup for what the request needs to know."""
        session = self._sessions.get(session_id)
        if session is None:
            return False
        if self._idle_past(session, self.clock() - self.limits.session_idle_timeout):
            return self._expire([session_id]) > 0
        session.in_flight += 1
        return False

    def request_ended(self, session_id: str, owner: str, agent: str, *, gone: bool) -> None:
        """A request on `session_id` was answered; `gone`: the SDK answered that the session is over (404 or a
        successful DELETE). Only the session's own owner and agent end it: another's 404 is no news about it."""
        session = self._sessions.get(session_id)
        if session is None:
            return
        session.in_flight = max(0, session.in_flight - 1)
        session.last_active = self.clock()
        if gone and session.owner == owner and session.agent == agent:
            self._forget(session_id)

    def expire(self, session_id: str) -> bool:
        """End `session_id` if it has been idle past the timeout; whether it was."""
        session = self._sessions.get(session_id)
        if session is None or not self._idle_past(session, self.clock() - self.limits.session_idle_timeout):
            return False  # (the common case, decided without a list)
        return self._expire([session_id]) > 0

    def sweep(self) -> None:
        """End every session idle past the timeout."""
        self._expire(list(self._sessions))

    def __len__(self) -> int:
        return len(self._sessions)

    def _expire(self, session_ids: list[str]) -> int:
        deadline = self.clock() - self.limits.session_idle_timeout
        ended = 0
        for session_id in session_ids:
            session = self._sessions.get(session_id)
            if session is not None and self._idle_past(session, deadline):
                if self.on_idle is not None:
                    self.on_idle(session_id)
                self._forget(session_id)
                ended += 1
        return ended

    @staticmethod
    def _idle_past(session: _Session, deadline: float) -> bool:
        """No request in flight, and none since `deadline`: the session is over."""
        return session.in_flight == 0 and session.last_active < deadline

    def _forget(self, session_id: str) -> None:
        session = self._sessions.pop(session_id)
        if self.on_end is not None:
            self.on_end(session_id)
        owned = self._by_owner.get(session.owner)
        if owned is not None:
            owned.discard(session_id)
            if not owned:
                del self._by_owner[session.owner]
