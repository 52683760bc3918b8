"""The tools each MCP session found with `search_tools`, added to that session's `tools/list`.

An agent with tool search lists its pinned tools and the meta tools. In a session (the 2025 protocol over
Streamable HTTP, or stdio, whose one connection is one session) what a search finds is appended to that
session's listing, in the order found, and the client is told with `notifications/tools/list_changed`; it can
then call a found tool by its own name. The stateless 2026-07-28 protocol has no session to remember them in, so
there `call_tool` stays the way in.

The names are kept per session id, never shared: a session id reaches a handler only after the SDK checked that
the caller owns it. A session's entry is dropped when the session ends (the endpoint's ledger says so), and the
registry holds at most `max_sessions` entries (the least recently used goes first), so sessions that vanish
without a word cannot make it grow. Each entry holds at most `MAX_TOOLS_PER_REQUEST` names (the search decides
what fits, by the loop's rule).
"""

from __future__ import annotations

from collections import OrderedDict

DEFAULT_MAX_SESSIONS = 10_000
"""The SDK's own cap on open sessions: more entries than that can only belong to sessions already gone."""

STDIO_SESSION = "stdio"
"""The key of the one session a `gateway mcp AGENT` process serves."""


class FoundTools:
    """Session id -> the names its searches found (a list the search extends in place)."""

    def __init__(self, max_sessions: int | None = DEFAULT_MAX_SESSIONS) -> None:
        """Parameters: max_sessions: how many sessions' entries are kept (None: `DEFAULT_MAX_SESSIONS`)."""
        self.max_sessions = max(1, max_sessions or DEFAULT_MAX_SESSIONS)
        self._by_session: OrderedDict[str, list[str]] = OrderedDict()

    def of(self, session: str) -> list[str]:
        """The session's found names, created empty on first use (the search appends to this list)."""
        names = self._by_session.get(session)
        if names is None:
            names = self._by_session[session] = []
            while len(self._by_session) > self.max_sessions:
                self._by_session.popitem(last=False)
        else:
            self._by_session.move_to_end(session)
        return names

    def listed(self, session: str) -> tuple[str, ...]:
        """What the session's listing adds (nothing for a session that never searched); creates no entry."""
        return tuple(self._by_session.get(session, ()))

    def forget(self, session: str) -> None:
        """The session ended: its names go with it."""
        self._by_session.pop(session, None)

    def __len__(self) -> int:
        return len(self._by_session)
