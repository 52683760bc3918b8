"""One `run_code` call: a script driven over the agent's tools, each tool call handed to the door's pipeline.

The script runs in the sandbox (`gateway.codemode.sandbox`) until it calls a function it does not define. When
that is one of the agent's tools (`FunctionNames`), its keyword arguments become the call's arguments (`None` for
an optional argument means "not given") and the door's `ScriptHost` runs it through the call pipeline
(validation, limits, breaker, hooks, audit row, trace span); the parsed answer body is the function's return
value, and a failed call raises `RuntimeError` in the script (which may catch it). The value of the script's last
expression is the result, as JSON, cut to the result limit like any tool result; what it printed comes beside it
(`{"result": ..., "printed": ...}`).

A call whose tool needs a human's approval pauses the script: the script is dumped at that call (`Paused.state`,
JSON) and the door keeps it with the run. `resume(state, decision)` restores it in any process: an approved call
runs once (with the human's arguments when they edited them) and its answer is returned in the script, a denied
one raises there; the calls made before the pause are not made again.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Protocol

from ..catalog import AgentTool
from ..http.reading import hard_cap
from ..loop_types import Decision
from ..messages import ToolCall, ToolResult
from ..safety.shares import ShareBook
from ..truncation import cut_text_at_boundary, shrink_json
from .result import keep_result
from .sandbox import Failed, Finished, HostCall, Limits, Sandbox, SandboxBusy, SandboxError, Stop, in_thread
from .signatures import FunctionNames
from .values import jsonable

STATE_VERSION = 1
CODE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": "The Python script. Its last expression is the result."}},
    "required": ["code"],
    "additionalProperties": False,
}


class ScriptHost(Protocol):
    """What a door gives a script: its tools, and the pipeline their calls go through."""

    def tool(self, name: str) -> AgentTool | None:
        """The agent's tool of that name (None: the agent has none)."""

    async def needs_pause(self, tool: AgentTool, call: ToolCall) -> bool:
        """Whether the call must wait for a human (its tool is under approval and its arguments are valid; an
        invalid call is run instead, and its validation error raises in the script)."""

    async def call(self, tool: AgentTool, call: ToolCall, approval: str | None) -> ToolResult:
        """Run one call through the pipeline; `approval`: the approval a human gave it."""


@dataclass(slots=True, kw_only=True)
class Paused:
    """The script waits at a call for a human's decision."""

    tool: str
    arguments: dict[str, Any]
    call_id: str
    state: dict[str, Any]
    """JSON: what `Script.resume` continues from (the dumped sandbox among it)."""


