"""`gateway.mcp` in agents.yaml: the limits of the MCP door's sessions (2025 protocol), read by `gateway.server.mcp`
when its endpoint is built."""

from __future__ import annotations

from pydantic import ConfigDict

from .fields import Count, Seconds, Section, doc

DEFAULT_IDLE_TIMEOUT = 600.0
DEFAULT_MAX_SESSIONS = 2_000
DEFAULT_MAX_SESSIONS_PER_CLIENT = 100


class SessionLimits(Section):
    """The MCP door's session limits."""

    model_config = ConfigDict(frozen=True)

    session_idle_timeout: Seconds = doc("Seconds a session with no request in flight lives; then it answers 404.",
                                        DEFAULT_IDLE_TIMEOUT)
    max_sessions: Count = doc("Open sessions in all (503 past it).", DEFAULT_MAX_SESSIONS)
    max_sessions_per_client: Count = doc("Open sessions of one client key (or, without `clients`, one peer "
                                         "address); the next initialize gets 429.", DEFAULT_MAX_SESSIONS_PER_CLIENT)
