"""Tools for a provider's own (native) tool search: what `tool_search: native` offers a model.

With native search the gateway sends every tool of the agent, but most of them marked for deferred loading:
the provider keeps their definitions out of the model's context until its own search tool finds them
(Anthropic: `defer_loading: true` beside a `tool_search_tool_bm25` server tool; OpenAI Responses: the same
flag beside `{"type": "tool_search"}`). `DeferredTool` is such a tool; `ServerSearchTool` is the provider's
search tool itself. Both are `ToolLike`, so the loop passes them to `ProviderAdapter.complete` like any other
tool; only an adapter with `native_tool_search` is given them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SEARCH_TOOL_NAME = "tool_search_tool_bm25"
"""The name a model calls the provider's search by (in `server_tool_use` blocks)."""


@dataclass(slots=True, eq=False)
class DeferredTool:
    """A tool whose definition goes out marked for deferred loading; `view` is what it defers."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    view: Any
    group: str = ""
    """The api the tool belongs to: OpenAI groups deferred functions in one namespace per api, so the model is
    shown the namespace up front instead of every function's name and description."""
    group_title: str = ""
    """The api's title (its spec's `info.title`), for the namespace's description."""


@dataclass(slots=True, eq=False)
class ServerSearchTool:
    """The provider's search over the deferred tools (run by the provider, never by the gateway)."""

    name: str = SEARCH_TOOL_NAME
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=dict)
    output_schema: dict[str, Any] | None = None


_DEFERRED: dict[int, tuple[Any, Any, DeferredTool]] = {}
SERVER_SEARCH = ServerSearchTool()


def deferred(view: Any, group: str = "", group_title: str = "") -> DeferredTool:
    """`view` marked for deferred loading: one object per view, so adapters render each tool once, not per run."""
    hit = _DEFERRED.get(id(view))
    if hit is not None and hit[0] is view and hit[1] is view.input_schema:
        return hit[2]
    if len(_DEFERRED) > 65536:  # views of old runtimes (hot reload): start over
        _DEFERRED.clear()
    tool = DeferredTool(name=view.name, description=view.description, input_schema=view.input_schema,
                        output_schema=view.output_schema, view=view, group=group, group_title=group_title)
    _DEFERRED[id(view)] = (view, view.input_schema, tool)
    return tool
