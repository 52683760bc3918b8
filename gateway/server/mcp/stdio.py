"""One agent's tools as an MCP server over stdio (`gateway mcp AGENT`), for desktop clients."""

from __future__ import annotations

from mcp.server.stdio import stdio_server

from ..state import GatewayState
from .calls import checked_agent
from .server import build_mcp_server


async def serve_stdio(state: GatewayState, agent: str) -> None:
    """Serve until the client closes stdin."""
    checked_agent(state.current, agent)
    server = build_mcp_server(state, agent_of=lambda ctx: agent, client_of=lambda ctx: None)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
