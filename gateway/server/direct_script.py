"""A `run_code` call outside any chat (the MCP door, over HTTP and stdio): one script over the agent's tools.

The script is a call of its own in the audit (`ToolRunner.script`): its row (the caller, the agent, `run_code`,
the redacted code) is written before the script starts (or it does not start) and ends with its outcome. Each
tool call of the script runs through the generation's call pipeline as a call of that door (its audit row names
the door and the agent, and carries the script's run id). A call under approval pauses the script: the script is
kept in the store as a run of kind `script` with the call as its pending approval (listed by `GET /approvals`,
decided by any instance, after a restart too), and the caller gets an `approval_pending` result naming the
approval (the script's row ends so). Deciding it resumes the script (`resume_direct_script`): the approved call
runs once, a denied one raises in the script, and the script's result is the decision's answer (or the next
approval it waits for). Without a store nothing can hold a call: the call raises in the script.
"""

from __future__ import annotations

import random
from typing import Any

from ..assembly import GatewayState, Generation
from ..catalog import AgentTool
from ..codemode import RUN_CODE, FunctionNames, Limits, Paused, Script
from ..config.model import AgentConfig
from ..errors import AuditUnavailable
from ..kernel.caller import bind_caller, current_caller
from ..kernel.calls import Door, HostedCall
from ..loop_types import Decision
from ..messages import ToolCall, ToolResult
from ..safety.approvals import ApprovalManager
from ..store import RunRecord
from .api_errors import APIError


class _Host:
    """The script's tools and pipeline at a door outside a chat."""

    def __init__(self, generation: Generation, agent: str, client: str | None, door: Door,
                 approvals: ApprovalManager | None) -> None:
        self.generation = generation
        self.agent = agent
        self.client = client
        self.door = door
        self.approvals = approvals
        self.runner = generation.runner.for_agent(agent)

    def tool(self, name: str) -> AgentTool | None:
        return self.generation.toolset(self.agent).get(name)

    async def needs_pause(self, tool: AgentTool, call: ToolCall) -> bool:
        if not tool.needs_approval or self.approvals is None:
            return False  # without a store the pipeline refuses the call, and the refusal raises in the script
        return await self.runner.check(tool, call) is None

    async def call(self, tool: AgentTool, call: ToolCall, approval: str | None) -> ToolResult:
        door: Door = "resume" if approval is not None else self.door
        with bind_caller(client=self.client, agent=self.agent):
            return await self.runner.run(tool, call, door=door, client=self.client, approval=approval)


def _script(generation: Generation, config: AgentConfig, call_id: str, host: _Host) -> Script:
    names = FunctionNames(generation.toolset(config.name).names)
    observer = generation.observer
    return Script(call_id, names, host, Limits.of(config.code_limits, per_client=observer.code_workers_per_client),
                  config.policy.max_result_bytes, observer.sandboxes)


async def run_direct_script(state: GatewayState, generation: Generation, agent: str, arguments: dict[str, Any], *,
                            client: str | None, door: Door) -> ToolResult:
    """The script's result, or `approval_pending` when it waits for a human (then it is kept in the store)."""
    config = generation.runtime.manifest.agents[agent]
    approvals = state.safety.approvals if state.safety is not None else None
    call = ToolCall(id=f"code_{random.getrandbits(64):016x}", name=RUN_CODE, arguments=arguments,  # not a secret
                    raw_arguments=arguments)
    host = _Host(generation, agent, client, door, approvals)

    async def run(script: HostedCall) -> ToolResult:
        outcome = await _script(generation, config, call.id, host).run(script.arguments)
        if isinstance(outcome, Paused):
            assert approvals is not None  # only a host with a store pauses
            # Kept as a run under the script's run id: the calls it makes after the decision join its row's.
            return await _hold(approvals, current_caller().run_id, agent, client, call.id, outcome, door=door)
        return outcome

    try:
        with bind_caller(client=client, agent=agent):  # the caller the sandbox's share is counted for
            return await host.runner.script(call, run, door=door, client=client)
    except AuditUnavailable as exc:
        raise APIError(503, str(exc), code="audit_unavailable") from None


async def resume_direct_script(state: GatewayState, generation: Generation, run: RunRecord,
                               decision: Decision, approval: str) -> ToolResult:
    """Go on with a kept script after the decision on its pending call."""
    config = generation.runtime.manifest.agents.get(run.agent)
    if config is None:
        return ToolResult.failure("unknown_tool", f"Agent {run.agent!r} no longer exists; the script cannot go on.")
    approvals = state.safety.approvals if state.safety is not None else None
    door: Door = run.state.get("door", "mcp")
    host = _Host(generation, run.agent, run.client, door, approvals)
    with bind_caller(agent=run.agent, run_id=run.id):
        outcome = await _script(generation, config, run.state["call_id"], host).resume(run.state["script"],
                                                                                      decision, approval)
    if isinstance(outcome, Paused):
        assert approvals is not None
        return await _hold(approvals, run.id, run.agent, run.client, run.state["call_id"], outcome, door=door)
    return outcome


async def _hold(approvals: ApprovalManager, run_id: str | None, agent: str, client: str | None, call_id: str,
                paused: Paused, door: str = "mcp") -> ToolResult:
    return await approvals.hold_script(run_id=run_id, agent=agent, client=client, tool=paused.tool,
                                       arguments=paused.arguments, call_id=paused.call_id,
                                       state={"script": paused.state, "call_id": call_id, "door": door})
