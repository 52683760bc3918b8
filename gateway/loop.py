"""The tool-call loop: ask the model, run the calls it makes, give back the results, until it answers.

Limits (an agent's `Policy`): `max_iterations` ends with one more call *without tools* asking for a summary
(answer flagged `cut`), as does `max_tool_calls`; `max_consecutive_errors` iterations in a row with a failing
call end the run with a `LoopError`; `timeout` is the run's wall-clock deadline. Whether a turn called tools
is read from its message, never from its finish reason. A turn cut by the token limit has its calls refused.

Approvals: when a call's tool needs approval, no call of that batch runs (one call gates the whole batch, as
in MEAI); the run returns `pending_approvals` and a JSON-serializable `state`; `resume(state, decisions)`
runs the batch (approved calls with optionally edited arguments, denied ones answered with the reason) and
carries on. Decisions may arrive one at a time: the run stays paused until every pending call is decided.
A call is validated before it is queued: when `invoke` can `check` a call (the call pipeline's runner can), a
gated call with invalid arguments gets its error at once instead of waiting for a human. Inside `invoke`,
`current_approval()` names the approval a human gave the call being run (None: nobody approved it).

Caller tools: tools the client declared in its request (`caller_tools`) are offered to the model beside the
agent's own, but never run here. A turn that calls one runs the gateway's own calls of that turn, then ends the
run with those calls handed back (`RunResult.handed_back`, finish reason `tool_calls`); the caller answers them
in its next request and the run goes on from there. `tool_choice` is passed on to the provider: `required`, or a
named caller tool, holds on every turn until a caller tool is called (the caller's answer is then a tool call,
as it asked); otherwise it holds for the first turn only. `none` offers no tools at all.

Native tool search (`tool_search: native` on a provider with its own search): the provider searches and
loads; the found tools' calls come back as ordinary calls and take the same pipeline as any other. Its own
blocks travel in the assistant message's extras (the adapter echoes them); a turn the provider paused
(`pause_turn`) is sent back as is to let it go on, and counts as an iteration.

Delegation: a sub-agent's run started inside one of this run's calls (`sub_run`) reports its steps into that
call: live as step events (marked with the sub-agent's name) and, when it ends, as the call's `Step.steps`.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import anyio

from .catalog import AgentTool
from .codemode import RUN_CODE
from .config.model import AgentConfig
from .errors import AuditUnavailable
from .hooks import HookDenied
from .kernel.caller import current_caller
from .kernel.usage import Usage
from .loop_scripts import ScriptCalls, ScriptPause
from .loop_types import (
    STATE_VERSION,
    CallerToolSpec,
    Decision,
    LoopError,
    LoopEvent,
    PendingApproval,
    RunResult,
    Step,
    message_from_dict,
    message_to_dict,
)
from .messages import Message, ToolCall, ToolResult
from .observe.runs import ModelCall
from .offer.toolsearch import SEARCH_TOOL, ToolOffer
from .providers.base import ProviderAdapter, ToolLike, Turn
from .safety.budgets import BudgetExceeded
from .toolsets import Toolset

if TYPE_CHECKING:
    from .observe.runs import RunObserver

Invoke = Callable[[AgentTool, ToolCall], Awaitable[ToolResult]]


@runtime_checkable
class CheckingInvoke(Protocol):
    """An `Invoke` that can also judge a call's arguments without running it (None: valid)."""

    async def __call__(self, tool: AgentTool, call: ToolCall) -> ToolResult: ...

    async def check(self, tool: AgentTool, call: ToolCall) -> ToolResult | None: ...

@runtime_checkable
class ObservedInvoke(Protocol):
    """An `Invoke` that carries the seams of runs and model calls (`gateway.observe.runs.RunObserver`)."""

    observer: RunObserver | None

    async def __call__(self, tool: AgentTool, call: ToolCall) -> ToolResult: ...


EventHandler = Callable[[LoopEvent], Awaitable[None]]
ApprovalHook = Callable[[list[PendingApproval], dict[str, Any]], Awaitable[None]]

