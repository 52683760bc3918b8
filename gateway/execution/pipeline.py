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
(the approval stage for a tool that needs none, the output check for a tool with no schema to check); the
stages are linked by `functools.partial` (in C), so one call's await chain holds one frame per stage that
applies and no frame of the pipeline's own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from functools import partial
from typing import cast

from ..catalog import AgentTool
from ..kernel.calls import Invocation, Proceed, Stage
from ..kernel.memo import ByIdentity
from ..messages import ToolResult


class Pipeline:
    """The assembled stages of a tool call; `await pipeline(invocation)` runs one call through all of them.

    Args:
        stages: outermost first.
        terminal: runs the call itself (the executor).
        validate: the argument-validation stage, also run alone by `check` (the loop checks a call before it
            queues the call for approval).
    """

    def __init__(self, stages: Sequence[Stage], terminal: Proceed, *, validate: Stage | None = None) -> None:
        self.stages = tuple(stages)
        self._terminal = terminal
        self._validate = validate
        self._chains: ByIdentity[AgentTool, Proceed] = ByIdentity(self._link)

    def __call__(self, invocation: Invocation) -> Awaitable[ToolResult]:
        """The call's result, to be awaited (the outermost stage's coroutine: no frame of the pipeline's own)."""
        return self.chain(invocation.agent_tool)(invocation)

    def chain(self, agent_tool: AgentTool) -> Proceed:
        """The stages that apply to `agent_tool`, linked: `chain(tool)(invocation)` runs a call of that tool.

        A door that keeps a tool for a generation may keep its chain with it (the pipeline is the generation's)."""
        return self._chains(agent_tool)

    def _link(self, agent_tool: AgentTool) -> Proceed:
        entry = self._terminal
        for stage in reversed(self.stages):
            specific = for_tool(stage, agent_tool)
            if specific is not None:
                entry = partial(specific, proceed=entry)
        return entry

    async def check(self, invocation: Invocation) -> ToolResult | None:
        """The validation stage's refusal of `invocation`, or None when its arguments are valid."""
        if self._validate is None:
            return None
        result = await self._validate(invocation, _accept)
        return None if result.ok else result


def for_tool(stage: Stage, agent_tool: AgentTool) -> Stage | None:
    """`stage` as it runs for calls of `agent_tool` (`ToolSpecific`; a stage that is not: itself)."""
    specific = getattr(stage, "for_tool", None)
    return stage if specific is None else cast(Stage | None, specific(agent_tool))


async def _accept(invocation: Invocation) -> ToolResult:
    return ToolResult(ok=True)
