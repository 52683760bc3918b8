"""The call pipeline's observe stage: an `execute_tool {tool}` span and the tool-call metrics, on every door.

It is the outermost stage (`build_pipeline`), so the span covers the whole call (audit, approval, limits,
hooks, the upstream request as its child) and what it records is what the caller gets: the result after
redaction. Arguments and results become span attributes only when content capture is on, and then redacted
by the same redactor as the audit log's arguments.

A call the gateway answers itself (a delegation, a `run_code` script: `Pipeline.hosted`) takes the same stage
(`hosted`): the same span, in which the sub-agent's run or the script's own tool calls nest, and the same metrics,
under the api `HOSTED_API` (it calls no api itself; the calls it makes count under theirs).

Without a span, the call's latency is measured when the rest of the pipeline returns, and the metrics are
updated on the event loop's next turn: a door writes its answer in the step in which the pipeline returned, so
prometheus' locks and the histogram's buckets are no longer on the caller's wait (as the access line,
`gateway.server.accesslog`). Every call is still counted, in the order the calls ended (the loop runs its
callbacks first in, first out); a count that fails is reported by the loop's exception handler (asyncio logs it
with its traceback) instead of failing the call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..kernel import tracing
from ..messages import ToolResult

if TYPE_CHECKING:
    from ..catalog import AgentTool
    from ..kernel.calls import HostedCall, HostedProceed, Invocation, Proceed
    from ..kernel.redaction import Redactor
    from .metrics import Metrics

    A = TypeVar("A", Invocation, HostedCall)

HOSTED_API = ""
"""The `api` label of a delegation's or a script's call: none (as its audit row's `api`)."""


class ObserveToolCall:
    """Span and metrics of one tool call."""

    def __init__(self, metrics: Metrics | None, redactor: Redactor | None, *, capture: bool | None = None) -> None:
        self.metrics = metrics
        self.redactor = redactor
        self.capture = tracing.capture_content() if capture is None else capture

    def __call__(self, invocation: Invocation, proceed: Proceed) -> Awaitable[ToolResult]:
        return self._observe(invocation, proceed, invocation.tool.api)

    def hosted(self, invocation: HostedCall, proceed: HostedProceed) -> Awaitable[ToolResult]:
        """A delegation's or a script's call (`Pipeline.hosted`): its span and metrics, as an api call's."""
        return self._observe(invocation, proceed, HOSTED_API)

    async def _observe(self, invocation: A, proceed: Callable[[A], Awaitable[ToolResult]], api: str) -> ToolResult:
        if not tracing.enabled():
            metrics = self.metrics
            if metrics is None:
                return await proceed(invocation)
            # `_measured`, inline: the usual call (metrics, no span) holds one frame of this stage, not two.
            started = time.perf_counter()
            result = await proceed(invocation)
            asyncio.get_running_loop().call_soon(self._count, metrics, api, invocation.call.name, result,
                                                 time.perf_counter() - started)
            return result
        capture = self.capture
        call = invocation.call
        # A call whose arguments could not be read (`Pipeline.refused`) shows the text that came, as its row does.
        arguments = self._redacted(invocation.arguments if call.parse_error is None else call.unread_text()) \
            if capture else None
        with tracing.tool_span(invocation.call.name, call_id=invocation.call.id, agent=invocation.agent,
                               arguments=arguments) as span:
            result = await self._measured(invocation, proceed, api)
            tracing.record_tool_result(span, ok=result.ok, error_type=result.error_type,
                                       result=self._redacted(result.body if result.ok else result.error)
                                       if capture else None)
        return result

    async def _measured(self, invocation: A, proceed: Callable[[A], Awaitable[ToolResult]], api: str) -> ToolResult:
        metrics = self.metrics
        if metrics is None:
            return await proceed(invocation)
        started = time.perf_counter()
        result = await proceed(invocation)
        self._count(metrics, api, invocation.call.name, result, time.perf_counter() - started)
        return result

    @staticmethod
    def _count(metrics: Metrics, api: str, tool: str, result: ToolResult, seconds: float) -> None:
        metrics.record_tool_call(api, tool, "ok" if result.ok else result.error_type or "error", seconds)
        if result.warning:
            metrics.output_warnings.labels(api, tool).inc()

    def _redacted(self, value: object) -> object:
        return self.redactor.value(value) if self.redactor else value

    def for_tool(self, agent_tool: AgentTool) -> ObserveToolCall:
        """This stage for calls of one tool (`ToolSpecific`): its metrics' labelled children found once."""
        tool = agent_tool.tool
        if self.metrics is None or tool is None:
            return self
        return _ObserveTool(self, agent_tool.name, tool.api)


class _ObserveTool(ObserveToolCall):
    """`ObserveToolCall` for one tool: the latency histogram's and the `ok` counter's children of its (api, tool)
    are kept once its first call succeeded (`labels()` children are prometheus_client's public API; made on first
    use, as before, so no series appears before its first count), and a successful call without a span counts
    itself with no look-up. A call under another name or api (never from the tool's own chain) and every failure
    take the general path."""

    def __init__(self, general: ObserveToolCall, name: str, api: str) -> None:
        super().__init__(general.metrics, general.redactor, capture=general.capture)
        metrics = general.metrics
        assert metrics is not None
        self.counted = metrics
        self.name = name
        self.api = api
        self.children: tuple[Any, Any] | None = None
        """(latency, ok count), once the first successful call has found them."""

    async def __call__(self, invocation: Invocation, proceed: Proceed) -> ToolResult:
        if tracing.enabled():
            return await self._observe(invocation, proceed, invocation.tool.api)
        started = time.perf_counter()
        result = await proceed(invocation)
        seconds = time.perf_counter() - started
        children = self.children
        usual = result.ok and not result.warning and invocation.call.name == self.name \
            and invocation.tool.api == self.api
        if usual and children is not None:
            asyncio.get_running_loop().call_soon(_count_usual, children[0], self.counted, children[1], seconds)
        else:
            if usual:  # found now, so that the next call takes the short way even before this one is counted
                metrics = self.counted
                self.children = (metrics.tool_latency.labels(self.api, self.name),
                                 metrics.tool_calls.labels(self.api, self.name, "ok"))
            asyncio.get_running_loop().call_soon(self._count, self.counted, invocation.tool.api, invocation.call.name,
                                                 result, seconds)
        return result


def _count_usual(latency: Any, metrics: Metrics, count: Any, seconds: float) -> None:
    """A successful call of a tool whose labelled children are known: its latency observed, its `ok` counted."""
    latency.observe(seconds)
    metrics.count(count)