SUMMARY_PROMPT = (
    "You have reached the limit of tool calls for this request ({reason}). Do not call any tools. "
    "Answer now with what you have found so far, and say what is still missing."
)
_NOT_COUNTED = frozenset({"approval_denied"})  # a human's refusal is not the model failing


@dataclass(slots=True)
class _CallScope:
    """The tool call a run is executing, as a delegated run started inside it sees it."""

    emit: EventHandler | None
    steps: list[Step] = field(default_factory=list)
    approval: str | None = None
    """The id of the approval a human gave this call (the run resumed with an approving decision)."""


_current_call: ContextVar[_CallScope | None] = ContextVar("gateway_loop_call", default=None)


def current_approval() -> str | None:
    """Inside a running loop's `invoke`: the id of the approval a human gave the call being run, or None."""
    scope = _current_call.get()
    return scope.approval if scope is not None else None


class SubRun:
    """How a delegated agent's run reports to the run whose call started it (see `sub_run`)."""

    def __init__(self, scope: _CallScope, agent: str) -> None:
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
    scope = _current_call.get()
    return SubRun(scope, agent) if scope is not None else None


async def run(agent: AgentConfig, messages: Sequence[Message], *, adapter: ProviderAdapter, toolset: Toolset,
              invoke: Invoke, params: dict[str, Any] | None = None, on_event: EventHandler | None = None,
              stream: bool = False, approvals: ApprovalHook | None = None, caller_tools: Sequence[ToolLike] = (),
              tool_choice: Any = None) -> RunResult:
    """Run `agent` on `messages` until it answers, pauses for approval, hands calls back, or a limit ends it.

    Parameters: adapter: the agent's provider; toolset: the tools it may call; invoke: runs one call
    (`gateway.execution.runner.ToolRunner`, bound with `for_agent`); params: extra request parameters
    (temperature, ...); on_event: receives text deltas (with `stream`) and step events as they happen;
    approvals: awaited with the pending approvals and the state when the run pauses (the store hook);
    caller_tools: the client's own tools, handed back when called; tool_choice: OpenAI's `tool_choice` (see the
    module docstring). Raises LoopError (consecutive errors, deadline) and
    ProviderError (the LLM failed).
    """
    conversation = list(messages)
    if agent.instructions:
        conversation.insert(0, Message(role="system", content=agent.instructions))
    loop = _Loop(agent, adapter, toolset, invoke, params, on_event, stream, approvals, conversation)
    loop.offer_caller_tools(caller_tools, tool_choice)
    return await loop.execute(loop.iterate)


async def resume(state: Mapping[str, Any], decisions: Mapping[str, Decision | dict[str, Any] | str | bool], *,
                 agent: AgentConfig, adapter: ProviderAdapter, toolset: Toolset, invoke: Invoke,
                 params: dict[str, Any] | None = None, on_event: EventHandler | None = None, stream: bool = False,
                 approvals: ApprovalHook | None = None) -> RunResult:
    """Continue a paused run. `decisions` maps approval ids to decisions (see `Decision.parse`); ids not
    decided yet keep the run paused (the result carries the remaining ones and a new state)."""
    if state.get("version") != STATE_VERSION:
        raise ValueError(f"unsupported run state version {state.get('version')!r}")
    if state.get("agent") != agent.name:
        raise ValueError(f"this run belongs to agent {state.get('agent')!r}, not {agent.name!r}")
    pending = [PendingApproval(**p) for p in state.get("pending") or []]
    known = {p.id for p in pending}
    unknown = set(decisions) - known
    if unknown:
        raise ValueError(f"no pending approval with id {', '.join(sorted(unknown))}")
    decided = {k: Decision.parse(v) for k, v in (state.get("decided") or {}).items()}
    decided.update({k: Decision.parse(v) for k, v in decisions.items()})
    loop = _Loop(agent, adapter, toolset, invoke, params if params is not None else state.get("params"), on_event,
                 stream, approvals, [message_from_dict(m) for m in state["messages"]])
    loop.restore(state)
    loop.offer_caller_tools([CallerToolSpec(**t) for t in state.get("caller_tools") or []], state.get("tool_choice"))
    if known - set(decided):
        return await loop.pause(pending, decided)
    by_call = {p.call_id: decided[p.id] for p in pending}
    loop.approval_ids = {p.call_id: p.id for p in pending if decided[p.id].approve}

    async def finish_batch() -> RunResult:
        calls = loop.messages[-1].tool_calls
        handed = await loop.answer_calls(calls, truncated=False, decisions=by_call)
        return handed if handed is not None else await loop.iterate()

    return await loop.execute(finish_batch)


