"""`tools/list`: an agent's tools as MCP `Tool` objects, in pages, per protocol era.

The 2025 protocol wants an object at the root of `outputSchema`, so a non-object output schema is wrapped as
`{"result": ...}` there (see `gateway.dialects.mcp_output_schema`); 2026-07-28 takes any schema, so it gets the
spec's exact one. A listing is built once per runtime generation, agent and era, and kept in wire form.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ...dialects import mcp_tool
from ..state import Generation

PAGE_BYTES = 256 * 1024
"""About how much JSON one page holds: clients cap one SSE event at 1 MiB, and a thousand-operation API's
listing is several times that."""

Era = Literal["legacy", "modern"]


def era_of(protocol_version: str | None) -> Era:
    return "modern" if protocol_version in MODERN_PROTOCOL_VERSIONS else "legacy"


def listing_page(generation: Generation, agent: str, era: Era, cursor: str | None) -> dict[str, Any]:
    """The `ListToolsResult` (wire form) for `cursor`; an `INVALID_PARAMS` error for a cursor we never gave."""
    pages: list[dict[str, Any]] = generation.memo(("mcp-tools", agent, era, PAGE_BYTES),
                                                  lambda: _pages(generation, agent, era))
    return pages[_page_index(cursor, len(pages))]


def _pages(generation: Generation, agent: str, era: Era) -> list[dict[str, Any]]:
    pages: list[list[types.Tool]] = [[]]
    size = 0
    for agent_tool in generation.toolset(agent):
        item = mcp_tool(agent_tool)
        if era == "modern" and agent_tool.output_schema is not None:
            item["outputSchema"] = agent_tool.output_schema
        item_size = len(json.dumps(item, separators=(",", ":")))
        if pages[-1] and size + item_size > PAGE_BYTES:
            pages.append([])
            size = 0
        pages[-1].append(types.Tool.model_validate(item))  # the SDK's model checks each item once, here
        size += item_size
    # Kept in wire form: the SDK sends a dict result as it is, where a model would be dumped on every listing.
    return [types.ListToolsResult(tools=tools, next_cursor=str(index + 1) if index + 1 < len(pages) else None)
            .model_dump(by_alias=True, mode="json", exclude_none=True) for index, tools in enumerate(pages)]


def _page_index(cursor: str | None, count: int) -> int:
    if cursor is None:
        return 0
    if cursor.isdigit() and 0 < int(cursor) < count:
        return int(cursor)
    raise MCPError(types.INVALID_PARAMS, f"Invalid cursor {cursor[:40]!r}; list again without a cursor.")
