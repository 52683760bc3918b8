"""The order of a tool call's stages, decided once for every door (`build_pipeline`).

Outermost first: observe (span, metrics) -> audit -> redaction -> argument validation -> approval -> rate limits ->
breaker and concurrency -> hooks -> output check -> audit before sending (the call's row written) -> the call
itself (`gateway.execution.pipeline` has the chaining, `gateway.execution.stages` and `gateway.safety` the stages).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..execution.executor import Executor
from ..execution.pipeline import HostedStage, Pipeline
from ..execution.stages import CheckOutput, Execute, RedactResult, RunHooks, ValidateArguments
from ..kernel import tracing
from ..kernel.calls import Stage, ToolHooks
from ..kernel.redaction import Redactor
from ..observe.toolcalls import ObserveToolCall
from ..safety.approvals import RefuseUnapproved
from ..safety.guards import Safeguards

if TYPE_CHECKING:
    from ..observe.metrics import Metrics


def build_pipeline(executor: Executor, *, safeguards: Safeguards | None = None,
                   hooks: Sequence[ToolHooks] = (), redactor: Redactor | None = None,
                   metrics: Metrics | None = None) -> Pipeline:
    """The composition root: the pipeline every door of one generation uses.

    Parameters:
        executor: runs the REST request (its redactor knows the manifest's secrets and tokens learned at run time);
            with `safeguards`, built with `limit_concurrency=False` (the guard stage holds each api to its
            `max_concurrency`), as `Generation` builds it.
        safeguards: the safety layer (audit, approvals, rate limits, breakers); None: none of those stages, and a
            call under approval is refused (there is no queue to hold it in).
        hooks: `ToolHooks`, run in order around the execution.
        redactor: scrubs results and audited arguments; default the executor's.
        metrics: counts each call by api, tool and outcome (`/metrics`); the `execute_tool` span is opened
            whenever a tracer provider is installed.
    """
    redactor = redactor if redactor is not None else executor.redactor
    validate = ValidateArguments(executor)
    stages: list[Stage] = []
    observe: HostedStage | None = None
    if metrics is not None or tracing.enabled():
        observer = ObserveToolCall(metrics, redactor)
        stages.append(observer)
        observe = observer.hosted  # a delegation's or a script's span and metrics: the same stage
    before_send: Stage | None = None
    hosted: tuple[HostedStage, HostedStage] | None = None
    if safeguards is not None:
        audit, before_send = safeguards.audit_stages(redactor)
        stages.append(audit)
        hosted = (audit, audit.before_run())  # a delegation's or a script's row: the same stages, the same log
    stages.append(RedactResult(redactor))
    stages.append(validate)
    if safeguards is not None:
        stages.extend(safeguards.guard_stages(executor.manifest))
    else:
        stages.append(RefuseUnapproved())
    if hooks:
        stages.append(RunHooks(hooks, validate))
    stages.append(CheckOutput())
    if before_send is not None:
        stages.append(before_send)  # the last: the row is written right before the request, or nothing is sent
    return Pipeline(stages, Execute(executor), validate=validate, audit=hosted, observe=observe)
