"""One tool call's pipeline, the same on every door: stages chained in front of the call itself.

A door (the chat loop, the direct call, MCP over HTTP and stdio, `gateway call`, `gateway chat`, an approval's
resume) turns its request into an `Invocation` and hands it to the generation's `Pipeline`; it adds only its own
wire format. The stages, outermost first:

    observe -> audit -> redaction -> argument validation -> approval -> rate limits -> breaker and concurrency
          -> hooks -> output check -> audit before sending -> execution

so the data flows as DESIGN.md says: validation (exact schema) -> approval -> limits -> breaker -> hooks ->
execution, then the result is checked against the spec's output schema, redacted, and audited before any door
sees it. Each stage is a `Stage`: it gets the invocation and `proceed`, the rest of the pipeline, and returns the
`ToolResult` (calling `proceed` or not). The observe stage (`gateway.observe.toolcalls`) opens the
`execute_tool` span and counts the call. Which stages, in which order, is decided in one place:
`gateway.assembly.build_pipeline`.

What runs is compiled once per tool (`chain`): a stage that decides part of its work by the tool alone
(`ToolSpecific.for_tool`) answers with that part decided (the validation stage with the tool's compiled judge,
the breaker stage with its api's slots), or is left out of that tool's chain when it has nothing to do for it
(the approval stage for a tool that needs none, the output check for a tool with no schema to check). Each stage
is linked to the rest of its chain by a `_Link`, whose bound `run` is the `proceed` the stage before it calls: a
plain function that hands back the stage's own coroutine, so one call's await chain holds one frame per stage that
applies and no frame of the pipeline's own.

A tool the gateway answers itself (a delegation: an agent offered as a tool; a `run_code` script) is bound to no
operation: it takes `hosted`, through the same observe and audit stages (its `execute_tool` span, with the
sub-agent's run or the script's calls nested in it, and its metrics; its row written before the sub-agent or the
script starts, its verdict after), with its own check in the place of the argument validation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from types import FunctionType, MethodType
from typing import Any, Protocol, cast

from ..catalog import AgentTool
from ..kernel.calls import HostedCall, HostedProceed, Invocation, Proceed, Stage
from ..kernel.memo import ByIdentity
from ..messages import ToolResult


class HostedStage(Protocol):
    """A stage as a hosted call takes it (`RecordCall`, `RecordBeforeSend`: they take an `Invocation` or a
    `HostedCall`; `ObserveToolCall.hosted`)."""

    def __call__(self, invocation: HostedCall, proceed: HostedProceed) -> Awaitable[ToolResult]: ...


class Pipeline:
    """The assembled stages of a tool call; `await pipeline(invocation)` runs one call through all of them.

    Args:
        stages: outermost first.
        terminal: runs the call itself (the executor).
        validate: the argument-validation stage, also run alone by `check` (the loop checks a call before it
            queues the call for approval).
        audit: the audit stages of `hosted`: the outermost (the verdict) and the one before the sub-agent or the
            script starts (its row written first); None: hosted calls are not audited (a gateway without a store).
        observe: the observe stage of `hosted` (span and metrics), outside its audit as an api call's is; None:
            hosted calls are not observed (neither metrics nor a tracer provider).
    """

    def __init__(self, stages: Sequence[Stage], terminal: Proceed, *, validate: Stage | None = None,
                 audit: tuple[HostedStage, HostedStage] | None = None, observe: HostedStage | None = None) -> None:
        self.stages = tuple(stages)
        self._terminal = terminal
        self._validate = validate
        self._audit = audit
        self._observe = observe
        self._chains: ByIdentity[AgentTool, Proceed] = ByIdentity(self._link)

    def __call__(self, invocation: Invocation) -> Awaitable[ToolResult]:
        """The call's result, to be awaited (the outermost stage's coroutine: no frame of the pipeline's own)."""
        return self.chain(invocation.agent_tool)(invocation)

    def chain(self, agent_tool: AgentTool) -> Proceed:
        """The stages that apply to `agent_tool`, linked: `chain(tool)(invocation)` runs a call of that tool.

        A door that keeps a tool for a generation may keep its chain with it (the pipeline is the generation's)."""
        return self._chains(agent_tool)

    def _link(self, agent_tool: AgentTool) -> Proceed:
        return _linked(self.stages, agent_tool, _bound(self._terminal))

    def refused(self, invocation: Invocation, result: ToolResult) -> Awaitable[ToolResult]:
        """A call refused before its arguments could be read (they are not JSON, or no object): `result`, to be
        awaited, through the stages before the argument validation (the observe stage, the audit's, the result's
        redaction), so that it is seen and recorded as a call the validation refused, and through none after it
        (nothing is held, charged or sent). Rare: its chain is linked for the call."""
        validate = self._validate
        outer = self.stages[:self.stages.index(validate)] if validate in self.stages else ()

        async def refuse(_: Invocation) -> ToolResult:
            return result

        return _linked(outer, invocation.agent_tool, refuse)(invocation)

    def hosted(self, call: HostedCall, check: Callable[[HostedCall], ToolResult | None],
               run: HostedProceed) -> Awaitable[ToolResult]:
        """A hosted call's result (a delegation's, a script's), to be awaited: observed and audited as any call
        (its span and metrics; one row with its verdict: for one that runs, the row is written before `run` starts
        the work, or it does not start), `check` first (its refusal, or None), in the place of the argument
        validation."""
        audit = self._audit
        work: HostedProceed
        if audit is None:
            def work(call: HostedCall) -> Awaitable[ToolResult]:
                return _checked(call, check, run)
        else:
            record, before_run = audit

            def checked(call: HostedCall) -> Awaitable[ToolResult]:
                return _checked(call, check, lambda ready: before_run(ready, proceed=run))

            def work(call: HostedCall) -> Awaitable[ToolResult]:
                return record(call, proceed=checked)

        observe = self._observe
        return work(call) if observe is None else observe(call, proceed=work)

    async def check(self, invocation: Invocation) -> ToolResult | None:
        """The validation stage's refusal of `invocation`, or None when its arguments are valid."""
        if self._validate is None:
            return None
        result = await self._validate(invocation, _accept)
        return None if result.ok else result


