"""From a call to a result: `ToolRunner` turns a door's call into an `Invocation` of the call pipeline.

An API tool runs through the generation's `Pipeline` (`gateway.execution.pipeline`) with the agent's fixed
arguments merged over the caller's (fixed values always win: they are hidden from the model and must not be
overridden by it). The runner is the loop's `invoke` (bound to one agent with `for_agent`) and what the other
doors call through `run`. A delegation tool (`AgentTool.delegate`) runs the sub-agent's own loop on the `task`
and returns its final answer as text (each of the sub-agent's calls goes through the pipeline); depth is bounded
by `gateway.max_delegation_depth` (checked at load time, enforced again here). Outside a chat (the direct and MCP
doors) a delegation is a run of its own, one of its client's runs under `gateway.max_runs_per_client` (`runs`);
inside one, the chat's place covers it. On every door the delegation is a
call of its own in the audit (`hosted`, through `Pipeline.hosted`: one row naming the caller, the delegating agent
and `ask_<agent>`, written before the sub-agent starts), and the sub-agent's calls carry that row's run id: the
chat's inside a chat, one of the delegation's own outside (the direct and MCP doors). A `run_code` script takes the
same way (`script`): its row before the script starts, its tool calls under the row's run id.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..catalog import AgentTool
from ..codemode import RUN_CODE_TOOL
from ..codemode.script import code_refusal
from ..errors import AuditUnavailable, GatewayError, OverShare
from ..kernel.caller import bind_caller, current_caller
from ..kernel.calls import Door, HostedCall, HostedProceed, Invocation
from ..kernel.memo import ByIdentity
from ..loop_calls import current_approval, sub_run
from ..messages import Message, ToolCall, ToolResult
from ..safety.shares import UNCOUNTED, Held, ShareBook
from .pipeline import Pipeline
from .stages import carried_credential

if TYPE_CHECKING:
    from ..observe.runs import RunObserver
    from ..providers.base import ProviderAdapter
    from ..safety.approvals import ApprovalManager

logger = logging.getLogger("gateway.execution")

AdapterFactory = Callable[[str], "ProviderAdapter"]
"""A provider's name -> its (pooled) adapter; `gateway.providers.AdapterPool` is one."""


