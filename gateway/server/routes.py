"""The plain doors: models, agents, each agent's tools, direct tool calls, health.

`POST /agents/{agent}/tools/{tool}` takes the arguments object as its body and answers the
`ToolResult`: 200 when the call succeeded, otherwise the OpenAI-shaped error with the status of
the failure (422 invalid arguments, 502 upstream, 504 timeout, ...) and the full `ToolResult`
beside it under `result`, so a caller sees both a standard error and every detail.
"""

from __future__ import annotations

import json
import random
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..audit import bind_caller, current_caller
from ..dialects import json_tool, render_tools
from ..manifest import AgentConfig
from ..messages import ToolCall, ToolResult
from ..toolsets import AgentTool
from .errors import APIError, FastJSONResponse, status_for_result
from .state import GatewayState, Generation

FORMATS = ("json", "openai", "anthropic", "gemini", "mcp")


def state_of(request: Request) -> GatewayState:
    return request.app.state.gateway  # type: ignore[no-any-return]


async def read_json(request: Request, *, default: Any = None) -> Any:
    """The request body as JSON; 400 with the parser's reason when it is not."""
    body = await request.body()
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
    tools = render_agent_tools(generation, _known_agent(generation, agent), format, strict)
    return JSONResponse({"agent": agent, "format": format, "data": tools})


async def call_tool(request: Request) -> Response:
    state = state_of(request)
    async with state.use() as generation:
        agent = _known_agent(generation, request.path_params["agent"])
        name = request.path_params["tool"]
        agent_tool = generation.toolset(agent).get(name)
        if agent_tool is None:
            raise APIError(404, f"Agent {agent!r} has no tool {name!r}; GET /agents/{agent}/tools lists them.",
                           code="unknown_tool")
        arguments = await read_json(request, default={})
        if not isinstance(arguments, dict):
            raise APIError(400, f"The body must be the arguments as a JSON object, not {type(arguments).__name__}.")
        result = await run_direct_call(state, generation, agent, agent_tool, arguments, client=_client_of(request))
    status = status_for_result(result)
    if status == 200:
        return FastJSONResponse(result.to_dict())
    if status == 202:
        return FastJSONResponse(result.to_dict(), status_code=202)
    notes = current_caller().notes  # a tool bucket's refusal leaves its Retry-After here (GuardedExecutor)
    retry_after = notes.get("retry_after") if status == 429 and notes is not None else None
    error = APIError(status, result.error or f"The call failed ({result.error_type}).",
                     code=result.error_type or None, extra={"result": result.to_dict()},
                     headers={"Retry-After": retry_after} if retry_after else None)
    return error.response()


async def run_direct_call(state: GatewayState, generation: Generation, agent: str, agent_tool: AgentTool,
                          arguments: dict[str, Any], *, client: str | None = None) -> ToolResult:
    """One call outside any chat (HTTP door and MCP): approval hook first, then the tool runner."""
    # An id, not a secret: Python's PRNG (os.urandom and uuid4 cost a system call per call).
    call = ToolCall(id=f"direct_{random.getrandbits(64):016x}", name=agent_tool.name, arguments=arguments,
                    raw_arguments=arguments)
    if agent_tool.needs_approval:
        hook = state.options.get("approve_direct_call")
        if hook is None:
            return ToolResult.failure(
                "approval_denied",
                f"Tool {agent_tool.name!r} of agent {agent!r} needs a human's approval (approval: "
                f"{agent_tool.approval}) and this gateway keeps no approval queue for direct calls.")
        pending = await hook(agent=agent, agent_tool=agent_tool, call=call, client=client)
        if pending is not None:
            return pending  # type: ignore[no-any-return]
    caller = current_caller()
    if caller.client == client and caller.agent == agent:  # the HTTP door: the auth layer bound it already
        return await generation.runner(agent_tool, call)  # type: ignore[no-any-return]
    with bind_caller(client=client, agent=agent):  # MCP handlers run outside the request's context: bind here
        return await generation.runner(agent_tool, call)  # type: ignore[no-any-return]


def _known_agent(generation: Generation, agent: str) -> str:
    generation.agent(agent)
    return agent


def _client_of(request: Request) -> str | None:
    client = request.scope.get("gateway.client")
    return client if isinstance(client, str) else None


def routes(*, hot: bool | None = None) -> list[Route]:
    """The plain doors; `hot=True` only the direct tool call (which the app tries first), `hot=False` the others."""
    call = [Route("/agents/{agent}/tools/{tool}", call_tool, methods=["POST"])]
    others = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/models/{model}", get_model, methods=["GET"]),
        Route("/agents", list_agents, methods=["GET"]),
        Route("/agents/{agent}/tools", list_tools, methods=["GET"]),
    ]
    return call if hot else others if hot is False else others + call
