"""The MCP door: each agent's tools as an MCP server, on the official `mcp` SDK's public server API.

One concept per module:

- `routing`: which agent a request names (`/mcp/{agent}`, `/mcp/{agent}/mcp`, `/mcp?agent=`); no SDK import.
- `lazy`: the endpoint built on its first request, so `gateway serve` starts without importing the SDK.
- `endpoint`: the ASGI app (agent check, per-client session caps, session ownership), handing each request to
  the SDK's `StreamableHTTPSessionManager`, but for a session's plain requests (`inline`).
- `inline`: a 2025 session's `tools/call`, `tools/list` and `ping` answered in the request's own task, through the
  SDK's transport checks and its server kernel (`ServerRunner`), without the session's streams and tasks.
- `stateless`: a stateless 2026-07-28 request answered the same way, through the SDK's envelope ladder and kernel,
  with what the SDK's own entry asks per request (header verdicts, `Mcp-Param-*` declarations) asked once, and the
  kernel of a caller's envelope kept as a session keeps its own.
- `exchange`: what those two share: the SDK's transport checks' verdicts, the body read (and given back), the
  dispatch context of one JSON answer.
- `sessions`: the ledger of open sessions per client (limits: `gateway.config.mcp_limits`, agents.yaml's
  `gateway.mcp`), and the identity a session is bound to.
- `server`: the SDK's low-level `Server` and its two handlers, `tools/list` and `tools/call`.
- `listing`: an agent's tools in pages, per protocol era.
- `calls`: one `tools/call` through the gateway's call pipeline (the one function every MCP call takes).
- `results`: a `ToolResult` shaped as a `CallToolResult` (structuredContent, isError text).
- `search`: an agent with tool search: pinned tools, `search_tools`, `describe_tool` and `call_tool`.
- `found`: the tools each session's searches found, added to that session's listing (`tools/list_changed`).
- `stdio`: one agent over stdio (`gateway mcp AGENT`).

Only `routing` and `lazy` may be imported at start-up; the others import the SDK.
"""
