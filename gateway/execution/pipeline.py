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
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence

from ..kernel.calls import Invocation, Proceed, Stage
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
        self._validate = validate
        proceed = terminal
        for stage in reversed(self.stages):
            proceed = _Link(stage, proceed)
        self._entry = proceed

    def __call__(self, invocation: Invocation) -> Awaitable[ToolResult]:
        """The call's result, to be awaited (the outermost stage's coroutine: no frame of the pipeline's own)."""
        return self._entry(invocation)

    async def check(self, invocation: Invocation) -> ToolResult | None:
        """The validation stage's refusal of `invocation`, or None when its arguments are valid."""
        if self._validate is None:
            return None
        result = await self._validate(invocation, _accept)
        return None if result.ok else result


async def _accept(invocation: Invocation) -> ToolResult:
    return ToolResult(ok=True)


class _Link:
    """`proceed` for the stage before `stage`: a plain call that hands back `stage`'s coroutine, so the await chain
    of a call holds one frame per stage rather than two (every suspension of the upstream request resumes the
    whole chain)."""

    __slots__ = ("proceed", "stage")

    def __init__(self, stage: Stage, proceed: Proceed) -> None:
        self.stage = stage
        self.proceed = proceed

    def __call__(self, invocation: Invocation) -> Awaitable[ToolResult]:
        return self.stage(invocation, self.proceed)
