"""The console's catalog pages: the agents, one agent's tools (with search), one tool.

A search on these pages is the gateway's tool search (`gateway.offer.toolsearch.search`, the one every door uses),
run in a worker thread as everywhere: the agent's tools best first, only those it finds (a score above 0); when
nothing found is close to the request (`gateway.offer.closeness`), the page says so above the closest."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...assembly import Generation
from ...catalog import AgentTool
from ...config.model import AgentConfig
from ...dialects import render_tools
from ...offer.closeness import Match
from ...offer.toolsearch import find
from ...providers.registry import ADAPTERS
from ...safety.ratelimit import Limit
from ..api_errors import APIError
from ..routes import state_of, toolset_of
from .forms import form_fields
from .rendering import viewer_of

if TYPE_CHECKING:
    from .rendering import Console



def routes(console: Console) -> list[Route]:
    async def agents_page(request: Request) -> Response:
        generation = state_of(request).current
        viewer = viewer_of(request)
        query = request.query_params.get("q", "").strip()
        agents = [_agent_summary(generation, generation.runtime.manifest.agents[name])
                  for name in viewer.visible(generation.runtime.manifest.agents)]
        scored, weak = [], []
        for a in agents if query else []:
            tools, match = await search_tools(generation, a["name"], query, EVERY_AGENT_LIMIT)
            scored += [(score, a["name"], t) for t, score in tools]
            if match == "weak":
                weak.append(a["name"])
        scored.sort(key=lambda item: -item[0])
        found = [(name, t) for _, name, t in scored]
        return console.render(request, "agents.html", agents=agents, query=query, found=found, weak=weak,
                              title="Agents")

    async def agent_page(request: Request) -> Response:
        generation = state_of(request).current
        name = visible_agent(request, generation)
        agent = generation.runtime.manifest.agents[name]
        query = request.query_params.get("q", "").strip()
        match: Match | None = None
        if query:
            found, match = await search_tools(generation, name, query)
            tools = [t for t, _ in found]
        else:
            tools = list(generation.toolset(name))
        return console.render(request, "agent.html", agent=agent, summary=_agent_summary(generation, agent),
                              tools=tools, query=query, match=match, limits=_agent_limits(console, agent), title=name)

    async def tool_page(request: Request) -> Response:
        generation = state_of(request).current
        name = visible_agent(request, generation)
        agent = generation.runtime.manifest.agents[name]
        agent_tool = known_tool(generation, name, request.path_params["tool"])
        provider = generation.runtime.manifest.providers.get(agent.provider)
        adapter = ADAPTERS.get(provider.kind) if provider is not None else None
        dialect = adapter.tool_format if adapter is not None else "openai"
        model_view = render_tools([agent_tool], dialect)[0]
        exact = agent_tool.tool.input_schema if agent_tool.tool is not None else agent_tool.input_schema
        return console.render(
            request, "tool.html", agent=agent, tool=agent_tool, model_view=model_view, dialect=dialect,
            exact_schema=exact, fields=form_fields(agent_tool.input_schema), limit=_tool_limit(console, agent_tool),
            agent_limits=_agent_limits(console, agent), title=f"{agent_tool.name} · {name}")

    return [
        Route("/agents", console.page(agents_page), methods=["GET"]),
        Route("/agents/{agent}", console.page(agent_page), methods=["GET"]),
        Route("/agents/{agent}/tools/{tool}", console.page(tool_page), methods=["GET"]),
    ]


def visible_agent(request: Request, generation: Generation) -> str:
    """The path's agent, when this viewer may see it; another's agent is as unknown as a missing one."""
    name = request.path_params["agent"]
    if not viewer_of(request).may_see(name) or name not in generation.runtime.manifest.agents:
        raise APIError(404, f"No agent {name!r} here.", code="unknown_agent")
    return str(name)


def known_tool(generation: Generation, agent: str, name: str) -> AgentTool:
    agent_tool = toolset_of(generation, agent).get(name)
    if agent_tool is None:
        raise APIError(404, f"Agent {agent!r} has no tool {name!r}.", code="unknown_tool")
    return agent_tool


def _agent_summary(generation: Generation, agent: AgentConfig) -> dict[str, Any]:
    tools = list(toolset_of(generation, agent.name))
    return {"name": agent.name, "description": agent.description, "model": agent.model,
            "approval": agent.policy.approval, "tools": len(tools),
            "under_approval": sum(1 for t in tools if t.needs_approval), "delegates": list(agent.delegates)}


AGENT_LIMIT = 50
"""Tools one agent's page lists for a search."""
EVERY_AGENT_LIMIT = 20
"""Tools per agent the agents page lists for a search of all of them."""


async def search_tools(generation: Generation, agent: str, query: str,
                       limit: int = AGENT_LIMIT) -> tuple[list[tuple[AgentTool, float]], Match | None]:
    """The agent's tools that tool search finds for `query`, best first, with their scores; and whether the best is
    close to the request (`Found.match`)."""
    toolset = toolset_of(generation, agent)
    found = await anyio.to_thread.run_sync(find, generation.runtime.catalog, toolset, query, limit)
    return [(agent_tool, hit["score"]) for hit in found.items
            if (agent_tool := toolset.get(hit["name"])) is not None], found.match


def describe_limit(limit: Limit | None) -> str:
    if limit is None:
        return "no limit"
    per_minute = limit.rate * 60
    rate = f"{per_minute:g}/min" if per_minute >= 1 else f"{limit.rate * 3600:g}/h"
    return f"{rate}, bursts of {limit.burst:g}"


def _agent_limits(console: Console, agent: AgentConfig) -> str:
    limits = console.safety.limiter.limits
    return describe_limit(limits.agents.get(agent.name) or limits.agent)


def _tool_limit(console: Console, agent_tool: AgentTool) -> str:
    limits = console.safety.limiter.limits
    name = agent_tool.tool.name if agent_tool.tool is not None else agent_tool.name
    return describe_limit(limits.tools.get(name) or limits.tool)