def result_content(result: ToolResult) -> str:
    """A result as the model reads it: the body for a success, a JSON error object for a failure."""
    if result.ok:
        body = result.body
        text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)
        if result.truncated:
            text += "\n[truncated: the result was longer than the gateway's limit]"
        return text
    payload: dict[str, Any] = {"error": result.error or "the call failed", "error_type": result.error_type}
    if result.status is not None:
        payload["status"] = result.status
    if result.body not in (None, ""):
        payload["body"] = result.body
    return json.dumps(payload, ensure_ascii=False, default=str)


class _Loop:
    def __init__(self, agent: AgentConfig, adapter: ProviderAdapter, toolset: Toolset, invoke: Invoke,
                 params: dict[str, Any] | None, on_event: EventHandler | None, stream: bool,
                 approvals: ApprovalHook | None, messages: list[Message]) -> None:
        self.agent = agent
        self.policy = agent.policy
        self.adapter = adapter
        self.toolset = toolset
        self.invoke = invoke
        self.params = dict(params or {})
        self.on_event = on_event
        self.stream = stream
        self.approvals = approvals
        self.messages = messages
        self.steps: list[Step] = []
        self.usage = Usage()
        self.iteration = 0
        self.consecutive_errors = 0
        self.tool_calls = 0
        self.last_errors: list[str] = []
        self.approval_ids: dict[str, str] = {}
        """Call id -> the approval a human gave it (a resumed batch)."""
        self.offer = ToolOffer(agent, toolset, native=adapter.native_tool_search)
        """What each request offers the model: views within the budget; with tool search, what was found; with
        native search, every tool deferred to the provider's own search."""
        self.caller_tools: dict[str, ToolLike] = {}
        self.tool_choice: Any = None
        self.observer = invoke.observer if isinstance(invoke, ObservedInvoke) else None
        self.budget_exceeded: str | None = None
        functions = self.offer.functions
        self.scripts = ScriptCalls(self, functions, self._run_in_scope) if functions is not None else None
        """Code mode: the run's `run_code` calls (`gateway.loop_scripts`)."""
        self.batch_done: dict[str, tuple[ToolResult, Step]] = {}
        """The calls of a batch a script paused that ran already: they are not run again when it resumes."""

    def offer_caller_tools(self, tools: Sequence[ToolLike], tool_choice: Any) -> None:
        self.caller_tools = {t.name: t for t in tools}
        self.tool_choice = tool_choice

    def _offered(self) -> list[Any]:
        if self.tool_choice == "none":
            return []
        return [*self.offer.views(), *self.caller_tools.values()]

    def _choice(self) -> Any:
        """This turn's `tool_choice`: see the module docstring."""
        choice = self.tool_choice
        if choice in (None, "auto", "none"):
            return None
        named = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
        lasting = named in self.caller_tools if named else bool(self.caller_tools)
        return choice if lasting or self.iteration == 0 else None

    def restore(self, state: Mapping[str, Any]) -> None:
        for name in state.get("loaded") or []:
            self.offer.load(name)
        self.steps = [Step.from_dict(s) for s in state.get("steps") or []]
        self.usage = Usage.from_dict(state.get("usage") or {})
        self.iteration = int(state.get("iteration", 0))
        self.consecutive_errors = int(state.get("consecutive_errors", 0))
        self.tool_calls = int(state.get("tool_calls", 0))
        self.batch_done = {call_id: (ToolResult(**done["result"]), Step.from_dict(done["step"]))
                           for call_id, done in (state.get("batch") or {}).items()}
        if self.scripts is not None:
            self.scripts.paused = {call_id: ScriptPause.from_dict(script)
                                   for call_id, script in (state.get("scripts") or {}).items()}

    async def execute(self, body: Callable[[], Awaitable[RunResult]]) -> RunResult:
        observer = self.observer
        if observer is None:
            return await self._execute(body)
        result: RunResult = await observer.run(self.agent, self.adapter.kind, lambda: self._execute(body),
                                               lambda: self.usage)
        result.cost = observer.run_cost(self.agent, self.usage)
        return result

    async def _execute(self, body: Callable[[], Awaitable[RunResult]]) -> RunResult:
        try:
            with anyio.fail_after(self.policy.timeout):
                return await body()
        except TimeoutError:
            raise self._error(f"agent {self.agent.name!r}: the run passed its deadline of {self.policy.timeout}s "
                              f"after {self.iteration} iteration(s)", "deadline_exceeded") from None

    async def iterate(self) -> RunResult:
        while True:
            if self.iteration >= self.policy.max_iterations:
                return await self._summarize(f"{self.policy.max_iterations} iterations")
            if self.tool_calls >= self.policy.max_tool_calls:
                return await self._summarize(f"{self.policy.max_tool_calls} tool calls")
            try:
                turn = await self._ask(self._offered(), self._choice())
            except BudgetExceeded as exc:
                if self.observer is None or self.observer.on_exceed != "summary":
                    raise self._error(f"agent {self.agent.name!r}: {exc}", "budget_exceeded") from None
                self.budget_exceeded = str(exc)
                return await self._summarize(str(exc))
            except HookDenied as exc:
                raise self._error(f"agent {self.agent.name!r}: {exc}", "hook_denied") from None
            self.iteration += 1
            self.messages.append(turn.message)
            if not turn.message.tool_calls:
                if turn.raw_finish_reason == "pause_turn":
                    # The provider paused its own (server) tools mid-turn; sent back as is, the turn goes on.
                    continue
                return self._result(turn.message, finish_reason=turn.finish_reason)
            ended = await self.answer_calls(turn.message.tool_calls, truncated=turn.truncated)
            if ended is not None:
                return ended

    async def answer_calls(self, calls: list[ToolCall], *, truncated: bool,
                           decisions: Mapping[str, Decision] | None = None) -> RunResult | None:
        """Give every call of one turn exactly one result, in call order; or pause for approvals; or, when the
        turn called the caller's tools, run the gateway's own calls and hand the caller's back."""
        if decisions is None:  # a resumed batch was prepared before it paused
            for call in calls:
                self._prepare(call)
        handed = [c for c in calls if c.name in self.caller_tools and not truncated]
        if handed:
            calls = [c for c in calls if c not in handed]
        if not truncated and decisions is None:
            gated = [c for c in calls if c.parse_error is None and (t := self.toolset.get(c.name)) is not None
                     and t.needs_approval and not self.offer.code_only and await self._valid(t, c)]
            if gated:
                pending = [PendingApproval(id=f"apr_{uuid.uuid4().hex}", agent=self.agent.name, tool=c.name,
                                           arguments=c.arguments, call_id=c.id) for c in gated]
                return await self.pause(pending, {})
        results: list[ToolResult | None] = [None] * len(calls)
        steps: list[Step | None] = [None] * len(calls)
        runnable: list[tuple[int, AgentTool | None, ToolCall, str | None, Decision | None]] = []
        for index, call in enumerate(calls):
            done = self.batch_done.pop(call.id, None)
            if done is not None:  # ran before a script of this batch paused
                results[index], steps[index] = done
                continue
            if self.scripts is not None and call.name == RUN_CODE and not truncated:
                runnable.append((index, None, call, self.approval_ids.get(call.id), (decisions or {}).get(call.id)))
                continue
            if self.offer.is_meta(call.name) and not truncated and call.parse_error is None:
                results[index] = await self._answer_meta(call)
                steps[index] = _step(call, call.arguments, results[index], self.iteration)
                await self._emit(LoopEvent(type="step_started", step=_step(call, call.arguments, None,
                                                                           self.iteration)))
                await self._emit(LoopEvent(type="step_finished", step=steps[index]))
                continue
            refusal = self._refusal(call, truncated, (decisions or {}).get(call.id))
            if refusal is not None:
                results[index] = refusal
                steps[index] = _step(call, call.arguments, refusal, self.iteration)
                # Refused calls are steps too: a streaming client sees them like any other.
                await self._emit(LoopEvent(type="step_started", step=_step(call, call.arguments, None,
                                                                           self.iteration)))
                await self._emit(LoopEvent(type="step_finished", step=steps[index]))
                continue
            tool = self.toolset.tools[call.name]
            decision = (decisions or {}).get(call.id)
            if decision is not None and decision.arguments is not None:
                call = ToolCall(id=call.id, name=call.name, arguments=decision.arguments,
                                raw_arguments=decision.arguments, extras=call.extras)
            self.tool_calls += 1
            approved = decision is not None and decision.approve
            runnable.append((index, tool, call, self.approval_ids.get(call.id, "approved") if approved else None,
                             None))
        await self._run_concurrently(runnable, results, steps)
        if self.scripts is not None and self.scripts.paused:
            return await self._pause_scripts(calls, results, steps)
        self._record_steps(s for s in steps if s is not None)
        if calls:
            self._append_results(calls, [r for r in results if r is not None])
        if handed:
            return await self._hand_back(handed)
        return None

    async def _pause_scripts(self, calls: list[ToolCall], results: list[ToolResult | None],
                             steps: list[Step | None]) -> RunResult:
        """Scripts of this batch wait for a human: the run pauses with their calls as its pending approvals; the
        batch's calls that ran are kept (and shown), the paused scripts shown with the steps they made so far."""
        assert self.scripts is not None
        for call, result, step in zip(calls, results, steps, strict=True):
            if result is not None and step is not None:
                self.batch_done[call.id] = (result, step)
        shown = [s for s in steps if s is not None]
        pending = []
        for call in calls:
            waiting = self.scripts.paused.get(call.id)
            if waiting is None:
                continue
            pending.append(PendingApproval(id=f"apr_{uuid.uuid4().hex}", agent=self.agent.name,
                                           tool=waiting.paused.tool, arguments=waiting.paused.arguments,
                                           call_id=call.id))
            shown.append(Step(tool=call.name, arguments=call.arguments, call_id=call.id, iteration=self.iteration,
                              error=f"waits for a human's approval of {waiting.paused.tool}",
                              error_type="approval_pending", steps=list(waiting.steps)))
        self._record_steps(shown)
        return await self.pause(pending, {})

    def _record_steps(self, steps: Iterable[Step]) -> None:
        """Add a batch's steps to the run's; a step shown while its script waited is replaced by its final one."""
        index = {s.call_id: i for i, s in enumerate(self.steps)}
        for step in steps:
            if step.call_id in index:
                self.steps[index[step.call_id]] = step
            else:
                self.steps.append(step)

    async def check(self, tool: AgentTool, call: ToolCall) -> ToolResult | None:
        """The pipeline's refusal of the call's arguments (None: valid, or nothing here can check them)."""
        if not isinstance(self.invoke, CheckingInvoke) or call.arguments is None:
            return None
        return await self.invoke.check(tool, call)

    async def emit(self, event: LoopEvent) -> None:
        await self._emit(event)

    async def _run_in_scope(self, tool: AgentTool, call: ToolCall, approval: str | None,
                            steps: list[Step]) -> ToolResult:
        """One call through `invoke`, in its own call scope (the approval it runs under; a delegated run started
        inside it reports into `steps`)."""
        scope = _CallScope(self.on_event, approval=approval)
        token = _current_call.set(scope)
        try:
            return await self.invoke(tool, call)
        except AuditUnavailable:
            raise  # no answer without its audit row: the run ends, the door answers 503
        except Exception as exc:  # invoke should not raise; if it does, the model still gets a result
            return ToolResult.failure("transport_error", f"the gateway failed to run the tool: {exc!r}")
        finally:
            _current_call.reset(token)
            steps.extend(scope.steps)

    async def _run_script(self, call: ToolCall, steps: list[Step], approval: str | None,
                          decision: Decision | None) -> ToolResult | None:
        """A `run_code` call's result; None when its script paused for a human."""
        assert self.scripts is not None
        if call.parse_error is not None:
            return ToolResult.failure("invalid_arguments", f"{call.parse_error}. Nothing ran; call run_code again "
                                      'with a JSON object {"code": "..."}.')
        try:
            return await self.scripts.run(call, steps, decision, approval)
        except AuditUnavailable:
            raise  # no answer without its audit row: the run ends, the door answers 503
        except Exception as exc:  # the script's driver should not raise; if it does, the model still gets a result
            return ToolResult.failure("code_error", f"the gateway failed to run the script: {exc!r}")

    async def _valid(self, tool: AgentTool, call: ToolCall) -> bool:
        """Whether the call's arguments pass the invoke's check (an invalid call is not queued for a human)."""
        if not isinstance(self.invoke, CheckingInvoke) or call.arguments is None:
            return True
        arguments = self.adapter.prepare_arguments(tool, dict(call.arguments))
        probe = ToolCall(id=call.id, name=call.name, arguments=arguments, raw_arguments=call.raw_arguments)
        return await self.invoke.check(tool, probe) is None

    async def _answer_meta(self, call: ToolCall) -> ToolResult:
        """`search_tools` (what it finds is offered from the next request on) and `describe_tool`."""
        started = time.perf_counter()
        # In a worker thread: a search may open an api's index the first time, or ask an embeddings endpoint
        # (`gateway.offer.embeddings`), and neither may hold up the other runs on this event loop.
        ok, body = await anyio.to_thread.run_sync(self.offer.answer, call.name, call.arguments or {})
        elapsed = (time.perf_counter() - started) * 1000
        if ok:
            return ToolResult(ok=True, body=body, media_type="application/json", duration_ms=elapsed)
        return ToolResult.failure("invalid_arguments", str(body), duration_ms=elapsed)

    async def _hand_back(self, calls: list[ToolCall]) -> RunResult:
        """End the run at the caller's own calls: they are steps, answered by the caller's next request."""
        for call in calls:
            step = _step(call, call.arguments, None, self.iteration)
            step.handed_back = True
            step.ok = call.parse_error is None
            step.error = call.parse_error
            self.steps.append(step)
            await self._emit(LoopEvent(type="step_finished", step=step))
        said = next(m for m in reversed(self.messages) if m.role == "assistant")  # this turn's own message
        message = Message(role="assistant", content=said.content, tool_calls=calls)
        return RunResult(message=message, messages=self.messages, steps=self.steps, usage=self.usage,
                         iterations=self.iteration, finish_reason="tool_calls", handed_back=calls)

    def _prepare(self, call: ToolCall) -> None:
        """The call's arguments as the tool's exact schema means them, before approvals show them and the
        pipeline validates them; what the adapter cannot map back becomes the call's parse error."""
        tool = self.toolset.get(call.name)
        if tool is None or call.arguments is None or call.parse_error is not None:
            return
        try:
            call.arguments = self.adapter.prepare_arguments(tool, call.arguments)
        except ValueError as exc:  # e.g. strict mode's JSON text that does not parse: the model's to fix
            call.parse_error = str(exc)

    def _refusal(self, call: ToolCall, truncated: bool, decision: Decision | None) -> ToolResult | None:
        if truncated:
            return ToolResult.failure("truncated_turn", "your answer hit the output token limit, so this call's "
                                      "arguments may be cut off; it was not executed. Call it again, with shorter "
                                      "arguments or fewer calls at once.")
        tool = self.toolset.get(call.name)
        if tool is None:
            if self.offer.searching or self.offer.native:
                search = "the tool search" if self.offer.native else SEARCH_TOOL
                return ToolResult.failure("unknown_tool", f"there is no tool named {call.name!r}; use "
                                          f"{search} to find the tool for what you want to do.")
            names = ", ".join(self.toolset.names) or "(none)"
            return ToolResult.failure("unknown_tool", f"there is no tool named {call.name!r}. "
                                      f"The tools you can call are: {names}")
        if self.offer.code_only:
            return ToolResult.failure("unknown_tool", f"{call.name} is not called on its own here: call it as a "
                                      f"function in a {RUN_CODE} script ({call.name}(name=value, ...)).")
        if call.parse_error is not None:
            return ToolResult.failure("invalid_arguments", f"{call.parse_error}. Nothing was sent; call "
                                      f"{call.name} again with a valid JSON object of arguments.")
        if decision is not None and not decision.approve:
            why = f": {decision.reason}" if decision.reason else ""
            return ToolResult.failure("approval_denied", f"a human refused this call{why}. Do not retry it as is.")
        if self.tool_calls >= self.policy.max_tool_calls:
            return ToolResult.failure("rate_limited", f"this run reached its cap of {self.policy.max_tool_calls} "
                                      "tool calls; the call was not executed.")
        return None

    async def _run_concurrently(self, runnable: list[tuple[int, AgentTool | None, ToolCall, str | None,
                                                           Decision | None]],
                                results: list[ToolResult | None], steps: list[Step | None]) -> None:
        limiter = anyio.CapacityLimiter(max(1, self.policy.max_parallel_calls))

        async def run_one(index: int, tool: AgentTool | None, call: ToolCall, approval: str | None,
                          decision: Decision | None) -> None:
            async with limiter:
                await self._emit(LoopEvent(type="step_started", step=_step(call, call.arguments, None,
                                                                           self.iteration)))
                started = time.perf_counter()
                inner: list[Step] = []
                if tool is None:  # a run_code script
                    answered = await self._run_script(call, inner, approval, decision)
                    if answered is None:
                        return  # it waits for a human (`self.scripts.paused`)
                    result = answered
                else:
                    result = await self._run_in_scope(tool, call, approval, inner)
                step = _step(call, call.arguments, result, self.iteration)
                step.duration_ms = (time.perf_counter() - started) * 1000
                step.steps = inner
                results[index] = result
                steps[index] = step
                await self._emit(LoopEvent(type="step_finished", step=step))

        try:
            async with anyio.create_task_group() as group:
                for index, tool, call, approval, decision in runnable:
                    group.start_soon(run_one, index, tool, call, approval, decision)
        except* AuditUnavailable as group_error:
            raise group_error.exceptions[0] from None

    def _append_results(self, calls: list[ToolCall], results: list[ToolResult]) -> None:
        failed = False
        self.last_errors = []
        for call, result in zip(calls, results, strict=True):
            extras: dict[str, Any] = {"result": result.to_dict()}
            if call.extras.get("synthesized_id"):
                extras["synthesized_id"] = True
            self.messages.append(Message(role="tool", content=result_content(result), tool_call_id=call.id,
                                         name=call.name, is_error=not result.ok, extras=extras))
            if not result.ok and result.error_type not in _NOT_COUNTED:
                failed = True
                self.last_errors.append(f"{call.name}: {result.error}")
        self.consecutive_errors = self.consecutive_errors + 1 if failed else 0
        limit = self.policy.max_consecutive_errors
        if limit > 0 and self.consecutive_errors >= limit:
            raise self._error(f"agent {self.agent.name!r}: {self.consecutive_errors} iterations in a row had failing "
                              f"tool calls; last errors: {'; '.join(self.last_errors)}", "too_many_errors")

    async def pause(self, pending: list[PendingApproval], decided: Mapping[str, Decision]) -> RunResult:
        waiting = [p for p in pending if p.id not in decided]
        state = {
            "version": STATE_VERSION, "agent": self.agent.name,
            "messages": [message_to_dict(m) for m in self.messages],
            "pending": [p.to_dict() for p in pending],
            "decided": {k: {"decision": "approve" if d.approve else "deny", "arguments": d.arguments,
                            "reason": d.reason} for k, d in decided.items()},
            "steps": [s.to_dict() for s in self.steps], "usage": self.usage.to_dict(),
            "iteration": self.iteration, "consecutive_errors": self.consecutive_errors,
            "tool_calls": self.tool_calls, "params": self.params, "loaded": self.offer.loaded,
            "caller_tools": [CallerToolSpec.of(t).to_dict() for t in self.caller_tools.values()],
            "tool_choice": self.tool_choice,
        }
        if self.batch_done:
            state["batch"] = {call_id: {"result": result.to_dict(), "step": step.to_dict()}
                              for call_id, (result, step) in self.batch_done.items()}
        if self.scripts is not None and self.scripts.paused:
            state["scripts"] = {call_id: script.to_dict() for call_id, script in self.scripts.paused.items()}
        await self._emit(LoopEvent(type="approval_pending", approvals=waiting))
        if self.approvals is not None:
            await self.approvals(waiting, state)
        return RunResult(message=Message(role="assistant", content=None), messages=self.messages, steps=self.steps,
                         usage=self.usage, iterations=self.iteration, pending_approvals=waiting, state=state)

    async def _summarize(self, reason: str) -> RunResult:
        self.messages.append(Message(role="user", content=SUMMARY_PROMPT.format(reason=reason)))
        try:
            turn = await self._ask([], summary=True)
        except HookDenied as exc:
            raise self._error(f"agent {self.agent.name!r}: {exc}", "hook_denied") from None
        # Tools were not offered; a call anyway is dropped rather than answered.
        message = Message(role="assistant", content=turn.message.content or "", extras=turn.message.extras)
        self.messages.append(message)
        return self._result(message, cut=True, finish_reason=turn.finish_reason)

    async def _ask(self, tools: list[Any], tool_choice: Any = None, *, summary: bool = False) -> Turn:
        on_text = None
        if self.stream:
            # Text said before tool calls streams too (as the provider sends it); `iteration` tells the turns
            # apart for a caller that wants to separate them.
            async def on_text(text: str) -> None:
                await self._emit(LoopEvent(type="text", text=text, iteration=self.iteration))
        params = self.params if tool_choice is None or not tools else {**self.params, "tool_choice": tool_choice}
        observer = self.observer
        if observer is None:
            turn = await self.adapter.complete(self.agent.model_id, self.messages, tools, params=params,
                                               on_text=on_text)
        else:
            call = ModelCall(agent=self.agent, provider=self.adapter.kind, client=current_caller().client,
                             iteration=self.iteration, messages=self.messages, run_usage=self.usage, summary=summary)
            turn = await observer.model_call(call, lambda: self.adapter.complete(
                self.agent.model_id, self.messages, tools, params=params, on_text=on_text))
        self.usage.add(turn.usage)
        return turn

    def _result(self, message: Message, cut: bool = False, finish_reason: str = "stop") -> RunResult:
        # Only a provider-side cut is worth telling the client; "tool_calls" can't end a run.
        reason = finish_reason if finish_reason in ("length", "content_filter") else "stop"
        return RunResult(message=message, messages=self.messages, steps=self.steps, usage=self.usage, cut=cut,
                         iterations=self.iteration, finish_reason=reason, budget_exceeded=self.budget_exceeded)

    def _error(self, message: str, code: str) -> LoopError:
        return LoopError(message, code, steps=self.steps, usage=self.usage)

    async def _emit(self, event: LoopEvent) -> None:
        if self.on_event is not None:
            await self.on_event(event)


def _step(call: ToolCall, arguments: dict[str, Any] | None, result: ToolResult | None, iteration: int) -> Step:
    step = Step(tool=call.name, arguments=arguments, call_id=call.id, iteration=iteration)
    if result is not None:
        step.ok, step.status, step.error, step.error_type = result.ok, result.status, result.error, result.error_type
        step.duration_ms = result.duration_ms
    return step