class _Link:
    """One stage of a tool's chain with the rest of the chain at hand: `run(invocation)` is the stage's call with its
    `proceed` (by keyword, as the `Stage` protocol says).

    Not `functools.partial(stage, proceed=...)`: a partial with a keyword copies its keyword dict on every call, and
    calling the stage object from C makes the arguments' tuple and unpacks the dict again (about five objects made and
    freed a stage, a call); a bound method of a Python function, called from a stage's Python code, is a frame the
    interpreter pushes inline, with nothing made."""

    __slots__ = ("proceed", "stage")

    def __init__(self, stage: Stage, proceed: Proceed) -> None:
        self.stage = stage
        self.proceed = proceed

    def run(self, invocation: Invocation) -> Awaitable[ToolResult]:
        return self.stage(invocation, proceed=self.proceed)


def _linked(stages: Sequence[Stage], agent_tool: AgentTool, terminal: Proceed) -> Proceed:
    """`stages` (outermost first) as they apply to `agent_tool`, each linked to the next, the last to `terminal`."""
    entry = terminal
    for stage in reversed(stages):
        specific = for_tool(stage, agent_tool)
        if specific is not None:
            entry = _Link(_bound(specific), entry).run
    return entry


def _bound(stage: Any) -> Any:
    """A stage object's `__call__` as a bound method when it is a Python function (the interpreter calls that inline:
    calling the object goes through its type's slot in C), else the stage itself (a function, a partial)."""
    call = type(stage).__call__  # a stage is callable: its type has one
    return MethodType(call, stage) if isinstance(call, FunctionType) else stage


def for_tool(stage: Stage, agent_tool: AgentTool) -> Stage | None:
    """`stage` as it runs for calls of `agent_tool` (`ToolSpecific`; a stage that is not: itself)."""
    specific = getattr(stage, "for_tool", None)
    return stage if specific is None else cast(Stage | None, specific(agent_tool))


async def _accept(invocation: Invocation) -> ToolResult:
    return ToolResult(ok=True)


async def _checked(call: HostedCall, check: Callable[[HostedCall], ToolResult | None],
                   run: HostedProceed) -> ToolResult:
    refused = check(call)
    return refused if refused is not None else await run(call)
