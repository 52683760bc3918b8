"""The MCP door of an agent with tool search: pinned tools, `search_tools`, `call_tool` and `describe_tool`.

A desktop client cannot hold a 1,223-tool listing, so for an agent whose tool search is on (`gateway.offer.toolsearch`)
`tools/list` offers the pinned tools (as their views), `search_tools` (`{"query", "limit"?}`: names and one-line
summaries), `describe_tool` (`{"name", "pointer"?}`: the exact input schema of a tool or one part of it) and
`call_tool` (`{"name", "arguments"}`: runs any of the agent's tools through the same pipeline as a direct
`tools/call`, approvals and limits included). In a session (`found`), what a search finds is also added to the
session's listing, by the loop's rule (appended, at most `MAX_TOOLS_PER_REQUEST` tools and the definitions budget
in all, the definitions counted as the listing carries them: `listed_tokens`, `call_tool` included); the stateless
protocol era has no session to add them to, so there `call_tool` is the way in, and a search marks loaded what a
new session's listing would take by the same count.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import anyio.to_thread

from ...catalog import AgentTool
from ...config.model import AgentConfig
from ...dialects import mcp_tool
from ...dialects.brevity import estimate_tokens
from ...dialects.tool import ToolLike
from ...jsonwire import dumps_text
from ...offer.toolsearch import (
    MAX_TOOLS_PER_REQUEST,
    SEARCH_TOOL,
    ToolOffer,
    meta_tools,
    note_for,
    pinned_tools,
    search_enabled,
)
from ...offer.views import DESCRIBE_TOOL, model_view
from ...toolsets import Toolset

CALL_TOOL = "call_tool"
CALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "The tool's name, as search_tools answered it."},
        "arguments": {"type": "object", "description": "The tool's arguments (describe_tool gives its schema)."},
    },
    "required": ["name"],
}
MCP_META = (SEARCH_TOOL, DESCRIBE_TOOL, CALL_TOOL)

T = TypeVar("T")
CallTool = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any] | None]]


def listed_tokens(tool: ToolLike) -> int:
    """The estimated tokens of a definition as `tools/list` carries it (output schema and annotations included):
    what a session's definitions budget charges."""
    return estimate_tokens(mcp_tool(tool))


def searching(agent: AgentConfig, toolset: Toolset) -> bool:
    """Whether the agent's MCP door answers the meta tools (tool search on, `auto` deciding from the listing's
    definitions, or code mode `only`)."""
    return search_enabled(agent, toolset, listed_tokens) or agent.code_mode == "only"


def listing(agent: AgentConfig, toolset: Toolset) -> list[Any]:
    """What `tools/list` offers an agent with tool search: pinned views, then the three meta tools."""
    offer = ToolOffer(agent, toolset)
    return [*(model_view(t, offer.budget) for t in pinned_tools(agent, toolset)), *meta_tools(), _call_tool()]


def _call_tool() -> AgentTool:
    return AgentTool(name=CALL_TOOL, input_schema=CALL_SCHEMA,
                     description="Run one of this agent's tools by name (find it with search_tools first).")


async def answer_meta(agent: AgentConfig, toolset: Toolset, name: str, arguments: dict[str, Any],
                      call_tool: CallTool, found: list[str] | None = None) -> dict[str, Any] | None:
    """A `CallToolResult` (wire form) for a meta tool; None when `name` is not one.

    `found`: the session's found tools (`gateway.server.mcp.found`), which a search extends in place; None for a
    stateless request."""
    if name not in MCP_META or toolset.get(name) is not None:
        return None
    if name == CALL_TOOL:
        target = arguments.get("name")
        inner = arguments.get("arguments", {})
        if not isinstance(target, str) or target in MCP_META:
            return _result(f"`name` must name one of this agent's tools (not {target!r}); search_tools finds them",
                           error=True)
        if not isinstance(inner, dict):
            return _result("`arguments` must be an object of the tool's arguments", error=True)
        answered = await call_tool(target, inner)
        if answered is None:
            return _result(f"there is no tool named {target!r}; search_tools finds the tool for a task", error=True)
        return answered
    if name == SEARCH_TOOL:
        ok, body, kept = await _off_the_loop(_search_in_listing, agent, toolset, arguments, tuple(found or ()),
                                             found is not None)
        if found is not None:
            for tool_name in kept:  # here, on the loop: one writer at a time, and never past what one search may hold
                if tool_name not in found and len(found) < len(kept):
                    found.append(tool_name)
        return _result_of(ok, body)
    return _result_of(*await _off_the_loop(ToolOffer(agent, toolset, measure=listed_tokens).answer, name, arguments))


async def _off_the_loop(work: Callable[..., T], *args: Any) -> T:
    """`work(*args)` in a worker thread, as every door searches: opening an api's index the first time, or a
    request to an embeddings endpoint, on the event loop would stall every other request meanwhile."""
    return await anyio.to_thread.run_sync(lambda: work(*args))


def _search_in_listing(agent: AgentConfig, toolset: Toolset, arguments: dict[str, Any], found: Sequence[str],
                       session: bool) -> tuple[bool, Any, list[str]]:
    """`search_tools` over MCP: the loop's offer, resumed from what the session found before (stateless: nothing),
    decides what is loaded; the listing carries `call_tool` beside the offer, which counts in its cap and budget. A
    stateless request's listing is the same (pinned, meta tools, `call_tool`), so its answer marks loaded what a new
    session's listing would hold. Answers (ok, the result body, the names the session's listing holds now)."""
    offer = ToolOffer(agent, toolset, loaded=found, measure=listed_tokens, beside=[_call_tool()])
    ok, body = offer.answer(SEARCH_TOOL, arguments)
    if ok and isinstance(body, dict):
        offer_cap = f"not loaded: a request carries at most {MAX_TOOLS_PER_REQUEST} tools"  # the offer's words
        for item in body["tools"]:
            if item.get("note") == offer_cap:
                item["note"] = f"not loaded: a listing carries at most {MAX_TOOLS_PER_REQUEST} tools"
        if body["tools"] and session:
            loaded = "the tools marked loaded are in this session's tools/list now: call them by name"
            body["note"] = note_for(body.get("match"), loaded)
    return ok, body, offer.loaded


def _result_of(ok: bool, body: Any) -> dict[str, Any]:
    return _result(body, error=not ok)


def _result(body: Any, *, error: bool = False) -> dict[str, Any]:
    text = body if isinstance(body, str) else dumps_text(body)
    wire: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": error, "resultType": "complete"}
    if isinstance(body, dict) and not error:
        wire["structuredContent"] = body
    return wire
