from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.catalog import AgentTool, Tool
from gateway.config.model import ApiConfig, Manifest
from gateway.execution.pipeline import Pipeline
from gateway.execution.stages import Execute
from gateway.kernel.caller import bind_caller
from gateway.kernel.calls import Invocation, Stage
from gateway.kernel.redaction import Redactor
from gateway.messages import ToolCall, ToolResult
from gateway.safety.audit import AuditLog, RecordCall
from gateway.safety.breaker import Breakers, CircuitBreaker, GuardApi, GuardSettings, is_failure
from gateway.safety.ratelimit import ChargeToolBucket, RateLimiter, RateLimits
from gateway.store import MemoryStore

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _tool(name: str, api: str) -> Tool:
    return Tool(name=name, api=api, operation_id=name, method="POST", path="/x", description="", input_schema={})


class ScriptedExecutor:
    """Answers per api: a ToolResult, or an Event to wait on (a hanging upstream)."""

    def __init__(self) -> None:
        self.answers: dict[str, Any] = {}
        self.calls: list[str] = []
        self.closed = False
        self.redactor = Redactor()

    async def execute(self, tool: Tool, arguments: dict[str, Any], *, timeout: float | None = None,
                      max_result_bytes: int | None = None, validated: bool = False) -> ToolResult:
        self.calls.append(tool.name)
        answer = self.answers.get(tool.api, ToolResult(ok=True, status=200, body={"ok": 1}, bytes=9))
        if isinstance(answer, asyncio.Event):
            await answer.wait()
            return ToolResult(ok=True, status=200)
        return answer

    async def aclose(self) -> None:
        self.closed = True


class Guarded:
    """The safety stages of the call pipeline around a scripted executor (audit, rate limit, breaker)."""

    def __init__(self, inner: ScriptedExecutor, manifest: Manifest, *, audit: AuditLog | None = None,
                 limiter: RateLimiter | None = None, settings: GuardSettings | None = None) -> None:
        self.breakers = Breakers(settings)
        stages: list[Stage] = []
        if audit is not None:
            stages.append(RecordCall(audit))
        if limiter is not None:
            stages.append(ChargeToolBucket(limiter))
        stages.append(GuardApi(manifest, self.breakers))
        self.pipeline = Pipeline(stages, Execute(inner))  # type: ignore[arg-type]

    async def execute(self, tool: Tool, arguments: dict[str, Any], *, timeout: float | None = None,
                      client: str | None = None, agent: str = "clerk") -> ToolResult:
        agent_tool = AgentTool(name=tool.name, description="", input_schema={}, tool=tool, timeout=timeout)
        call = ToolCall(id="c1", name=tool.name, arguments=arguments)
        return await self.pipeline(Invocation(agent=agent, agent_tool=agent_tool, tool=tool, call=call,
                                              arguments=arguments, client=client))

    def breaker(self, api: str, client: str | None = None) -> CircuitBreaker:
        return self.breakers.get(api, client)


def test_breaker_opens_probes_and_closes() -> None:
    clock = Clock()
    breaker = CircuitBreaker(failures=3, reset_after=10, clock=clock)
    for _ in range(2):
        assert breaker.allow()
        breaker.record(False)
    assert breaker.state == "closed"
    breaker.record(False)
    assert breaker.state == "open" and not breaker.allow()
    clock.now += 10
    assert breaker.state == "half_open"
    assert breaker.allow()  # the probe
    assert not breaker.allow()  # only one probe at a time
    breaker.record(False)  # the probe failed: open again for a full period
    assert breaker.state == "open" and breaker.retry_in() == 10
    clock.now += 10
    assert breaker.allow()
    breaker.record(True)
    assert breaker.state == "closed" and breaker.allow()


def test_cancelled_probe_lets_the_next_call_probe() -> None:
    clock = Clock()
    breaker = CircuitBreaker(failures=1, reset_after=5, clock=clock)
    breaker.record(False)
    clock.now += 5
    assert breaker.allow()
    breaker.release()
    assert breaker.allow()


def test_what_counts_as_a_failure() -> None:
    assert is_failure(ToolResult.failure("timeout", "slow"))
    assert is_failure(ToolResult.failure("transport_error", "reset"))
    assert is_failure(ToolResult.failure("upstream_error", "boom", status=503))
    assert not is_failure(ToolResult.failure("upstream_error", "not found", status=404))
    assert not is_failure(ToolResult.failure("invalid_arguments", "bad"))
    assert not is_failure(ToolResult(ok=True, status=200))


async def test_failing_api_is_cut_off_without_touching_others() -> None:
    inner = ScriptedExecutor()
    inner.answers["bad"] = ToolResult.failure("upstream_error", "HTTP 500", status=500)
    store = MemoryStore()
    guarded = Guarded(inner, Manifest(), audit=AuditLog(store),
                              settings=GuardSettings(failures=2, reset_after=60))
    for _ in range(2):
        assert (await guarded.execute(_tool("bad_op", "bad"), {})).status == 500
    refused = await guarded.execute(_tool("bad_op", "bad"), {})
    # Its own type (user44's left item: it was `transport_error`, which reads as a call that failed on the wire),
    # saying the breaker is open, that nothing was sent and when it lets a call through again.
    assert refused.error_type == "circuit_open" and "not sent" in (refused.error or "")
    assert "circuit breaker is open" in (refused.error or "") and "again in 60 s" in (refused.error or "")
    assert inner.calls.count("bad_op") == 2  # the third never reached the api
    assert (await guarded.execute(_tool("good_op", "good"), {})).ok
    rows = await store.list_audit(limit=10)
    assert [r.status for r in rows] == ["ok", "circuit_open", "upstream_error", "upstream_error"]


