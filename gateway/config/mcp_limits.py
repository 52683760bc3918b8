"""`gateway.mcp` in agents.yaml: the limits of the MCP door's sessions (2025 protocol).

Parsed here, in the config layer, so `gateway validate` reports a bad value with its line, and read by
`gateway.server.mcp` when its endpoint is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

DEFAULT_IDLE_TIMEOUT = 600.0
DEFAULT_MAX_SESSIONS = 2_000
DEFAULT_MAX_SESSIONS_PER_CLIENT = 100


@dataclass(frozen=True, slots=True)
class SessionLimits:
    """`gateway.mcp` in agents.yaml."""

    session_idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    """Seconds a session with no request in flight lives."""
    max_sessions: int = DEFAULT_MAX_SESSIONS
    """Open sessions in all (the SDK answers 503 past it)."""
    max_sessions_per_client: int = DEFAULT_MAX_SESSIONS_PER_CLIENT
    """Open sessions of one client key (or, without `clients`, one peer address); 429 past it."""

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> SessionLimits:
        """From the manifest's `gateway:` settings; a ConfigError naming the key for a bad value."""
        section = settings.get("mcp") or {}
        if not isinstance(section, Mapping):
            raise ConfigError("gateway.mcp must be a mapping (session_idle_timeout, max_sessions, "
                              "max_sessions_per_client).")
        unknown = sorted(set(section) - {"session_idle_timeout", "max_sessions", "max_sessions_per_client"})
        if unknown:
            raise ConfigError(f"gateway.mcp has unknown key(s) {', '.join(unknown)}; known: session_idle_timeout, "
                              "max_sessions, max_sessions_per_client.")
        return cls(
            session_idle_timeout=_positive(section, "session_idle_timeout", DEFAULT_IDLE_TIMEOUT, float),
            max_sessions=int(_positive(section, "max_sessions", DEFAULT_MAX_SESSIONS, int)),
            max_sessions_per_client=int(_positive(section, "max_sessions_per_client",
                                                  DEFAULT_MAX_SESSIONS_PER_CLIENT, int)),
        )


def _positive(section: Mapping[str, Any], key: str, default: float, kind: type[int] | type[float]) -> float:
    value = section.get(key, default)
    wrong_type = isinstance(value, bool) or not isinstance(value, int | float) or (
        kind is int and not isinstance(value, int))
    if wrong_type or not 0 < value < float("inf"):
        raise ConfigError(f"gateway.mcp.{key} must be a positive {'integer' if kind is int else 'number'}, "
                          f"got {value!r}.")
    return float(value)
