"""The call contract: what a door hands the pipeline (`Invocation`; `HostedCall` for a tool the gateway answers
itself: a delegation, a script), what a stage is (`Stage`, `Proceed`), and the seam for code that watches or
changes tool calls (`ToolHooks`).

Every package that takes part in a tool call (the execution stages, the safety stages, observability, the doors)
speaks these types; the pipeline that chains them is assembled elsewhere (`gateway.execution.pipeline`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..catalog import AgentTool, Tool
from ..messages import ToolCall, ToolResult

Door = Literal["chat", "direct", "mcp", "cli", "resume", "console"]


@dataclass(slots=True, kw_only=True)
class AgentCall:
    """What every call of an agent's tool carries on its way: an api call's (`Invocation`), a delegation's or a
    script's (`HostedCall`)."""

    agent: str
    """The agent whose tool it is (audit rows and per-agent limits name it)."""
    agent_tool: AgentTool
    call: ToolCall
    arguments: dict[str, Any]
    """The caller's arguments with the agent's fixed ones on top (fixed values are never the caller's to change)."""
    client: str | None = None
    """The client key's name, when `clients` are configured."""
    door: Door = "direct"
    approval: str | None = None
    """The id of the human approval the call runs under (a resumed call); None when nobody approved it."""
    record: Any = None
    """The call's audit row, once the audit wrote it before sending (`gateway.safety.audit.RecordBeforeSend`); its
    outcome is written onto it. None: the call was not sent."""
    sent: bool = False
    """Whether the call was handed on to be sent, its row written first (`RecordBeforeSend` sets it): a door that
    holds the call reads it there, where other work counts its sends in a context variable (`watch_sends`)."""
    vetted: Any = None
    """The arguments object the validation found none of the gateway's secrets in (`ValidateToolArguments`), under
    the redactor's `vetted_under` epoch: the audit's row takes it as it is instead of searching it again (a hook
    that replaces the arguments replaces the object)."""
    vetted_under: object = None


@dataclass(slots=True, kw_only=True)
class Invocation(AgentCall):
    """One tool call on its way through the pipeline."""

    tool: Tool
    """The catalog tool (its binding and exact schemas)."""

    @property
    def needs_approval(self) -> bool:
        return self.agent_tool.needs_approval and self.approval is None


Proceed = Callable[[Invocation], Awaitable[ToolResult]]
"""The rest of the pipeline, from a stage's point of view."""


@dataclass(slots=True, kw_only=True)
class HostedCall(AgentCall):
    """One call of a tool the gateway answers itself, on its way through the pipeline's audit (`Pipeline.hosted`):
    a delegation (`ask_<agent>`: an agent offered as a tool; it runs the sub-agent) or a script (`run_code`: code
    mode; it runs the script, whose tool calls are api calls of their own). Not an `Invocation`: it is bound to no
    operation, so no stage of an api call (validation by a spec's schema, an api's limits and breaker, the
    executor) applies to it. Its `agent` is the calling agent; its row is written before the work starts."""

    @property
    def tool(self) -> str:
        """The name its audit row gives it: the tool's (there is no catalog tool)."""
        return self.agent_tool.name


HostedProceed = Callable[[HostedCall], Awaitable[ToolResult]]
"""The rest of a hosted call's way (`Pipeline.hosted`), from the audit's point of view."""


class Stage(Protocol):
    """One concern of a tool call (validation, approval, limits, ...): answer, or pass the call on.

    The pipeline passes `proceed` by keyword (it links its stages with `functools.partial`). A stage is usually
    an `async def`; one that only decides whether to pass the call on may be a plain function that returns
    `proceed(invocation)` itself (then no frame of its own waits through the rest of the call)."""

    def __call__(self, invocation: Invocation, proceed: Proceed) -> Awaitable[ToolResult]: ...


class ToolSpecific(Protocol):
    """A stage that decides part of its work by the tool alone does it once per tool: the pipeline asks
    `for_tool` when it compiles a tool's chain and runs what it answers for every call of that tool: the stage
    itself, a stage with the tool's part decided (its compiled judge, its api's slots), or None when the stage
    has nothing to do for that tool (left out of its chain). The answer must depend on the tool alone, never on
    a call."""

    def for_tool(self, agent_tool: AgentTool) -> Stage | None: ...


class ToolHooks(Protocol):
    """A typed seam for code that watches or changes tool calls (`gateway.hooks.ConfiguredHooks` is the configured
    `hooks:` of agents.yaml).

    `before_tool_call` may answer instead of the tool (return a result) or let it run (return None);
    `after_tool_call` sees the verdict and returns the result the caller gets. One that can tell, by a tool's name,
    that it leaves every call of the tool as it is may say so by `acts_on(name) -> bool` (optional): the hooks
    stage is then left out of that tool's chain.
    """

    async def before_tool_call(self, invocation: Invocation) -> ToolResult | None: ...

    async def after_tool_call(self, invocation: Invocation, result: ToolResult) -> ToolResult: ...
