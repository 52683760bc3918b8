"""Who a piece of work is done for: the caller context of a request, inherited by every task it starts.

The auth middleware binds it once per request (`bind_caller(client=..., subject=..., token=...)`); the doors and
the loop narrow it (the agent, the run, the approvals a resumed run carries); the audit log and the limits read it
(`current_caller()`).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True, frozen=True)
class Caller:
    """Who a piece of work is done for."""

    client: str | None = None
    agent: str | None = None
    run_id: str | None = None
    approvals: Mapping[str, str] = field(default_factory=dict)
    """Catalog tool name -> approval id, for calls a human approved (set while resuming a run)."""
    started: float | None = None
    """`time.perf_counter()` when the request began (for a chat's latency)."""
    notes: dict[str, Any] | None = None
    """Per-request scratch the request's own middleware reads back (e.g. `retry_after` of a refused call)."""
    subject: str | None = None
    """The signed-in user (`sub` of the caller's access token, with `gateway.auth`); None for a static key."""
    token: UserToken | None = None
    """The caller's own access token: exchanged for per-user upstream tokens, never sent upstream itself."""


@dataclass(slots=True, frozen=True)
class UserToken:
    """A caller's verified access token. Its value is never shown (`repr` hides it), logged or forwarded."""

    value: str = field(repr=False)
    subject: str
    expires_at: float | None = None
    """Epoch seconds."""


def owner_key(client: str | None, subject: str | None) -> str | None:
    """Whose stored work (an answer, a conversation, a handed-back turn) is: the client, and with `gateway.auth` the
    signed-in user too, so two users of one client never read or continue each other's. U+241F (the unit
    separator's symbol) joins them rather than a NUL, which a PostgreSQL text column does not keep."""
    return client if subject is None else f"{client or ''}\u241f{subject}"


_caller: ContextVar[Caller] = ContextVar("gateway_caller", default=Caller())  # noqa: B039 - frozen, never mutated


def current_caller() -> Caller:
    return _caller.get()


class bind_caller:  # noqa: N801 - used as a function: `with bind_caller(agent=...):`
    """Set fields of the current caller for the block (and every task started inside it).

    A plain context manager rather than `contextlib.contextmanager` + `dataclasses.replace`: it runs on every
    call of every door, and those two were most of its cost."""

    __slots__ = ("_fields", "_token")

    def __init__(self, **fields: Any) -> None:
        self._fields = fields

    def __enter__(self) -> Caller:
        current = _caller.get()
        values: dict[str, Any] = {"client": current.client, "agent": current.agent, "run_id": current.run_id,
                  "approvals": current.approvals, "started": current.started, "notes": current.notes,
                  "subject": current.subject, "token": current.token}
        values.update(self._fields)  # an unknown field name fails in Caller() below, like replace() did
        caller = Caller(**values)
        self._token = _caller.set(caller)
        return caller

    def __exit__(self, *exc: object) -> None:
        _caller.reset(self._token)
