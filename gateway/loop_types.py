"""What a loop run produces and consumes: steps, events, approvals, results, and the paused run's state.

Everything a paused run needs is in `RunResult.state`, a JSON-serializable dict (messages included), so a
run can be resumed by another process after a restart: `gateway.loop.resume(state, decisions, ...)`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from .errors import RunError
from .kernel.usage import Usage
from .messages import Message, ToolCall

STATE_VERSION = 1
EventType = Literal["text", "step_started", "step_finished", "approval_pending"]


@dataclass(slots=True, kw_only=True)
class Step:
    """One tool call the run made (or refused), as reported to the caller."""

    tool: str
    arguments: dict[str, Any] | None
    call_id: str
    iteration: int
    status: int | None = None
    """The upstream HTTP status; None when no request was sent."""
    ok: bool = False
    error: str | None = None
    error_type: str | None = None
    duration_ms: float = 0.0
    agent: str | None = None
    """Set on a delegated agent's step: the agent that made the call (None: the agent the client called)."""
    steps: list[Step] = field(default_factory=list)
    """A delegation's steps: what the sub-agent called to answer it (nested as deep as the delegation)."""
    handed_back: bool = False
    """A call of one of the caller's own tools: not run by the gateway, handed back in the answer."""
    warning: str | None = None
    """A success with something to know (a body that breaks the spec's output schema, under `output_check: warn`)."""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if not self.handed_back:
            del data["handed_back"]
        if self.warning is None:
            del data["warning"]
        data["duration_ms"] = round(self.duration_ms, 3)
        data["steps"] = [step.to_dict() for step in self.steps]
        if not self.steps:  # only delegations have these: other steps keep their plain shape
            del data["steps"]
        if self.agent is None:
            del data["agent"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Step:
        values = {k: data.get(k) for k in cls.__dataclass_fields__ if k in data}
        values["steps"] = [cls.from_dict(step) for step in data.get("steps") or []]
        return cls(**values)  # type: ignore[arg-type]


def attach_steps(error: BaseException, steps: list[Step]) -> None:
    """Let an error that ends a run carry the steps taken before it (`error.steps`, as `LoopError` has), so the
    answer can say which calls ran; an error that has steps already keeps them."""
    if steps and not getattr(error, "steps", None):
        try:
            error.steps = list(steps)  # type: ignore[attr-defined]
        except AttributeError:  # an exception type with slots: it goes without
            pass


@dataclass(slots=True, kw_only=True)
class CallerToolSpec:
    """A tool the caller declared in its request: offered to the model, never run by the gateway."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    output_schema: dict[str, Any] | None = None
    namespace: str | None = None
    """The Responses `namespace` tool it came in (its calls are handed back with it); None: a plain function."""

    @classmethod
    def of(cls, tool: Any) -> CallerToolSpec:
        return cls(name=tool.name, description=tool.description, input_schema=tool.input_schema)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


@dataclass(slots=True, kw_only=True)
class PendingApproval:
    """A call that waits for a human: it has not been executed."""

    id: str
    agent: str
    tool: str
    arguments: dict[str, Any] | None
    call_id: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True, kw_only=True)
class Decision:
    """A human's answer to one pending approval."""

    approve: bool
    arguments: dict[str, Any] | None = None
    """Edited arguments to run instead of the model's (approve only)."""
    reason: str | None = None
    """Why it was denied; the model sees it."""

    @classmethod
    def parse(cls, value: Decision | dict[str, Any] | str | bool) -> Decision:
        """Accepts a Decision, `"approve"`/`"deny"`, a bool, or `{"decision", "arguments"?, "reason"?}`."""
        if isinstance(value, Decision):
            return value
        if isinstance(value, bool):
            return cls(approve=value)
        if isinstance(value, str):
            value = {"decision": value}
        decision = value.get("decision")
        if decision not in ("approve", "deny"):
            raise ValueError(f"decision must be 'approve' or 'deny', not {decision!r}")
        arguments = value.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise ValueError("arguments must be a JSON object")
        return cls(approve=decision == "approve", arguments=arguments, reason=value.get("reason"))


@dataclass(slots=True, kw_only=True)
class LoopEvent:
    """Something a streaming caller shows as it happens. Text never carries steps, steps never carry text."""

    type: EventType
    text: str = ""
    iteration: int = 0
    """text: the LLM call it came from (0: the first), so a caller can tell the turns' texts apart."""
    step: Step | None = None
    approvals: list[PendingApproval] = field(default_factory=list)


EventHandler = Callable[[LoopEvent], Awaitable[None]]
"""Receives a run's events as they happen (text deltas, steps, approvals)."""


@dataclass(slots=True, kw_only=True)
class RunResult:
    message: Message
    """The final assistant message (empty content when the run is paused)."""
    messages: list[Message]
    """The whole conversation, the final message included."""
    steps: list[Step] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    cut: bool = False
    """The iteration or tool-call cap ended the run: the answer is a summary without tools."""
    iterations: int = 0
    pending_approvals: list[PendingApproval] = field(default_factory=list)
    state: dict[str, Any] | None = None
    """For a paused run: everything `resume` needs (JSON-serializable)."""
    finish_reason: str = "stop"
    """Why the final turn ended, in OpenAI's terms: `stop`, or `length`/`content_filter` when the provider
    cut the answer itself (a run ended by a cap is `stop` with `cut`; see `gateway`), `tool_calls` when the run
    hands calls of the caller's own tools back (`handed_back`)."""
    handed_back: list[ToolCall] = field(default_factory=list)
    """Calls of the caller's tools the run stopped at: the caller runs them and sends the results back."""
    budget_exceeded: str | None = None
    """Which budget ended the run (with `budgets.on_exceed: summary`: the answer is a summary, `cut`)."""
    cost: float | None = None
    """The run's cost by the price table (`budgets.prices`); None without a price for the model."""

    @property
    def paused(self) -> bool:
        return bool(self.pending_approvals)

    def gateway_extension(self) -> dict[str, Any]:
        """The `gateway` object of a chat answer (DESIGN.md)."""
        return {"steps": [s.to_dict() for s in self.steps],
                "pending_approvals": [p.to_dict() for p in self.pending_approvals],
                "cut": self.cut, "iterations": self.iterations, "usage": self.usage.to_dict(),
                **({"cost": round(self.cost, 6)} if self.cost is not None else {}),
                **({"budget_exceeded": self.budget_exceeded} if self.budget_exceeded else {})}


class LoopError(RunError):
    """A run ended without an answer; carries what happened before (steps, usage)."""

    def __init__(self, message: str, code: str, *, steps: list[Step] | None = None,
                 usage: Usage | None = None) -> None:
        super().__init__(message, code)
        self.steps = steps or []
        self.usage = usage or Usage()


def message_to_dict(message: Message) -> dict[str, Any]:
    data: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        data["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments, "raw_arguments": c.raw_arguments,
             "parse_error": c.parse_error, "extras": c.extras}
            for c in message.tool_calls
        ]
    for key in ("tool_call_id", "name"):
        if getattr(message, key) is not None:
            data[key] = getattr(message, key)
    if message.is_error:
        data["is_error"] = True
    extras = message.extras if message.kept_extras is None else message.kept_extras
    if extras:
        data["extras"] = extras
    return data


def message_from_dict(data: dict[str, Any]) -> Message:
    calls = [ToolCall(id=c["id"], name=c["name"], arguments=c.get("arguments"), raw_arguments=c.get("raw_arguments"),
                      parse_error=c.get("parse_error"), extras=c.get("extras") or {})
             for c in data.get("tool_calls") or []]
    return Message(role=data["role"], content=data.get("content"), tool_calls=calls,
                   tool_call_id=data.get("tool_call_id"), name=data.get("name"),
                   is_error=bool(data.get("is_error")), extras=data.get("extras") or {})
