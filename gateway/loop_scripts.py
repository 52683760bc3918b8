"""The loop's `run_code` calls (code mode, `gateway.codemode`): each script's tool calls are the run's own calls.

A script's tool call goes through the loop's `invoke` (the call pipeline of the chat door: validation, limits,
breaker, hooks, audit row, trace span) as one step nested in the `run_code` step (`Step.steps`), reported live
like any step, and counted against the run's `max_tool_calls`. A call whose tool needs approval (with valid
arguments) pauses the script: the loop pauses the run with that call as the pending approval (its tool and
arguments, the `run_code` call's id) and keeps the script's state (`ScriptCalls.paused`) and the results of the
batch's other calls in the run's state. When the run resumes with the decision, the script goes on from its
snapshot; the batch's other calls are not run again.

The script itself is a call of its own in the audit when the loop's `invoke` can say so (`ScriptingInvoke`, the
tool runner): one row for each time it runs (its start, and its going on after a decision), written before the
script starts, its outcome after (a script that waits ends its row as `approval_pending`), under the chat's run id.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from .catalog import AgentTool
from .codemode import RUN_CODE, FunctionNames, Limits, Paused, Script
from .config.model import AgentConfig
from .kernel.caller import current_caller
from .kernel.calls import HostedCall
from .loop_calls import HoldingInvoke, Invoke, RefusingInvoke, ScriptingInvoke, shown_arguments
from .loop_types import Decision, LoopEvent, Step
from .messages import ToolCall, ToolResult
from .toolsets import Toolset

if TYPE_CHECKING:
    from .observe.runs import RunObserver

RunInScope = Callable[[AgentTool, ToolCall, str | None, list[Step]], Awaitable[ToolResult]]
"""Runs one call through the loop's `invoke` in a call scope of its own (its approval; its delegated steps)."""


class ScriptLoop(Protocol):
    """What a run lends its scripts (the loop's `_Loop`)."""

    agent: AgentConfig
    toolset: Toolset
    invoke: Invoke
    tool_calls: int
    iteration: int
    observer: RunObserver | None

    async def emit(self, event: LoopEvent) -> None:
        """Report an event to the run's caller."""

    async def check(self, tool: AgentTool, call: ToolCall) -> ToolResult | None:
        """The pipeline's refusal of the call's arguments; None when they are valid."""


@dataclass(slots=True, kw_only=True)
class ScriptPause:
    """A script of this batch waiting for a human: its pause and the steps it made before."""

    paused: Paused
    steps: list[Step] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.paused.state, "tool": self.paused.tool, "arguments": self.paused.arguments,
                "call_id": self.paused.call_id, "steps": [s.to_dict() for s in self.steps]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScriptPause:
        paused = Paused(tool=data["tool"], arguments=data["arguments"], call_id=data["call_id"], state=data["state"])
        return cls(paused=paused, steps=[Step.from_dict(s) for s in data.get("steps") or []])


class _Host:
    """One script's `ScriptHost`: the run's tools and pipeline, its steps collected in `steps`; `waiting`: the
    `run_code` calls of this turn that paused before it (each holds one of its client's places among the calls
    waiting for a human)."""

    def __init__(self, loop: ScriptLoop, run_in_scope: RunInScope, steps: list[Step], waiting: list[str]) -> None:
        self.loop = loop
        self.run_in_scope = run_in_scope
        self.steps = steps
        self.waiting = waiting
        self.no_room: dict[str, ToolResult] = {}
        """Call id -> the refusal of a gated call its client has no room to keep waiting (`needs_pause`)."""

    def tool(self, name: str) -> AgentTool | None:
        return self.loop.toolset.get(name)

    async def needs_pause(self, tool: AgentTool, call: ToolCall) -> bool:
        # A gated call with invalid arguments is run instead: the pipeline refuses it, with its audit row, and
        # the script gets the validation error at once rather than after a human's wait.
        if not tool.needs_approval or await self.loop.check(tool, call) is not None:
            return False
        invoke = self.loop.invoke
        # The turn's scripts that paused before this one count too: each looked for room for itself alone, and a
        # run pausing with all of them past the client's cap could not be kept (the whole chat was refused).
        ahead = len(self.waiting)
        full = await invoke.hold_refusal(1 + ahead) if isinstance(invoke, HoldingInvoke) else None
        if full is None:
            return True
        # Its client has as many calls waiting as it may (gateway.max_pending_approvals_per_client): the script
        # gets the refusal as the call's failure, as a direct call or an MCP script would, and goes on; paused,
        # its run could not have been kept, and the whole chat was refused with 429 (mend46).
        if ahead:
            # The model reads this once the run resumes, that is once the scripts ahead are decided: it can retry.
            full = ToolResult.failure(full.error_type or "rate_limited", (
                f"{full.error} An earlier {RUN_CODE} script of this turn took that place: it waits for a human's "
                f"approval, so this {tool.name} call was not sent. That approval is decided by the time you read "
                f"this: call {tool.name} again, in a new {RUN_CODE} script."))
        self.no_room[call.id] = full
        return False

    async def call(self, tool: AgentTool, call: ToolCall, approval: str | None) -> ToolResult:
        loop = self.loop
        shown = shown_arguments(loop.observer, call.arguments)
        step = Step(tool=call.name, arguments=shown, call_id=call.id, iteration=loop.iteration)
        await loop.emit(LoopEvent(type="step_started", step=step))
        cap = loop.agent.policy.max_tool_calls
        started = time.perf_counter()
        inner: list[Step] = []
        refusal = self.no_room.pop(call.id, None)
        if refusal is not None:  # recorded as any refused call: its audit row, span and metrics
            invoke = loop.invoke
            result = await invoke.refuse(tool, call, refusal, door="chat", client=current_caller().client) \
                if isinstance(invoke, RefusingInvoke) else refusal
        elif loop.tool_calls >= cap:
            result = ToolResult.failure("rate_limited", f"this run reached its cap of {cap} tool calls; the call "
                                        "was not executed.")
        else:
            loop.tool_calls += 1
            result = await self.run_in_scope(tool, call, approval, inner)
        done = Step(tool=call.name, arguments=shown, call_id=call.id, iteration=loop.iteration,
                    ok=result.ok, status=result.status, error=result.error, error_type=result.error_type,
                    duration_ms=(time.perf_counter() - started) * 1000, steps=inner, warning=result.warning)
        self.steps.append(done)
        await loop.emit(LoopEvent(type="step_finished", step=done))
        return result


