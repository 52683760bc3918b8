"""The plain doors: models, agents, each agent's tools, health (direct tool calls: `direct_call`)."""

from __future__ import annotations

import json
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..config.model import AgentConfig
from ..dialects import FORMATS, json_tool, render_tools
from ..toolsets import AgentTool
from .errors import APIError
from .state import GatewayState, Generation


def state_of(request: Request) -> GatewayState:
    return request.app.state.gateway  # type: ignore[no-any-return]


async def read_json(request: Request, *, default: Any = None) -> Any:
    """The request body as JSON; 400 with the parser's reason when it is not."""
    return parse_json_body(await request.body(), default=default)


def parse_json_body(body: bytes, *, default: Any = None) -> Any:
    """A request body as JSON (`default` for an empty one, if given); 400 with the parser's reason."""
    if not body.strip():
        if default is not None:
            return default
        raise APIError(400, "The request body is empty; send a JSON object.")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass  # json.loads takes what orjson refuses (NaN, integers past 64 bits) and words what neither takes
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise APIError(400, f"The request body is not valid JSON: {str(exc)[:200]}") from None


def agent_tool_dict(agent_tool: AgentTool) -> dict[str, Any]:
    """The `format=json` item: the catalog fields plus what the agent's view adds."""
    return {
        **json_tool(agent_tool),
        "approval": agent_tool.approval,
        "needs_approval": agent_tool.needs_approval,
        "delegate": agent_tool.delegate,
        "fixed_args": sorted(agent_tool.fixed_args),
    }


def render_agent_tools(generation: Generation, agent: str, format: str, strict: bool = False) -> list[dict[str, Any]]:
    """An agent's tools in one dialect, rendered once per generation."""

    def build() -> list[dict[str, Any]]:
        tools = list(generation.toolset(agent))
        if format == "json":
            return [agent_tool_dict(t) for t in tools]
        return render_tools(tools, format, strict=strict)

    return generation.memo(("tools", agent, format, strict), build)  # type: ignore[no-any-return]


async def healthz(request: Request) -> Response:
    generation = state_of(request).current
    runtime = generation.runtime
    return JSONResponse({
        "status": "ok",
        "agents": len(runtime.manifest.agents),
        "tools": len(runtime.catalog),
        "diagnostics": len(runtime.diagnostics),
        "reloads": state_of(request).reloads,
    })


def _model(agent: AgentConfig) -> dict[str, Any]:
    return {"id": agent.name, "object": "model", "created": 0, "owned_by": "gateway", "description": agent.description}


async def list_models(request: Request) -> Response:
    manifest = state_of(request).current.runtime.manifest
    return JSONResponse({"object": "list", "data": [_model(agent) for agent in manifest.agents.values()]})


async def get_model(request: Request) -> Response:
    generation = state_of(request).current
    name = request.path_params["model"]
    visible = request.scope.get("gateway.agents")  # set by the auth layer: the caller's agents (None: all)
    if visible is not None and name not in visible:  # another client's agent: as unknown as a missing one
        raise APIError(404, f"Unknown model {name!r}; GET /v1/models lists yours.", code="model_not_found")
    return JSONResponse(_model(generation.agent(name, code="model_not_found")))


async def list_agents(request: Request) -> Response:
    generation = state_of(request).current
    data = []
    for name, agent in generation.runtime.manifest.agents.items():
        toolset = generation.toolset(name)
        data.append({
            "name": name,
            "description": agent.description,
            "model": agent.model,
            "approval": agent.policy.approval,
            "delegates": list(agent.delegates),
            "tools": toolset.names,
        })
    return JSONResponse({"data": data})


async def list_tools(request: Request) -> Response:
    generation = state_of(request).current
    agent = request.path_params["agent"]
    format = request.query_params.get("format", "json")
    if format not in FORMATS:
        raise APIError(400, f"Unknown format {format!r}; use one of: {', '.join(FORMATS)}.", param="format")
    strict = request.query_params.get("strict", "false").lower() in ("1", "true", "yes")
    tools = render_agent_tools(generation, known_agent(generation, agent), format, strict)
    return JSONResponse({"agent": agent, "format": format, "data": tools})


def known_agent(generation: Generation, agent: str) -> str:
    generation.agent(agent)
    return agent


def routes() -> list[Route]:
    """The plain doors."""
    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/models/{model}", get_model, methods=["GET"]),
        Route("/agents", list_agents, methods=["GET"]),
        Route("/agents/{agent}/tools", list_tools, methods=["GET"]),
    ]
