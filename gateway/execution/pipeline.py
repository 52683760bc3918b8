"""One tool call's pipeline, the same on every door, and the one place that assembles it.

A door (the chat loop, the direct call, MCP over HTTP and stdio, `gateway call`, `gateway chat`, an approval's
resume) turns its request into an `Invocation` and hands it to the generation's `Pipeline`; it adds only its own
wire format. The stages, outermost first:

    observe -> audit -> redaction -> argument validation -> approval -> rate limits -> breaker and concurrency
          -> hooks -> output check -> audit before sending -> execution

so the data flows as DESIGN.md says: validation (exact schema) -> approval -> limits -> breaker -> hooks ->
execution, then the result is checked against the spec's output schema, redacted, and audited before any door
sees it. Each stage is a `Stage`: it gets the invocation and `proceed`, the rest of the pipeline, and returns the
`ToolResult` (calling `proceed` or not). The observe stage (`gateway.observe.toolcalls`) opens the
`execute_tool` span and counts the call. `build_pipeline` is the composition root: every door's pipeline is built
there, from the executor and (when the gateway keeps a store) the safety layer's parts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING

from ..kernel.calls import Invocation, Proceed, Stage, ToolHooks
from ..messages import ToolResult

if TYPE_CHECKING:
    from ..kernel.redaction import Redactor
    from ..observe.metrics import Metrics
    from ..safety.guards import Safeguards
    from .executor import Executor


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


def build_pipeline(executor: Executor, *, safeguards: Safeguards | None = None,
                   hooks: Sequence[ToolHooks] = (), redactor: Redactor | None = None,
                   metrics: Metrics | None = None) -> Pipeline:
    """The composition root: the pipeline every door of one generation uses.

    Parameters:
        executor: runs the REST request (its redactor knows the manifest's secrets and tokens learned at run time).
        safeguards: the safety layer (audit, approvals, rate limits, breakers); None: none of those stages, and a
            call under approval is refused (there is no queue to hold it in).
        hooks: `ToolHooks`, run in order around the execution.
        redactor: scrubs results and audited arguments; default the executor's.
        metrics: counts each call by api, tool and outcome (`/metrics`); the `execute_tool` span is opened
            whenever a tracer provider is installed.
    """
    from .stages import CheckOutput, Execute, RedactResult, RunHooks, ValidateArguments

    redactor = redactor if redactor is not None else executor.redactor
    from ..kernel import tracing
    from ..observe.toolcalls import ObserveToolCall

    validate = ValidateArguments(executor)
    stages: list[Stage] = []
    if metrics is not None or tracing.enabled():
        stages.append(ObserveToolCall(metrics, redactor))
    before_send: Stage | None = None
    if safeguards is not None:
        audit, before_send = safeguards.audit_stages(redactor)
        stages.append(audit)
    stages.append(RedactResult(redactor))
    stages.append(validate)
    if safeguards is not None:
        stages.extend(safeguards.guard_stages(executor.manifest))
        executor.limits_concurrency = False  # the guard stage holds each api to its max_concurrency
    else:
        from ..safety.approvals import RefuseUnapproved

        stages.append(RefuseUnapproved())
    if hooks:
        stages.append(RunHooks(hooks))
    stages.append(CheckOutput())
    if before_send is not None:
        stages.append(before_send)  # the last: the row is written right before the request, or nothing is sent
    return Pipeline(stages, Execute(executor), validate=validate)
