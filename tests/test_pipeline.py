"""The call pipeline's composition: stage order, the validation seam the loop uses, the hooks seam, redaction,
and a gateway without a store (no queue: a call under approval is refused). Real executor, real upstream."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from executor_helpers import arg, executor_for, make_tool
from recording_server import RecordingServer, Reply

from gateway.assembly import build_pipeline
from gateway.catalog import AgentTool
from gateway.config.credentials import BearerAuth
from gateway.config.model import ApiConfig, Manifest
from gateway.kernel.calls import Invocation
from gateway.messages import ToolCall, ToolResult

pytestmark = pytest.mark.anyio

TOKEN = "demo-secret-token-1234"
TOOL = make_tool(arg("n", "query", {"type": "integer", "minimum": 0}, required=True), method="POST")


def _invocation(arguments: dict[str, Any], *, approval: str = "never", output_schema: Any = None,
                approved: str | None = None) -> Invocation:
    agent_tool = AgentTool(name=TOOL.name, description="", input_schema=TOOL.input_schema, tool=TOOL,
                           approval=approval, output_schema=output_schema)  # type: ignore[arg-type]
    return Invocation(agent="clerk", agent_tool=agent_tool, tool=TOOL, call=ToolCall(id="1", name=TOOL.name),
                      arguments=arguments, approval=approved)


class Recording:
    """A `ToolHooks` that records what it saw; `answer` makes it answer instead of the tool."""

    def __init__(self, answer: ToolResult | None = None) -> None:
        self.answer = answer
        self.seen: list[tuple[str, Any]] = []

    async def before_tool_call(self, invocation: Invocation) -> ToolResult | None:
        self.seen.append(("before", invocation.arguments))
        return self.answer

    async def after_tool_call(self, invocation: Invocation, result: ToolResult) -> ToolResult:
        self.seen.append(("after", result.ok))
        result.error = f"seen by a hook that knows {TOKEN}"  # a leak the redaction stage must catch
        return result


@pytest.fixture
def upstream() -> Any:
    with RecordingServer() as server:
        server.route("/items", lambda r: Reply(200, {"echo": r.header("authorization")}))
        yield server


async def test_an_invalid_call_under_approval_is_refused_for_its_arguments_first(upstream: RecordingServer) -> None:
    async with executor_for(upstream.url, TOOL) as executor:
        pipeline = build_pipeline(executor)
        invalid = await pipeline(_invocation({"n": -1}, approval="always"))
        unapproved = await pipeline(_invocation({"n": 1}, approval="always"))
        approved = await pipeline(_invocation({"n": 1}, approval="always", approved="apr_1"))
    assert invalid.error_type == "invalid_arguments" and "n" in (invalid.error or "")
    assert unapproved.error_type == "approval_denied" and "approval" in (unapproved.error or "")
    assert approved.ok
    assert len(upstream.requests) == 1  # only the approved call was sent


async def test_check_runs_the_validation_stage_alone(upstream: RecordingServer) -> None:
    async with executor_for(upstream.url, TOOL) as executor:
        pipeline = build_pipeline(executor)
        refusal = await pipeline.check(_invocation({"n": "many"}))
        assert refusal is not None and refusal.error_type == "invalid_arguments"
        assert await pipeline.check(_invocation({"n": 2}, approval="always")) is None
    assert upstream.requests == []


async def test_hooks_see_the_call_and_its_verdict_and_redaction_comes_after(upstream: RecordingServer) -> None:
    hook = Recording()
    async with executor_for(upstream.url, TOOL, auth=[BearerAuth(token=TOKEN)]) as executor:
        result = await build_pipeline(executor, hooks=[hook])(_invocation({"n": 3}))
    assert hook.seen == [("before", {"n": 3}), ("after", True)]
    assert TOKEN not in (result.error or "") and "[REDACTED]" in (result.error or "")
    assert result.body == {"echo": "Bearer [REDACTED]"}


async def test_a_hook_may_answer_instead_of_the_tool(upstream: RecordingServer) -> None:
    hook = Recording(answer=ToolResult.failure("rate_limited", "a budget says no"))
    async with executor_for(upstream.url, TOOL) as executor:
        result = await build_pipeline(executor, hooks=[hook])(_invocation({"n": 3}))
    assert result.error_type == "rate_limited" and upstream.requests == []


async def test_the_output_check_judges_2xx_bodies_only(upstream: RecordingServer) -> None:
    schema = {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}
    async with executor_for(upstream.url, TOOL) as executor:
        pipeline = build_pipeline(executor)
        broken = await pipeline(_invocation({"n": 1}, output_schema=schema))
        upstream.route("/items", Reply(200, {"id": 7}))
        holds = await pipeline(_invocation({"n": 1}, output_schema=schema))
        upstream.route("/items", Reply(404, {"message": "gone"}))
        missing = await pipeline(_invocation({"n": 1}, output_schema=schema))
    assert broken.error_type == "invalid_output" and broken.status == 200 and broken.body == {"echo": None}
    assert "the request ran" in (broken.error or "")
    assert holds.ok and holds.body == {"id": 7}
    assert missing.error_type == "upstream_error"  # an error answer is not judged by the success schema


async def test_the_executor_is_built_knowing_whether_the_guard_stage_holds_the_concurrency_limit(
        upstream: RecordingServer) -> None:
    from pathlib import Path

    from gateway.assembly import Generation
    from gateway.catalog import Catalog
    from gateway.runtime import Runtime
    from gateway.safety.guards import Safeguards
    from gateway.store import MemoryStore

    manifest = Manifest(apis={"demo": ApiConfig(name="demo", base_url=upstream.url, max_concurrency=1)})
    runtime = Runtime(catalog=Catalog([TOOL]), manifest=manifest, toolsets={}, specs_dir=Path("specs"),
                      agents_path=Path("agents.yaml"))
    alone = Generation(runtime)
    guarded = Generation(runtime, safety=Safeguards(MemoryStore(), manifest, redact_log_records=False))
    try:
        assert alone.executor.limits_concurrency  # alone, the executor holds the api to its limit
        assert not guarded.executor.limits_concurrency  # the guard stage does: one semaphore per call, not two
        results = await asyncio.gather(*(guarded.pipeline(_invocation({"n": n})) for n in range(3)))
    finally:
        await alone.aclose()
        await guarded.aclose()
    assert all(r.ok for r in results) and len(upstream.requests) == 3


async def test_a_generation_asked_to_builds_what_runs_a_call_at_the_first_call_and_runs_it_guarded(
        upstream: RecordingServer) -> None:
    """`gateway mcp` lists before the executor and the pipeline exist; the first call builds them, with every stage
    the safety layer gives (here the breaker's concurrency limit), as an eager generation has them."""
    from pathlib import Path

    from gateway.assembly import Generation
    from gateway.catalog import Catalog
    from gateway.runtime import Runtime
    from gateway.safety.guards import Safeguards
    from gateway.store import MemoryStore

    manifest = Manifest(apis={"demo": ApiConfig(name="demo", base_url=upstream.url, max_concurrency=1)})
    runtime = Runtime(catalog=Catalog([TOOL]), manifest=manifest, toolsets={}, specs_dir=Path("specs"),
                      agents_path=Path("agents.yaml"))
    safety = Safeguards(MemoryStore(), manifest, redact_log_records=False)
    eager = Generation(runtime, safety=safety)
    deferred = Generation(runtime, safety=safety, calls_on_first_use=True)
    never_called = Generation(runtime, calls_on_first_use=True)
    try:
        assert "pipeline" in vars(eager) and "runner" in vars(eager)
        assert not {"executor", "pipeline", "runner", "hooks"} & set(vars(deferred))
        results = await asyncio.gather(*(deferred.pipeline(_invocation({"n": n})) for n in range(3)))
        assert not deferred.executor.limits_concurrency  # the guard stage holds the limit, as in `eager`
        assert [type(stage).__name__ for stage in deferred.pipeline.stages] == \
            [type(stage).__name__ for stage in eager.pipeline.stages]
    finally:
        await eager.aclose()
        await deferred.aclose()
        await never_called.aclose()
    assert "executor" not in vars(never_called)  # closing builds nothing
    assert all(r.ok for r in results) and len(upstream.requests) == 3


async def test_a_body_the_executor_redacted_is_not_walked_again_unless_a_secret_was_learned_since(
        upstream: RecordingServer) -> None:
    from gateway.execution.pipeline import Pipeline
    from gateway.execution.stages import Execute, RedactResult

    late = "late-learned-secret-5678"
    upstream.route("/items", lambda r: Reply(200, {"echo": r.header("authorization"), "late": late}))
    async with executor_for(upstream.url, TOOL, auth=[BearerAuth(token=TOKEN)]) as executor:
        redactor = executor.redactor
        walked: list[Any] = []
        value = redactor.value

        def counted(body: Any) -> Any:
            walked.append(body)
            return value(body)

        redactor.value = counted  # type: ignore[method-assign]
        plain = await build_pipeline(executor)(_invocation({"n": 1}))
        assert plain.body == {"echo": "Bearer [REDACTED]", "late": late}
        assert len(walked) == 1  # by the executor, as it parsed the body; the redaction stage had nothing to add

        async def learns(invocation: Invocation, proceed: Any) -> ToolResult:
            result = await proceed(invocation)
            redactor.add(late)  # a token learned after the executor redacted the body (another call's, say)
            return result

        walked.clear()
        learned = await Pipeline([RedactResult(redactor), learns], Execute(executor))(_invocation({"n": 1}))
    assert learned.body == {"echo": "Bearer [REDACTED]", "late": "[REDACTED]"} and len(walked) == 2


async def test_a_hook_that_writes_into_the_body_has_it_redacted(upstream: RecordingServer) -> None:
    class Writes(Recording):
        async def after_tool_call(self, invocation: Invocation, result: ToolResult) -> ToolResult:
            result.body["hook"] = TOKEN  # in place: the same body object the executor redacted
            return result

    async with executor_for(upstream.url, TOOL, auth=[BearerAuth(token=TOKEN)]) as executor:
        result = await build_pipeline(executor, hooks=[Writes()])(_invocation({"n": 3}))
    assert result.body == {"echo": "Bearer [REDACTED]", "hook": "[REDACTED]"}


class PerTool:
    """A stage that decides its part by the tool: left out of a tool's chain that needs none of it (`for_tool`
    answers None), else run as the stage it answers; it counts how often it is asked and how often it runs."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.ran: list[str] = []

    def for_tool(self, agent_tool: AgentTool) -> Any:
        self.asked.append(agent_tool.name)
        if agent_tool.approval == "always":
            return None
        tag = f"{agent_tool.name}@{len(self.asked)}"

        async def run(invocation: Invocation, proceed: Any) -> ToolResult:
            self.ran.append(tag)
            return await proceed(invocation)

        return run


async def test_each_tool_s_chain_is_compiled_once_of_the_stages_that_apply_to_it(upstream: RecordingServer) -> None:
    from gateway.execution.pipeline import Pipeline
    from gateway.execution.stages import Execute

    stage = PerTool()
    async with executor_for(upstream.url, TOOL) as executor:
        pipeline = Pipeline([stage], Execute(executor))
        kept = _invocation({"n": 1}).agent_tool
        for _ in range(3):  # the same tool three times: its chain is compiled once
            call = _invocation({"n": 1})
            call.agent_tool = kept
            assert (await pipeline(call)).ok
        assert stage.asked == [TOOL.name] and stage.ran == [f"{TOOL.name}@1"] * 3
        assert (await pipeline(_invocation({"n": 1}, approval="always", approved="apr_1"))).ok  # left out for it
    assert stage.asked == [TOOL.name, TOOL.name] and len(stage.ran) == 3
    assert len(upstream.requests) == 4  # every call ran, with or without the stage


async def test_a_stage_left_out_for_a_tool_changes_nothing_of_its_verdicts(upstream: RecordingServer) -> None:
    """The output check is left out of a tool's chain without an output schema, and the approval stage of one
    that needs no approval; the verdicts of the tools that have them are the same as ever."""
    upstream.route("/items", lambda r: Reply(200, {"n": "not a number"}))
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    async with executor_for(upstream.url, TOOL) as executor:
        pipeline = build_pipeline(executor)
        unchecked = await pipeline(_invocation({"n": 1}))
        checked = await pipeline(_invocation({"n": 1}, output_schema=schema))
        held = await pipeline(_invocation({"n": 1}, approval="always"))
        invalid = await pipeline(_invocation({"n": -1}))
    assert unchecked.ok and unchecked.body == {"n": "not a number"}
    assert checked.error_type == "invalid_output" and "n" in (checked.error or "")
    assert held.error_type == "approval_denied"
    assert invalid.error_type == "invalid_arguments"
    assert len(upstream.requests) == 2


NOTE = make_tool(arg("q", "query", {"type": "string"}, required=True))


@pytest.mark.parametrize("hook", ["replaces the arguments", "teaches the redactor a secret"])
async def test_the_audit_searches_the_arguments_itself_unless_the_validation_searched_that_very_object(
        upstream: RecordingServer, hook: str) -> None:
    """The validation's search of a plain call's arguments for a secret spares the audit its own, only for the very
    arguments it searched and only under the redactor's epoch it searched them in: a hook that replaces them (the
    operator's: they are sent) or a secret learned meanwhile has the row redacted as before."""
    from gateway.safety.guards import Safeguards
    from gateway.store import MemoryStore

    learned = "learned-after-validation-5678"

    class Hook:
        async def before_tool_call(self, invocation: Invocation) -> ToolResult | None:
            if hook == "replaces the arguments":
                invocation.arguments = {"q": f"from the hook {TOKEN}"}
            else:
                executor.redactor.add(learned)
            return None

        async def after_tool_call(self, invocation: Invocation, result: ToolResult) -> ToolResult:
            return result

    async with executor_for(upstream.url, NOTE, auth=[BearerAuth(token=TOKEN)]) as executor:
        store = MemoryStore()
        pipeline = build_pipeline(executor, hooks=[Hook()],
                                  safeguards=Safeguards(store, executor.manifest, redact_log_records=False))
        agent_tool = AgentTool(name=NOTE.name, description="", input_schema=NOTE.input_schema, tool=NOTE)
        arguments = {"q": learned}
        invocation = Invocation(agent="clerk", agent_tool=agent_tool, tool=NOTE, arguments=arguments,
                                call=ToolCall(id="1", name=NOTE.name, arguments=arguments))
        result = await pipeline(invocation)
        rows = await store.list_audit()
    assert result.ok, result.error
    assert invocation.vetted is arguments  # the validation searched the caller's arguments
    assert len(upstream.requests) == 1
    (row,) = rows
    assert row.arguments == {"q": "from the hook [REDACTED]"} if hook == "replaces the arguments" \
        else row.arguments == {"q": "[REDACTED]"}
