"""Trying a tool from the console: the form's arguments, validated as the gateway validates, run as a direct call."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...catalog import AgentTool
from ...execution.runner import merge_arguments
from ..api_errors import status_for_result
from ..direct_call import refuse_unread, run_direct_call
from ..routes import read_json, state_of
from .catalog_pages import known_tool, visible_agent
from .rendering import json_error, viewer_of

if TYPE_CHECKING:
    from .rendering import Console


async def argument_problems(generation: Any, agent_tool: AgentTool, arguments: Any) -> list[str]:
    """What is wrong with `arguments` for the tool, by the rule and in the words the pipeline gives the model."""
    if agent_tool.tool is None:
        return []  # a delegation tool checks its own `task`
    if not isinstance(arguments, dict):
        return [f"the arguments must be a JSON object, not {type(arguments).__name__}"]
    return await generation.executor.check_arguments(  # type: ignore[no-any-return]
        agent_tool.tool, merge_arguments(arguments, agent_tool.fixed_args))


def routes(console: Console) -> list[Route]:
    async def run_tool(request: Request) -> Response:
        state = state_of(request)
        body = await read_json(request)
        arguments = body.get("arguments") if isinstance(body, dict) else None
        async with state.use() as generation:
            agent = visible_agent(request, generation)
            agent_tool = known_tool(generation, agent, request.path_params["tool"])
            refused = await console.charge(viewer_of(request), agent)
            if refused is not None:
                return refused
            viewer = viewer_of(request).name
            if not isinstance(arguments, dict):  # recorded as any call whose arguments could not be read
                why = "Send {\"arguments\": {...}}: the tool's arguments as a JSON object."
                await refuse_unread(generation.runner.for_agent(agent).plan(agent_tool), arguments, why,
                                    door="console", client=viewer)
                return json_error(400, why, param="arguments")
            started = time.perf_counter()
            # Invalid arguments too go through the pipeline, whose validation refuses them (nothing sent) and
            # records the call, as on every door.
            result = await run_direct_call(state, generation, agent, agent_tool, arguments, client=viewer,
                                           door="console")
            elapsed = (time.perf_counter() - started) * 1000
            if result.error_type == "invalid_arguments":
                problems = await argument_problems(generation, agent_tool, arguments)
                if problems:  # each in the words the model would get back
                    return json_error(422, "Invalid arguments; nothing was sent.", code="invalid_arguments",
                                      problems=problems)
        return JSONResponse({"status": status_for_result(result), "result": result.to_dict(),
                             "elapsed_ms": round(elapsed, 3)})

    return [Route("/agents/{agent}/tools/{tool}/run", run_tool, methods=["POST"])]