class ScriptCalls:
    """The `run_code` calls of one run."""

    def __init__(self, loop: ScriptLoop, names: FunctionNames, run_in_scope: RunInScope) -> None:
        """Parameters: names: the scripts' function names (the run's `ToolOffer.functions`); run_in_scope: how the
        run executes one call."""
        self.loop = loop
        self.names = names
        self.run_in_scope = run_in_scope
        self.paused: dict[str, ScriptPause] = {}
        """`run_code` call id -> its script, waiting for a decision (kept in the paused run's state)."""
        self.waiting: list[str] = []
        """The `run_code` calls that paused in this pass of the run (a pause ends the pass: the run is kept)."""
        self.turn = anyio.Lock()
        """Held by the script that runs (`run`'s caller takes it): a turn's scripts run one at a time."""

    def _script(self, call: ToolCall, steps: list[Step]) -> Script:
        agent = self.loop.agent
        observer = self.loop.observer
        per_client = observer.code_workers_per_client if observer is not None else None
        return Script(call.id, self.names, _Host(self.loop, self.run_in_scope, steps, self.waiting),
                      Limits.of(agent.code_limits, per_client=per_client),
                      agent.policy.max_result_bytes, observer.sandboxes if observer is not None else None)

    async def run(self, call: ToolCall, steps: list[Step], decision: Decision | None,
                  approval: str | None) -> ToolResult | None:
        """The `run_code` call's result, or None when its script paused (then it is in `paused`). With
        `decision`, the call's script paused before and goes on with it. The caller holds `turn`.

        A turn's scripts run one after another, in the order they came (each with its own audit row and limits; the
        turn's other calls run beside them): the second looks for room for its client's waiting calls knowing
        whether the first paused, and a client's share of the sandboxes (`max_code_workers_per_client`) is not
        spent on the model's own scripts racing each other. The caller takes `turn` before it takes one of the
        turn's places (`max_parallel_calls`), so that a script waiting its turn holds none of them."""
        waiting = self.paused.pop(call.id, None)
        paused: list[Paused] = []

        async def script(_: HostedCall | None) -> ToolResult:
            if waiting is not None and decision is not None:
                steps.extend(waiting.steps)
                outcome = await self._script(call, steps).resume(waiting.paused.state, decision,
                                                                 approval or "approved")
            else:
                outcome = await self._script(call, steps).run(call.arguments)
            if isinstance(outcome, Paused):
                paused.append(outcome)
                return ToolResult.failure("approval_pending", f"the script waits at a call of {outcome.tool!r} for "
                                          "a human's approval")
            return outcome

        invoke = self.loop.invoke
        if isinstance(invoke, ScriptingInvoke):
            result = await invoke.script(call, script, door="chat", client=current_caller().client,
                                         approval=approval)
        else:
            result = await script(None)
        if paused:
            self.paused[call.id] = ScriptPause(paused=paused[0], steps=list(steps))
            self.waiting.append(call.id)
            return None
        return result
