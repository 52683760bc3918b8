"""One MCP `tools/call` through the gateway's call pipeline.

Every MCP call, over HTTP in either protocol era and over stdio, runs through `answer_call`, and `answer_call`
hands the call to the pipeline in exactly one place (`run_planned`, as the direct door does: fixed arguments,
validation, approval, limits, breaker, execution, the output check, redaction, audit; `gateway.execution.pipeline`).
What is MCP's own stays here and in `results`: finding the agent's tool, and shaping the `CallToolResult`.
"""

from __future__ import annotations

import secrets
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError

from ...assembly import GatewayState, Generation
from ...codemode import RUN_CODE, RUN_CODE_TOOL
from ...execution.runner import CallPlan
from ...jsondepth import MAX_DEPTH, too_deep
from ...kernel.caller import bind_caller
from ...messages import ToolCall, ToolResult
from ..api_errors import APIError
from ..direct_call import door_plan, refuse_unread, run_planned
from ..direct_script import run_direct_script
from . import search
from .listing import checked_agent, era_of
from .results import ResultAside, call_result, wire_result


async def answer_call(state: GatewayState, agent: str, name: str, arguments: dict[str, Any],
                      protocol_version: str | None, client: str | None,
                      found: list[str] | None = None, *, url_elicitation: bool = False,
                      aside: ResultAside | None = None) -> dict[str, Any] | None:
    """The `CallToolResult` (wire form) of one call; None when the agent has no tool `name`.

    `found`: the session's found tools, which `search_tools` extends (None: a stateless request).
    `url_elicitation`: the client takes URL elicitations: a call whose user has not connected the api's account
    yet is answered with one (`UrlElicitationRequiredError`, the connect link) instead of a tool error.
    `aside`: where an agent tool's structured content goes when the door writes the answer itself (`results`)."""
    async with state.use() as generation:
        checked_agent(generation, agent)
        config = generation.runtime.manifest.agents[agent]
        plan = door_plan(generation, agent, name)  # the agent's tool, and how it is called: once per generation
        agent_tool = plan.agent_tool if plan is not None else None
        if too_deep(arguments):  # the SDK reads 1,000 levels; the pipeline's walks recurse (`gateway.jsondepth`)
            return await _too_deep(generation, agent, name, plan, client)
        if agent_tool is None and name == RUN_CODE and config.code_mode != "off":
            try:
                result = await run_direct_script(state, generation, agent, arguments, client=client, door="mcp")
            except APIError as error:
                raise _unrecorded(error) from None
            return call_result(RUN_CODE_TOOL, result, modern=era_of(protocol_version) == "modern")
        if agent_tool is not None and config.code_mode == "only":
            return wire_result(f"{name} is not called on its own here: call it as a function in a {RUN_CODE} "
                               f"script ({name}(name=value, ...)).", None, is_error=True)
        if plan is None or agent_tool is None:  # search_tools, describe_tool, call_tool of an agent with tool search
            toolset = generation.toolset(agent)
            if not search.searching(config, toolset):
                return None

            async def call_tool(target: str, inner: dict[str, Any]) -> dict[str, Any] | None:
                return await answer_call(state, agent, target, inner, protocol_version, client,
                                         url_elicitation=url_elicitation)

            return await search.answer_meta(config, toolset, name, arguments, call_tool, found)
        try:
            result = await run_planned(plan, arguments, client=client, door="mcp")
        except APIError as error:  # 503: the audit row could not be written, so no result goes out
            raise _unrecorded(error) from None
        link = result.body.get("connect_url") if result.error_type == "not_connected" and isinstance(
            result.body, dict) else None
        if url_elicitation and isinstance(link, str):
            raise UrlElicitationRequiredError([types.ElicitRequestURLParams(
                message=result.error or "Connect your account first.", url=link,
                elicitation_id=secrets.token_urlsafe(12))])
        return call_result(agent_tool, result, modern=era_of(protocol_version) == "modern", aside=aside)


def _unrecorded(error: APIError) -> MCPError:
    """A call the gateway cannot record (the audit's store refused or did not answer): a JSON-RPC error, not a tool
    result with `isError`. MCP's spec makes server errors protocol errors and keeps `isError` for what the model can
    act on (an api's failure, bad arguments); this is the gateway's own state failing, which the chat door answers
    by ending the run with 503 before its model is told anything, and the direct door with 503. A model given it as
    a tool error would retry into the same refusal or, for a call that may have run upstream, repeat a write. The
    data carries what the HTTP doors' answer says: `{"status": 503, "code": "audit_unavailable"}`."""
    return MCPError(types.INTERNAL_ERROR, error.message, {"status": error.status, "code": error.code})


async def _too_deep(generation: Generation, agent: str, name: str, plan: CallPlan | None,
                    client: str | None) -> dict[str, Any]:
    """A call whose arguments nest deeper than the gateway reads: refused unsent, and for a tool or a script
    recorded as a call whose arguments were found invalid (its row holds a note, not the arguments)."""
    why = (f"the arguments nest arrays and objects more than {MAX_DEPTH} levels deep, which the gateway does not "
           "read; nothing was sent")
    note = f"(arguments nested more than {MAX_DEPTH} levels deep, not read)"
    try:
        if plan is not None and plan.agent_tool is not None:
            await refuse_unread(plan, note, why, door="mcp", client=client)
        elif name == RUN_CODE:
            call = ToolCall(id=f"code_{secrets.token_hex(8)}", name=RUN_CODE, raw_arguments=note, parse_error=why)
            with bind_caller(client=client, agent=agent):
                await generation.runner.for_agent(agent).refuse(
                    RUN_CODE_TOOL, call, ToolResult.failure("invalid_arguments", why), door="mcp", client=client)
    except APIError as error:  # 503: the refusal's audit row could not be written
        raise _unrecorded(error) from None
    return wire_result(f"Error (invalid_arguments): {why}", None, is_error=True)
