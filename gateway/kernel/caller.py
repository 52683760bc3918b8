"""Who a piece of work is done for: the caller context of a request, inherited by every task it starts.

The auth middleware binds it once per request (`bind_caller(client=..., subject=..., token=...)`); the chat doors,
the MCP doors and the loop narrow it (the agent, the run, the approvals a resumed run carries); the audit log and the
limits read it (`current_caller()`). A call of the direct door runs in the request's caller as the auth middleware
bound it: its agent and client travel in its `Invocation`, which is what the pipeline's stages read.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple


class Caller(NamedTuple):
    """Who a piece of work is done for. Immutable (a named tuple: `bind_caller` makes one per binding in C, where a
    frozen dataclass sets each field through `object.__setattr__`)."""

    client: str | None = None
    agent: str | None = None
    run_id: str | None = None
    approvals: Mapping[str, str] = MappingProxyType({})
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


TERMINAL_CLIENT = "cli"
"""The client of work done at a terminal: the calls of `gateway call` and `gateway chat` (their audit rows, runs,
approvals, limits) and the decisions of `gateway approvals approve|deny`, so the audit names the terminal one way."""

STDIO_CLIENT = "stdio"
"""The client of calls made over `gateway mcp AGENT` (stdio), followed by the name the MCP client declared in its
`initialize` (`clientInfo.name`: `stdio:claude-ai`) when it declared one, else alone. Declared, not proven: the prefix
keeps it from naming a configured client (`gateway validate` warns about a client named so), whose limits, budgets and
pending calls it would otherwise share."""
_DECLARED_NAME_CHARS = 64
"""How much of a declared name the audit keeps (a desktop client's is a word or two)."""


@functools.lru_cache(maxsize=16)  # asked for on every message of a session, of one name
def stdio_client(declared: str | None) -> str:
    """The audit's client for a stdio MCP session whose client declared `declared`: its printable characters, each run
    of spaces (or of what was not printable) one `-` (the terminal's audit and approvals lists are columns split at
    spaces), cut to `_DECLARED_NAME_CHARS` (text a program chose reaches the audit and the terminal)."""
    name = "-".join("".join(c if c.isprintable() else " " for c in declared or "").split())[:_DECLARED_NAME_CHARS]
    return f"{STDIO_CLIENT}:{name}" if name else STDIO_CLIENT


OWNER_SEPARATOR = "\u241f"
"""What joins a client and a signed-in user in `owner_key`."""


def owner_key(client: str | None, subject: str | None) -> str | None:
    """Whose stored work (an answer, a conversation, a handed-back turn) is: the client, and with `gateway.auth` the
    signed-in user too, so two users of one client never read or continue each other's. U+241F (the unit
    separator's symbol) joins them rather than a NUL, which a PostgreSQL text column does not keep."""
    return client if subject is None else f"{client or ''}{OWNER_SEPARATOR}{subject}"


_FIELDS = frozenset(Caller._fields)  # `_fields`: the named tuple's documented list of its field names
_caller: ContextVar[Caller] = ContextVar("gateway_caller", default=Caller())  # noqa: B039 - frozen, never mutated


def current_caller() -> Caller:
    return _caller.get()


class bind_caller:  # noqa: N801 - used as a function: `with bind_caller(agent=...):`
    """Set fields of the current caller for the block (and every task started inside it).

    A plain context manager rather than `contextlib.contextmanager`: it runs on every call of every door.
    An unknown field name is a TypeError."""

    __slots__ = ("_fields", "_token")

    def __init__(self, **fields: Any) -> None:
        self._fields = fields

    def __enter__(self) -> Caller:
        fields = self._fields
        if not fields.keys() <= _FIELDS:
            raise TypeError(f"Caller has no field {', '.join(sorted(fields.keys() - _FIELDS))}")
        # Each field: the one given, else the current caller's (`dict.get` with the current value as its default),
        # the tuple made by `tuple.__new__` in C (what the named tuple's own `_make` calls): its generated `__new__`
        # is a Python frame per binding, and the fields here are complete and in order by construction.
        caller = tuple.__new__(Caller, map(fields.get, Caller._fields, _caller.get()))
        self._token = _caller.set(caller)
        return caller

    def __exit__(self, *exc: object) -> None:
        _caller.reset(self._token)
