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

Delegation: a sub-agent's run started inside one of this run's calls (`gateway.loop_calls.sub_run`) reports its
steps into that call: live as step events (marked with the sub-agent's name) and, when it ends, as the call's
`Step.steps`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import anyio

from .catalog import AgentTool
from .config.model import AgentConfig
from .dialects.tool import ToolLike
from .errors import BudgetExceeded, HookDenied
from .kernel.caller import current_caller
from .kernel.redaction import HeldText
from .kernel.usage import Usage
from .loop_calls import Invoke
from .loop_scripts import ScriptCalls, ScriptPause
from .loop_turn import TurnCalls
from .loop_types import (
    STATE_VERSION,
    CallerToolSpec,
    Decision,
    EventHandler,
    LoopEvent,
    PendingApproval,
    RunResult,
    Step,
    attach_steps,
    message_from_dict,
    message_to_dict,
)
from .messages import Message, ToolCall, ToolResult
from .observe.runs import ModelCall
from .offer.toolsearch import ToolOffer
from .providers.base import ProviderAdapter, Turn
from .toolsets import Toolset

if TYPE_CHECKING:
    from .observe.runs import RunObserver

@runtime_checkable
class ObservedInvoke(Protocol):
    """An `Invoke` that carries the seams of runs and model calls (`gateway.observe.runs.RunObserver`)."""

    observer: RunObserver | None

    async def __call__(self, tool: AgentTool, call: ToolCall) -> ToolResult: ...


ApprovalHook = Callable[[list[PendingApproval], dict[str, Any]], Awaitable[None]]

SUMMARY_PROMPT = (
    "You have reached the limit of tool calls for this request ({reason}). Do not call any tools. "
    "Answer now with what you have found so far, and say what is still missing."
)


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


class _Loop(TurnCalls):
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
        self.offer = ToolOffer(agent, toolset, native=adapter.native_tool_search, measure=adapter.definition_tokens)
        """What each request offers the model: views within the budget; with tool search, what was found (within
        the definitions budget, counted as this provider is sent them); with native search, every tool deferred to
        the provider's own search."""
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
        result: RunResult = await observer.run(self.agent, self.adapter.telemetry_name, lambda: self._execute(body),
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
        except Exception as exc:
            # A provider that fails after tools ran, an audit that cannot write, ...: the error carries the steps,
            # so the answer can say which calls ran (and a client does not repeat a write blindly).
            attach_steps(exc, self.steps)
            raise

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
        message = Message(role="assistant", content=turn.message.content or "", extras=turn.message.extras,
                          kept_extras=turn.message.kept_extras)
        self.messages.append(message)
        return self._result(message, cut=True, finish_reason=turn.finish_reason)

    async def _ask(self, tools: list[Any], tool_choice: Any = None, *, summary: bool = False) -> Turn:
        on_text = None
        observer = self.observer
        held = HeldText(observer.redactor) if self.stream and observer is not None and observer.redactor else None
        if self.stream:
            # Text said before tool calls streams too (as the provider sends it); `iteration` tells the turns
            # apart for a caller that wants to separate them. Redacted as it streams: the end of what came is held
            # while it could be the start of a secret (the observer redacts the whole answer once it is in).
            async def on_text(text: str) -> None:
                shown = held.feed(text) if held is not None else text
                if shown:
                    await self._emit(LoopEvent(type="text", text=shown, iteration=self.iteration))
        params = self.params if tool_choice is None or not tools else {**self.params, "tool_choice": tool_choice}
        if observer is None:
            turn = await self.adapter.complete(self.agent.model_id, self.messages, tools, params=params,
                                               on_text=on_text)
        else:
            call = ModelCall(agent=self.agent, provider=self.adapter.telemetry_name, client=current_caller().client,
                             iteration=self.iteration, messages=self.messages, run_usage=self.usage, summary=summary)
            turn = await observer.model_call(call, lambda: self.adapter.complete(
                self.agent.model_id, self.messages, tools, params=params, on_text=on_text))
        if held is not None and (rest := held.flush()):
            await self._emit(LoopEvent(type="text", text=rest, iteration=self.iteration))
        self.usage.add(turn.usage)
        return turn

    def _result(self, message: Message, cut: bool = False, finish_reason: str = "stop") -> RunResult:
        # Only a provider-side cut is worth telling the client; "tool_calls" can't end a run.
        reason = finish_reason if finish_reason in ("length", "content_filter") else "stop"
        return RunResult(message=message, messages=self.messages, steps=self.steps, usage=self.usage, cut=cut,
                         iterations=self.iteration, finish_reason=reason, budget_exceeded=self.budget_exceeded)