async def test_concurrency_limit_per_api_keeps_other_apis_free() -> None:
    inner = ScriptedExecutor()
    gate = asyncio.Event()
    inner.answers["slow"] = gate
    manifest = Manifest(apis={"slow": ApiConfig(name="slow", max_concurrency=2)})
    guarded = Guarded(inner, manifest, settings=GuardSettings(max_concurrency=8))
    hung = [asyncio.ensure_future(guarded.execute(_tool("slow_op", "slow"), {}, timeout=30)) for _ in range(2)]
    await asyncio.sleep(0.01)
    waiting = await guarded.execute(_tool("slow_op", "slow"), {}, timeout=0.05)
    assert waiting.error_type == "timeout" and "busy" in (waiting.error or "")
    assert (await guarded.execute(_tool("fast_op", "fast"), {})).ok
    gate.set()
    assert all(r.ok for r in await asyncio.gather(*hung))


async def test_cancelled_call_is_audited_once_and_not_repeated() -> None:
    inner = ScriptedExecutor()
    inner.answers["slow"] = asyncio.Event()
    store = MemoryStore()
    guarded = Guarded(inner, Manifest(), audit=AuditLog(store))
    with bind_caller(client="ci", agent="clerk"):
        task = asyncio.ensure_future(guarded.execute(_tool("write_op", "slow"), {"n": 1}))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert inner.calls == ["write_op"]
    rows = await store.list_audit()
    assert len(rows) == 1 and rows[0].client == "ci" and rows[0].agent == "clerk"
    assert "cancelled" in (rows[0].error or "")
    assert guarded.breaker("slow").state == "closed"  # a cancellation is no verdict on the api


class QueuingStore(MemoryStore):
    """Takes each audit row at once, then waits for its commit (like the SQLite store's queued path)."""

    def __init__(self) -> None:
        super().__init__()
        self.committed = asyncio.Event()

    async def add_audit(self, row: Any) -> None:
        await super().add_audit(row)
        await self.committed.wait()


async def test_a_caller_cancelled_while_its_row_is_committed_leaves_the_row() -> None:
    store = QueuingStore()
    guarded = Guarded(ScriptedExecutor(), Manifest(), audit=AuditLog(store))
    task = asyncio.ensure_future(guarded.execute(_tool("write_op", "fast"), {"n": 1}))
    await asyncio.sleep(0.01)  # the call is done; its row waits for the commit
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    rows = await store.list_audit()
    assert [(r.tool, r.status) for r in rows] == [("write_op", "ok")]  # one row, the call's own outcome


async def test_tool_rate_limit_is_a_result_for_the_model() -> None:
    inner = ScriptedExecutor()
    limiter = RateLimiter(MemoryStore(), RateLimits.model_validate({"tool": "1/min"}))
    guarded = Guarded(inner, Manifest(), limiter=limiter)
    assert (await guarded.execute(_tool("op", "api"), {})).ok
    limited = await guarded.execute(_tool("op", "api"), {})
    assert limited.error_type == "rate_limited" and "retry after" in (limited.error or "")
    assert inner.calls == ["op"]


async def test_one_clients_failures_open_only_its_own_breaker() -> None:
    inner = ScriptedExecutor()
    inner.answers["shared"] = ToolResult.failure("upstream_error", "HTTP 500", status=500)
    guarded = Guarded(inner, Manifest(), settings=GuardSettings(failures=2, reset_after=60))
    for _ in range(2):
        assert (await guarded.execute(_tool("op", "shared"), {}, client="noisy")).status == 500
    refused = await guarded.execute(_tool("op", "shared"), {}, client="noisy")
    assert "paused" in (refused.error or "")
    # Another client (and the anonymous callers) still reach the api.
    assert (await guarded.execute(_tool("op", "shared"), {}, client="quiet")).status == 500
    assert (await guarded.execute(_tool("op", "shared"), {})).status == 500
    assert inner.calls.count("op") == 4
    assert guarded.breaker("shared", "noisy").state == "open"
    assert guarded.breaker("shared", "quiet").state == "closed"


async def test_a_compiled_chain_keeps_the_anonymous_breaker_and_each_clients_own() -> None:
    # A tool's chain keeps the breaker of calls without a client once found: it is the one `Breakers` holds.
    inner = ScriptedExecutor()
    inner.answers["shared"] = ToolResult.failure("upstream_error", "HTTP 500", status=500)
    guarded = Guarded(inner, Manifest(), settings=GuardSettings(failures=2, reset_after=60))
    tool = _tool("op", "shared")
    agent_tool = AgentTool(name="op", description="", input_schema={}, tool=tool)
    chain = guarded.pipeline.chain(agent_tool)

    async def call(client: str | None) -> ToolResult:
        return await chain(Invocation(agent="clerk", agent_tool=agent_tool, tool=tool, call=ToolCall(id="c", name="op"),
                                      arguments={}, client=client))

    assert [(await call(None)).status for _ in range(2)] == [500, 500]
    assert "paused" in ((await call(None)).error or "")
    assert guarded.breaker("shared").state == "open"
    assert (await call("ci")).status == 500  # a client's calls go by its own breaker
    assert guarded.breaker("shared", "ci").state == "closed" and inner.calls.count("op") == 3