class ToolRunner:
    def __init__(self, runtime: Any, pipeline: Pipeline, adapter_factory: AdapterFactory, *, depth: int = 0,
                 max_depth: int | None = None, agent: str | None = None, observer: RunObserver | None = None,
                 runs: ShareBook | None = None, approvals: ApprovalManager | None = None) -> None:
        """Run tool calls through the pipeline.

        Parameters:
            runtime: a `gateway.runtime.Runtime` (agents, toolsets, manifest) for delegation.
            pipeline: the generation's call pipeline (`build_pipeline`).
            adapter_factory: a provider's name -> adapter, for the sub-agents' loops.
            depth: how deep in a delegation chain this runner works (0: the agent the client called).
            max_depth: the delegation bound; default the manifest's `max_delegation_depth`.
            agent: the agent whose loop this runner serves (`for_agent`); None: the caller's bound agent.
            observer: the seams of runs and model calls (spans, metrics, model hooks, budgets) that the loop
                finds here (`gateway.observe.runs`); None: none.
            runs: where each client's runs are counted (`GatewayState.runs`), for the delegations started outside a
                chat; None: they are not counted.
            approvals: where calls wait for a human, asked whether a run's client has room for more before the
                run pauses (`hold_refusal`); None: not asked (the store still refuses past the cap).
        """
        self.runtime = runtime
        self.pipeline = pipeline
        self.adapter_factory = adapter_factory
        self.depth = depth
        self.agent = agent
        self.observer = observer
        self.runs = runs
        self.approvals = approvals
        manifest = getattr(runtime, "manifest", None)
        self.max_depth = max_depth if max_depth is not None else int(getattr(manifest, "max_delegation_depth", 3))
        self._per_agent: dict[str, ToolRunner] = {}
        self.plan: ByIdentity[AgentTool, CallPlan] = ByIdentity(self._plan)
        """How a door calls an `AgentTool` of this runner's agent (`for_agent`): decided once per tool."""

    def for_agent(self, agent: str) -> ToolRunner:
        """This runner as the `invoke` of `agent`'s loop (made once per agent: every direct call asks)."""
        runner = self._per_agent.get(agent)
        if runner is None:
            runner = self._per_agent[agent] = ToolRunner(self.runtime, self.pipeline, self.adapter_factory,
                                                         depth=self.depth, max_depth=self.max_depth, agent=agent,
                                                         observer=self.observer, runs=self.runs,
                                                         approvals=self.approvals)
        return runner

    def _plan(self, agent_tool: AgentTool) -> CallPlan:
        return CallPlan(self, self.agent or "", agent_tool)

    async def __call__(self, agent_tool: AgentTool, call: ToolCall) -> ToolResult:
        """The loop's `invoke`: a call of the model (approved by the loop when its tool needs approval)."""
        caller = current_caller()
        approval = current_approval()
        if agent_tool.delegate:
            return await self._delegate(agent_tool, call, door="chat", client=caller.client, approval=approval)
        if approval is None and agent_tool.tool is not None:  # a resume that names the approvals by tool
            approval = caller.approvals.get(agent_tool.tool.name)
        return await self.run(agent_tool, call, door="chat", client=caller.client, approval=approval)

    async def hold_refusal(self, count: int) -> ToolResult | None:
        """The refusal of `count` calls the loop would pause for, when the bound caller's client has no room for
        them among its calls waiting for a human (`gateway.max_pending_approvals_per_client`); None: room."""
        if self.approvals is None:
            return None
        return await self.approvals.room_for(current_caller().client, count)

    async def check(self, agent_tool: AgentTool, call: ToolCall) -> ToolResult | None:
        """The validation stage's refusal of a call, without running it (the loop asks before it queues a call for
        approval); None when it is valid or not an API call."""
        invocation = self.invocation(agent_tool, call)
        return None if invocation is None else await self.pipeline.check(invocation)

    def invocation(self, agent_tool: AgentTool, call: ToolCall, *, door: Door = "chat", client: str | None = None,
                   approval: str | None = None) -> Invocation | None:
        """The pipeline's view of the call; None for a tool bound to no operation."""
        if agent_tool.tool is None:
            return None
        agent = self.agent or current_caller().agent or ""
        return Invocation(agent=agent, agent_tool=agent_tool, tool=agent_tool.tool, call=call,
                          arguments=merge_arguments(call.arguments, agent_tool.fixed_args), client=client, door=door,
                          approval=approval)

    async def run(self, agent_tool: AgentTool, call: ToolCall, *, door: Door, client: str | None = None,
                  approval: str | None = None) -> ToolResult:
        """One call through the pipeline, from any door."""
        if agent_tool.delegate:
            return await self._delegate(agent_tool, call, door=door, client=client, approval=approval)
        invocation = self.invocation(agent_tool, call, door=door, client=client, approval=approval)
        if invocation is None:
            return ToolResult.failure("configuration_error", f"tool {agent_tool.name!r} is bound to no operation")
        return await self.pipeline(invocation)

    async def refuse(self, agent_tool: AgentTool, call: ToolCall, refusal: ToolResult, *, door: Door,
                     client: str | None) -> ToolResult:
        """A call whose arguments could not be read (`call.parse_error`: not JSON, or not an object), answered with
        `refusal` and nothing run, but observed and audited as a call whose arguments the validation refused: its
        row (`invalid_arguments`) keeps the text that came, redacted. An api call takes the pipeline's stages
        before the validation (`Pipeline.refused`); a delegation or a script its own way (`hosted`), refused by
        its check."""
        if agent_tool.tool is None or agent_tool.delegate:
            return await self.hosted(agent_tool, call, door=door, client=client, approval=None,
                                     check=lambda _: refusal, run=_never_run,
                                     kind="delegation" if agent_tool.delegate else "script")
        invocation = Invocation(agent=self.agent or current_caller().agent or "", agent_tool=agent_tool,
                                tool=agent_tool.tool, call=call, arguments={}, client=client, door=door)
        return await self.pipeline.refused(invocation, refusal)

    async def script(self, call: ToolCall, run: HostedProceed, *, door: Door, client: str | None,
                     approval: str | None = None) -> ToolResult:
        """A `run_code` call (code mode) through the pipeline's audit: its row (the caller, this agent, the
        redacted code) written before `run` starts the script, its verdict after; the script's calls under the
        row's run id. `run`: the door's way of running the script (and of holding it when it pauses)."""
        return await self.hosted(RUN_CODE_TOOL, call, door=door, client=client, approval=approval,
                                 check=_code_refusal, run=run, kind="script")

    async def hosted(self, agent_tool: AgentTool, call: ToolCall, *, door: Door, client: str | None,
                     approval: str | None, check: Callable[[HostedCall], ToolResult | None], run: HostedProceed,
                     kind: str) -> ToolResult:
        """A call the gateway answers itself (a delegation, a script) through the pipeline's audit: its row (the
        caller, this agent, the redacted arguments) written before `run` starts the work, its verdict after, and
        the calls the work makes under the row's run id: the chat's inside a chat, `<kind>-<hex>` outside."""
        caller = current_caller()
        hosted = HostedCall(agent=self.agent or caller.agent or "", agent_tool=agent_tool, call=call,
                            arguments=dict(call.arguments or {}), client=client, door=door, approval=approval)
        # Linked as a chat links its calls: by the run id. Outside a chat the call starts a run of its own.
        with bind_caller(run_id=caller.run_id or f"{kind}-{uuid.uuid4().hex}"):
            result = await self.pipeline.hosted(hosted, check, _timed(run))
        redactor = self.observer.redactor if self.observer is not None else None
        if redactor:
            # What an api call's result gets from the pipeline's redaction stage, which a hosted call does not pass:
            # a script's traceback quotes its code, a literal secret the model wrote in it included.
            result.error = redactor.text(result.error) if result.error else result.error
            result.body = redactor.value(result.body)
        return result

    async def _delegate(self, agent_tool: AgentTool, call: ToolCall, *, door: Door, client: str | None,
                        approval: str | None) -> ToolResult:
        """A delegation through the pipeline's audit (`hosted`), the sub-agent's loop on its `task`."""
        return await self.hosted(agent_tool, call, door=door, client=client, approval=approval,
                                 check=self._refusal, run=self._sub_run, kind="delegation")

    def _refusal(self, delegation: HostedCall) -> ToolResult | None:
        """Why the delegation must not start (None: it may), before its row says it runs."""
        agent_tool = delegation.agent_tool
        if agent_tool.needs_approval and delegation.approval is None and delegation.door != "chat":
            # The pipeline's approval stage sees only API calls: a delegation under `approval: always` on the
            # direct or MCP door ran the sub-agent (and its own calls, under its own policy) unapproved. The
            # chat loop holds it for a human; the other doors cannot, so they refuse it.
            return ToolResult.failure(
                "approval_denied", f"Tool {agent_tool.name!r} of agent {delegation.agent!r} needs a human's "
                f"approval (approval: {agent_tool.approval}), which this door cannot hold for a delegation: ask "
                "through the chat endpoint. Nothing was run.")
        redactor = self.observer.redactor if self.observer is not None else None
        if redactor is not None and redactor.found_in(delegation.call.arguments):
            # The sub-agent's model may be another provider's: no credential of the gateway's goes to it either.
            return carried_credential(delegation, redactor)
        task = delegation.arguments.get("task")
        if not isinstance(task, str) or not task.strip():
            return ToolResult.failure("invalid_arguments", f"{agent_tool.name} needs `task`: a non-empty string "
                                      "saying what the agent should do, with every detail it needs.")
        if self.depth >= self.max_depth:
            return ToolResult.failure("delegate_error", f"delegation to {agent_tool.delegate!r} refused: the chain "
                                      f"is already {self.depth} deep (limit {self.max_depth}). Do this part "
                                      "yourself.")
        return None

    async def _sub_run(self, delegation: HostedCall) -> ToolResult:
        """The sub-agent's loop on the delegation's `task`, holding a place in its client's share of runs when it
        is a run of its own (not inside a chat: a refusal then is the delegation's `rate_limited` result)."""
        share: Held = UNCOUNTED
        if delegation.door != "chat" and self.runs is not None:
            try:
                share = await self.runs.take(delegation.client, self.runtime.manifest.gateway.max_runs_per_client)
            except OverShare as refused:
                return ToolResult.failure("rate_limited", str(refused))
        try:
            return await self._sub_loop(delegation)
        finally:
            await share.release()

    async def _sub_loop(self, delegation: HostedCall) -> ToolResult:
        """The sub-agent's loop on the delegation's `task`; its answer as the result."""
        from .. import loop

        name = delegation.agent_tool.delegate or ""
        task = str(delegation.arguments["task"])
        try:
            agent = self.runtime.agent(name)
            toolset = self.runtime.toolset(name)
            adapter = self.adapter_factory(agent.provider)
        except (KeyError, GatewayError) as exc:
            return ToolResult.failure("delegate_error", f"agent {name!r} cannot run: {exc}")
        child = ToolRunner(self.runtime, self.pipeline, self.adapter_factory, depth=self.depth + 1,
                           max_depth=self.max_depth, agent=name, observer=self.observer, runs=self.runs,
                           approvals=self.approvals)
        report = sub_run(name)  # the lead's caller sees the sub-agent's steps, live and in the answer
        try:
            # The sub-agent's calls are its own: audit rows and per-agent limits name it, not the lead.
            with bind_caller(agent=name):
                result = await loop.run(agent, [Message(role="user", content=task)], adapter=adapter,
                                        toolset=toolset, invoke=child,
                                        on_event=report.on_event if report is not None else None)
        except AuditUnavailable:
            raise  # no answer without its audit row, however deep
        except GatewayError as exc:
            logger.info("delegation to %s failed: %s", name, exc)
            if report is not None:
                report.finished(getattr(exc, "steps", None) or [])
            return ToolResult.failure("delegate_error", f"agent {name!r} failed: {exc}")
        if report is not None:
            report.finished(result.steps)
        if result.pending_approvals:
            tools = ", ".join(sorted({p.tool for p in result.pending_approvals}))
            return ToolResult.failure("delegate_error", f"agent {name!r} needs a human's approval for {tools}, which "
                                      "a delegated run cannot wait for; nothing was executed. Ask the user to run "
                                      f"{name!r} directly.")
        text = result.message.content or ""
        if result.cut:
            text += f"\n[{name} stopped at its iteration limit; this is its summary]"
        return ToolResult(ok=True, media_type="text/plain", body=text, bytes=len(text.encode()))