class Script:
    def __init__(self, call_id: str, names: FunctionNames, host: ScriptHost, limits: Limits,
                 max_result_bytes: int, shares: ShareBook | None = None) -> None:
        """Parameters: call_id: the `run_code` call's id (each tool call it makes is `<call_id>.<n>`); names: the
        script's functions; host: the door; limits: the agent's `code_limits`; max_result_bytes: the result's cut;
        shares: where the client's sandboxes are counted (None: in this process)."""
        self.shares = shares
        self.call_id = call_id
        self.names = names
        self.host = host
        self.limits = limits
        self.max_result_bytes = max_result_bytes
        self.calls = 0
        self.kept = False
        """Whether the script's last expression is kept in its sandbox (`gateway.codemode.result`)."""

    async def run(self, arguments: dict[str, Any] | None) -> ToolResult | Paused:
        refused = code_refusal(arguments)
        if refused is not None:
            return refused
        code, self.kept = keep_result(str((arguments or {})["code"]))
        try:
            async with Sandbox(self.limits, self.shares) as box:
                return await self._drive(box, await box.start(code))
        except SandboxBusy as exc:
            return ToolResult.failure("rate_limited", str(exc))
        except SandboxError as exc:
            return ToolResult.failure("code_error", str(exc))

    async def resume(self, state: dict[str, Any], decision: Decision, approval: str) -> ToolResult | Paused:
        """Go on from a pause: the pending call runs (approved) or raises in the script (denied)."""
        if state.get("version") != STATE_VERSION:
            return ToolResult.failure("code_error", "the paused script was kept by another version of the gateway "
                                      "and cannot go on; run it again.")
        self.calls = int(state.get("calls", 0))
        self.kept = bool(state.get("kept", False))  # a script paused before its result was kept: handed over whole
        try:
            return await self._resume(state, decision, approval)
        except SandboxError as exc:
            return ToolResult.failure("code_error", f"{exc} (the script waited for approval {approval})")

    async def _resume(self, state: dict[str, Any], decision: Decision, approval: str) -> ToolResult | Paused:
        # Counted in its client's share of sandboxes but never refused by it: it was admitted when it started, and a
        # refusal now would spend the human's decision on nothing.
        async with Sandbox(self.limits, self.shares, admitted=True) as box:
            stop = await box.restore(base64.b64decode(state["snapshot"]), state.get("printed", ""))
            if not isinstance(stop, HostCall):
                return self._outcome(stop)
            tool = self.host.tool(state["tool"])
            if not decision.approve or tool is None:
                why = f": {decision.reason}" if decision.reason else ""
                message = (f"{stop.function} was refused by a human{why}. Nothing was sent."
                           if not decision.approve else f"the agent no longer has the tool {state['tool']!r}.")
                return await self._drive(box, await box.refuse("RuntimeError", message))
            arguments = decision.arguments if decision.arguments is not None else state["arguments"]
            call = ToolCall(id=state["call_id"], name=tool.name, arguments=arguments, raw_arguments=arguments)
            result = await self.host.call(tool, call, approval)
            return await self._drive(box, await self._give_back(box, stop, result))

    async def _drive(self, box: Sandbox, stop: Stop) -> ToolResult | Paused:
        while isinstance(stop, HostCall):
            answered = await self._host_call(box, stop)
            if isinstance(answered, Paused | ToolResult):
                return answered
            stop = answered
        if isinstance(stop, Finished) and self.kept:  # its result, bounded as an api's answer is read
            stop = await box.kept_result(hard_cap(self.max_result_bytes))
        # In a thread: a script's value can be large (2,000,000 numbers made JSON and measured held the event loop,
        # and every other request of the process, for seconds: redteam44).
        done = stop
        return await in_thread(lambda: self._outcome(done))

    async def _host_call(self, box: Sandbox, stop: HostCall) -> Stop | Paused | ToolResult:
        name = self.names.tool(stop.function)
        tool = self.host.tool(name) if name is not None else None
        if tool is None:
            return await box.refuse("NameError", f"name {stop.function!r} is not defined (there is no tool "
                                    "function of that name; the run_code description lists them)")
        if stop.args:
            return await box.refuse("TypeError", f"{stop.function}() takes keyword arguments only: "
                                    f"{stop.function}(name=value, ...)")
        if self.calls >= self.limits.tool_calls:
            return self._failure("code_limit", f"the script called more than {self.limits.tool_calls} tools "
                                 "(code_limits.tool_calls); it was stopped at the next call, which was not made. "
                                 "Do the work in fewer calls, or over several scripts.", box.printed())
        self.calls += 1
        arguments = await in_thread(lambda: _arguments(tool, stop.kwargs))  # as large as the heap, too
        call = ToolCall(id=f"{self.call_id}.{self.calls}", name=tool.name, arguments=arguments,
                        raw_arguments=arguments)
        if await self.host.needs_pause(tool, call):
            state = {"version": STATE_VERSION, "snapshot": base64.b64encode(await box.dump()).decode("ascii"),
                     "tool": tool.name, "arguments": arguments, "call_id": call.id, "calls": self.calls,
                     "printed": box.printed(), "kept": self.kept}
            return Paused(tool=tool.name, arguments=arguments, call_id=call.id, state=state)
        result = await self.host.call(tool, call, None)
        return await self._give_back(box, stop, result)

    async def _give_back(self, box: Sandbox, stop: HostCall, result: ToolResult) -> Stop:
        if result.ok:
            return await box.answer(result.body)
        return await box.refuse("RuntimeError", _failure_text(stop.function, result))

    def _outcome(self, stop: Finished | Failed) -> ToolResult:
        if isinstance(stop, Failed):
            return self._failure(stop.kind, stop.message, stop.printed)
        value = jsonable(stop.value)
        if stop.cut_from is not None:  # only its beginning came over: text cut as an answer past the cap is
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
            value, _ = cut_text_at_boundary(text, self.max_result_bytes, abs(stop.cut_from),
                                            at_least=stop.cut_from < 0)
        body = {"result": value, "printed": stop.printed} if stop.printed else value
        body, truncated = shrink_json(body, self.max_result_bytes)
        truncated = truncated or stop.cut_from is not None
        size = len(json.dumps(body, ensure_ascii=False, default=str).encode())
        return ToolResult(ok=True, media_type="application/json", body=body, truncated=truncated, bytes=size)

    def _failure(self, kind: Any, message: str, printed: str) -> ToolResult:
        body = {"printed": printed} if printed else None
        calls = f" ({self.calls} tool call(s) ran before)" if self.calls else ""
        return ToolResult.failure(kind, f"{message}{calls}", body=body)


def code_refusal(arguments: dict[str, Any] | None) -> ToolResult | None:
    """Why a `run_code` call must not start (None: it may): its `code` is not a non-empty string."""
    code = (arguments or {}).get("code")
    if isinstance(code, str) and code.strip():
        return None
    return ToolResult.failure("invalid_arguments", "run_code needs `code`: a non-empty string holding the Python "
                              "script (its last expression is the result).")


def _arguments(tool: AgentTool, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The script's keyword arguments as the call's JSON arguments; None for an optional argument that cannot be
    null means it was not given."""
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
    required = set(schema.get("required") or [])
    properties: dict[str, Any] = schema.get("properties") or {}
    if not isinstance(properties, dict):
        properties = {}
    return {key: jsonable(value) for key, value in kwargs.items()
            if value is not None or key in required or _allows_null(properties.get(key))}


def _allows_null(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(_allows_null(member) for key in ("anyOf", "oneOf") for member in schema.get(key) or [])


def _failure_text(function: str, result: ToolResult) -> str:
    status = f", HTTP {result.status}" if result.status is not None else ""
    text = f"{function} failed ({result.error_type or 'error'}{status}): {result.error or 'the call failed'}"
    if result.body not in (None, ""):
        body = result.body if isinstance(result.body, str) else json.dumps(result.body, ensure_ascii=False,
                                                                           default=str)
        text += f"\nanswer: {body[:1000]}"
    return text
