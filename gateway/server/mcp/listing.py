"""`tools/list`: an agent's tools as MCP `Tool` objects, in pages, per protocol era.

The 2025 protocol wants an object at the root of `outputSchema`, so a non-object output schema is wrapped as
`{"result": ...}` there (see `gateway.dialects.mcp_output_schema`); 2026-07-28 takes any schema, so it gets the
spec's exact one. A listing is built once per runtime generation, agent and era, and kept in wire form.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from typing import Any, Literal

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ...assembly import Generation
from ...dialects import declared_output_schema, mcp_tool
from ...offer.toolsearch import ToolOffer, tool_budget
from ...offer.views import model_view
from . import search

PAGE_BYTES = 256 * 1024
"""About how much JSON one page holds: clients cap one SSE event at 1 MiB, and a thousand-operation API's
listing is several times that."""

Era = Literal["legacy", "modern"]


def era_of(protocol_version: str | None) -> Era:
    return "modern" if protocol_version in MODERN_PROTOCOL_VERSIONS else "legacy"


def checked_agent(generation: Generation, agent: str) -> str:
    """`agent`, or the protocol error a client sees when a reload removed it since its session began."""
    if agent not in generation.runtime.manifest.agents:
        raise MCPError(types.INVALID_PARAMS, f"Agent {agent!r} no longer exists.")
    return agent


def listing_page(generation: Generation, agent: str, era: Era, cursor: str | None,
                 found: Sequence[str] = ()) -> dict[str, Any]:
    """The `ListToolsResult` (wire form) for `cursor`; an `INVALID_PARAMS` error for a cursor we never gave.

    `agent`: one of the generation's (`checked_agent`). Its toolset is read from the generation directly: the HTTP
    routes' lookup (`gateway.server.routes`) would import the HTTP door's auth, and with it httpx, before
    `gateway mcp`'s first listing.

    `found`: the tools a session's searches found (`gateway.server.mcp.found`), listed after the agent's own
    listing as their views; that list only grows, so a cursor given before a search names the same page after."""
    items: list[tuple[dict[str, Any], int]] = generation.memo(("mcp-tools", agent, era),
                                                              lambda: _items(generation, agent, era))
    if found:
        pages = _paged([*items, *_found_items(generation, agent, era, found, {item["name"] for item, _ in items})])
    else:
        pages = generation.memo(("mcp-pages", agent, era, PAGE_BYTES), lambda: _paged(items))
    return pages[_page_index(cursor, len(pages))]


def _items(generation: Generation, agent: str, era: Era) -> list[tuple[dict[str, Any], int]]:
    toolset = generation.toolset(agent)
    config = generation.runtime.manifest.agents[agent]
    offer = ToolOffer(config, toolset, measure=search.listed_tokens)
    listed: list[Any]
    if offer.code_only:  # code mode only: run_code and the tools that find what a script can call
        listed = list(offer.views())
    else:
        listed = search.listing(config, toolset) if search.searching(config, toolset) else list(toolset)
        if offer.code is not None:
            listed.append(offer.code)
    return [_item(agent_tool, era) for agent_tool in listed]


def _found_items(generation: Generation, agent: str, era: Era, found: Sequence[str],
                 listed: set[str]) -> list[tuple[dict[str, Any], int]]:
    """The found tools still in the agent's toolset (a reload may have dropped some), as their views."""
    toolset = generation.toolset(agent)
    budget = tool_budget(toolset.settings)
    items = []
    for name in found:
        agent_tool = toolset.get(name)
        if agent_tool is not None and name not in listed:
            view = model_view(agent_tool, budget)
            items.append(generation.memo(("mcp-tool", agent, era, name), partial(_item, view, era)))
    return items


def _item(agent_tool: Any, era: Era) -> tuple[dict[str, Any], int]:
    """One tool in wire form (checked once by the SDK's model) and its size in JSON."""
    item = mcp_tool(agent_tool)
    declared = declared_output_schema(agent_tool)
    if era == "modern" and declared is not None:
        item["outputSchema"] = declared
    wire = types.Tool.model_validate(item).model_dump(by_alias=True, mode="json", exclude_none=True)
    return wire, len(json.dumps(wire, separators=(",", ":")))


def _paged(items: Sequence[tuple[dict[str, Any], int]]) -> list[dict[str, Any]]:
    pages: list[list[dict[str, Any]]] = [[]]
    size = 0
    for item, item_size in items:
        if pages[-1] and size + item_size > PAGE_BYTES:
            pages.append([])
            size = 0
        pages[-1].append(item)
        size += item_size
    # Kept in wire form: the SDK sends a dict result as it is, where a model would be dumped on every listing.
    return [{**_EMPTY_PAGE, "tools": tools, **({"nextCursor": str(index + 1)} if index + 1 < len(pages) else {})}
            for index, tools in enumerate(pages)]


_EMPTY_PAGE: dict[str, Any] = types.ListToolsResult(tools=[]).model_dump(by_alias=True, mode="json",
                                                                         exclude_none=True)
"""What the SDK's model puts around the tools of a page (its cache hints, the result type)."""


def _page_index(cursor: str | None, count: int) -> int:
    if cursor is None:
        return 0
    if cursor.isdigit() and 0 < int(cursor) < count:
        return int(cursor)
    raise MCPError(types.INVALID_PARAMS, f"Invalid cursor {cursor[:40]!r}; list again without a cursor.")
