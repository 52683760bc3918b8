"""Which agent an MCP request is for: the path `/mcp/{agent}`, `/mcp/{agent}/mcp`, or `/mcp?agent=NAME`.

The MCP Inspector (and some other clients) rewrite a server URL's path to end in `/mcp`, so the agent can also
come as a path segment before that `/mcp`, or as a query parameter at `/mcp` itself. Imports no MCP SDK: the
auth layer reads the same answer before the SDK is loaded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs

PATHS = ("/mcp/{agent}", "/mcp/{agent}/mcp", "/mcp")
"""The routes of the MCP door, in the order the router tries them."""

AGENT_SCOPE_KEY = "gateway.mcp.agent"
"""Where the endpoint leaves the resolved agent in the ASGI scope, for the SDK's handlers to read."""

SESSION_SCOPE_KEY = "gateway.mcp.session"
"""Where the endpoint leaves the request's `Mcp-Session-Id` (a 2025 session's), for the handlers to read."""

ASIDE_SCOPE_KEY = "gateway.mcp.aside"
"""Where the door, when it writes the answer itself, leaves the `ResultAside` a call's text and structured content
go to (see `results`)."""

FACTS_SCOPE_KEY = "gateway.mcp.facts"
"""Where the door, answering a request in its own task, leaves whom and what the message is for
(`server.MessageFacts`): a session's (`inline`) decided when it opened, a stateless request's (`stateless`) made from
the identity the endpoint read; with the request's user token and aside."""


def agent_in_query(scope: Mapping[str, Any]) -> str | None:
    """The `agent` query parameter of the request (its first value), if any."""
    query = scope.get("query_string", b"")
    if not query or b"agent=" not in query:
        return None
    values = parse_qs(query.decode("latin-1")).get("agent")
    return values[0] if values and values[0] else None


def routed_agent(scope: Mapping[str, Any]) -> str | None:
    """The agent the router matched (a path parameter), else the `agent` query parameter."""
    agent = scope.get("path_params", {}).get("agent")
    if isinstance(agent, str) and agent:
        return agent
    return agent_in_query(scope)