class CallPlan:
    """One tool of one agent as a door calls it (the direct call, MCP, the console's try-out), decided once for a
    generation: its fixed arguments, its catalog tool and the pipeline's chain of the stages that apply to it.
    `start` makes the call's `Invocation` and hands back the chain's coroutine: the door awaits the pipeline
    itself, with no frame of the runner's or the plan's in between."""

    __slots__ = ("agent", "agent_tool", "chain", "fixed", "runner", "tool")

    def __init__(self, runner: ToolRunner, agent: str, agent_tool: AgentTool) -> None:
        self.runner = runner
        self.agent = agent
        self.agent_tool = agent_tool
        self.tool = agent_tool.tool
        self.fixed = agent_tool.fixed_args
        # A delegation tool, or one bound to no operation, takes the runner's way (`ToolRunner.run`).
        self.chain = runner.pipeline.chain(agent_tool) if self.tool is not None and not agent_tool.delegate \
            else None

    def start(self, arguments: dict[str, Any], *, door: Door, client: str | None = None) -> Awaitable[ToolResult]:
        """One call with the caller's `arguments` (the fixed ones on top), to be awaited."""
        invocation = self.invocation(arguments, door=door, client=client)
        if invocation is None or self.chain is None:
            return self.runner.run(self.agent_tool, _direct_call(self.agent_tool, arguments), door=door, client=client)
        return self.chain(invocation)

    def invocation(self, arguments: dict[str, Any], *, door: Door, client: str | None = None) -> Invocation | None:
        """The `Invocation` `start` hands the chain (a door that keeps it runs it with `chain` itself and reads
        `Invocation.sent` from it); None for a tool that takes the runner's way (a delegation, a tool bound to no
        operation)."""
        tool = self.tool
        if self.chain is None or tool is None:
            return None
        return Invocation(agent=self.agent, agent_tool=self.agent_tool, tool=tool,
                          call=_direct_call(self.agent_tool, arguments), arguments={**arguments, **self.fixed},
                          client=client, door=door)


def _direct_call(agent_tool: AgentTool, arguments: dict[str, Any]) -> ToolCall:
    """A door's call of `agent_tool` as the loop would have it. Its id is not a secret: Python's PRNG (os.urandom and
    uuid4 cost a system call per call)."""
    return ToolCall(id=f"direct_{random.getrandbits(64):016x}", name=agent_tool.name, arguments=arguments,
                    raw_arguments=arguments)


def _code_refusal(script: HostedCall) -> ToolResult | None:
    return code_refusal(script.arguments)


async def _never_run(call: HostedCall) -> ToolResult:
    raise AssertionError("a refused call is not run")  # its check refused it: the pipeline never gets here


def _timed(run: HostedProceed) -> HostedProceed:
    """`run` with its result timed: the row's latency, the whole of the work (the calls it made among it)."""

    async def timed(call: HostedCall) -> ToolResult:
        started = time.perf_counter()
        result = await run(call)
        result.duration_ms = (time.perf_counter() - started) * 1000
        return result

    return timed


def merge_arguments(arguments: dict[str, Any] | None, fixed: dict[str, Any]) -> dict[str, Any]:
    """The model's arguments with the fixed ones on top (fixed values are never the model's to change)."""
    return {**(arguments or {}), **fixed}
