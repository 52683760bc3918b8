"""One tool call of a running loop: its scope (the approval a human gave it; where a delegated run started inside
it reports its steps), its `Step`, and its result as the model reads it.

The loop sets the scope (`current_call`) around each call it runs; the tool runner reads it inside the call:
`current_approval()` for the audit row, `sub_run(agent)` when the call delegates to another agent.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .catalog import AgentTool
from .kernel.calls import Door, HostedProceed
from .loop_types import EventHandler, LoopEvent, Step
from .messages import ToolCall, ToolResult
from .truncation import CUT_NOTE

if TYPE_CHECKING:
    from .observe.runs import RunObserver

Invoke = Callable[[AgentTool, ToolCall], Awaitable[ToolResult]]


@runtime_checkable
class CheckingInvoke(Protocol):
    """An `Invoke` that can also judge a call's arguments without running it (None: valid)."""

    async def __call__(self, tool: AgentTool, call: ToolCall) -> ToolResult: ...

    async def check(self, tool: AgentTool, call: ToolCall) -> ToolResult | None: ...


@runtime_checkable
class ScriptingInvoke(Protocol):
    """An `Invoke` that audits a `run_code` call as a call of its own (`gateway.execution.runner.ToolRunner.script`):
    its row written before `run` starts the script, the script's calls under the row's run id."""

    async def script(self, call: ToolCall, run: HostedProceed, *, door: Door, client: str | None,
                     approval: str | None = None) -> ToolResult: ...


@runtime_checkable
class RefusingInvoke(Protocol):
    """An `Invoke` that records a call refused because its arguments could not be read (`ToolCall.parse_error`) as
    a call of its own (`gateway.execution.runner.ToolRunner.refuse`): its audit row, span and metrics, as for a call
    whose arguments the validation refused; it answers `refusal`, nothing run."""

    async def refuse(self, agent_tool: AgentTool, call: ToolCall, refusal: ToolResult, *, door: Door,
                     client: str | None) -> ToolResult: ...


@runtime_checkable
class HoldingInvoke(Protocol):
    """An `Invoke` that says whether `count` more calls of the run's client may wait for a human
    (`gateway.execution.runner.ToolRunner.hold_refusal`): the refusal that answers each of them instead, or None."""

    async def hold_refusal(self, count: int) -> ToolResult | None: ...


@dataclass(slots=True)
class CallScope:
    """The tool call a run is executing, as a delegated run started inside it sees it."""

    emit: EventHandler | None
    steps: list[Step] = field(default_factory=list)
    approval: str | None = None
    """The id of the approval a human gave this call (the run resumed with an approving decision)."""


current_call: ContextVar[CallScope | None] = ContextVar("gateway_loop_call", default=None)


def current_approval() -> str | None:
    """Inside a running loop's `invoke`: the id of the approval a human gave the call being run, or None."""
    scope = current_call.get()
    return scope.approval if scope is not None else None


class SubRun:
    """How a delegated agent's run reports to the run whose call started it (see `sub_run`)."""

    def __init__(self, scope: CallScope, agent: str) -> None:
        self._scope = scope
        self.agent = agent

    async def on_event(self, event: LoopEvent) -> None:
        """The sub-run's `on_event`: its steps go on to the lead's caller as they happen (text stays inside:
        it is the sub-agent's answer to the lead, not to the user)."""
        if event.type not in ("step_started", "step_finished") or event.step is None:
            return
        if event.step.agent is None:
            event.step.agent = self.agent
        if self._scope.emit is not None:
            await self._scope.emit(event)

    def finished(self, steps: Sequence[Step]) -> None:
        """The sub-run's steps become the delegating call's `Step.steps`."""
        for step in steps:
            if step.agent is None:
                step.agent = self.agent
        self._scope.steps.extend(steps)


def sub_run(agent: str) -> SubRun | None:
    """Inside a running loop's tool call: the reporter for a delegated run by `agent`; None outside a loop."""
    scope = current_call.get()
    return SubRun(scope, agent) if scope is not None else None


def shown_arguments(observer: RunObserver | None, arguments: dict[str, Any] | None) -> dict[str, Any] | None:
    """A call's arguments as its step shows them (the chat's caller, its stream, the stored run): with the gateway's
    secrets redacted, so that a call refused for carrying one (`credential_in_arguments`) does not hand it to the
    caller instead. A copy only when they held one."""
    redactor = observer.redactor if observer is not None else None
    return arguments if redactor is None or arguments is None else redactor.value(arguments)


def call_step(call: ToolCall, arguments: dict[str, Any] | None, result: ToolResult | None, iteration: int) -> Step:
    step = Step(tool=call.name, arguments=arguments, call_id=call.id, iteration=iteration)
    if result is not None:
        step.ok, step.status, step.error, step.error_type = result.ok, result.status, result.error, result.error_type
        step.duration_ms, step.warning = result.duration_ms, result.warning
    return step


def result_content(result: ToolResult) -> str:
    """A result as the model reads it: the body for a success, a JSON error object for a failure."""
    if result.ok:
        body = result.body
        text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)
        if result.truncated:
            text += "\n" + CUT_NOTE
        if result.warning:
            text += f"\n[warning: {result.warning}]"
        return text
    payload: dict[str, Any] = {"error": result.error or "the call failed", "error_type": result.error_type}
    if result.status is not None:
        payload["status"] = result.status
    if result.body not in (None, ""):
        payload["body"] = result.body
    return json.dumps(payload, ensure_ascii=False, default=str)
