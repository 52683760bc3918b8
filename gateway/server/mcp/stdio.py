"""One agent's tools as an MCP server over stdio (`gateway mcp AGENT`), for desktop clients."""

from __future__ import annotations

from mcp.server.stdio import stdio_server

from ...assembly import GatewayState
from .answering import checked_agent
from .found import STDIO_SESSION
from .listing import era_of
from .server import build_mcp_server


async def serve_stdio(state: GatewayState, agent: str) -> None:
    """Serve until the client closes stdin."""
    checked_agent(state.current, agent)
    # One process serves one client over one connection: the session a 2025 client's searches add tools to
    # (a 2026-07-28 client hears of changes only on a subscription, which the gateway does not serve).
    server = build_mcp_server(
        state, agent_of=lambda ctx: agent, client_of=lambda ctx: None,
        session_of=lambda ctx: STDIO_SESSION if era_of(ctx.protocol_version) == "legacy" else None)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
