"""How a tool's chain is linked: a `Linked` stage holds the rest of its chain itself (no link of the pipeline's in
between), any other stage is called with `proceed`, and both give the same verdicts. Real executor, real upstream."""

from __future__ import annotations

from typing import Any

import pytest
from executor_helpers import arg, executor_for, make_tool
from recording_server import RecordingServer, Reply

from gateway.catalog import AgentTool
from gateway.execution.pipeline import Pipeline
from gateway.execution.stages import Execute, RedactResult
from gateway.kernel.calls import Invocation, Linked, Proceed
from gateway.kernel.redaction import Redactor
from gateway.messages import ToolCall, ToolResult

pytestmark = pytest.mark.anyio

TOKEN = "linked-secret-token-1234"
TOOL = make_tool(arg("n", "query", {"type": "integer"}, required=True))
AGENT_TOOL = AgentTool(name=TOOL.name, description="", input_schema=TOOL.input_schema, tool=TOOL)


def _invocation() -> Invocation:
    return Invocation(agent="clerk", agent_tool=AGENT_TOOL, tool=TOOL, call=ToolCall(id="1", name=TOOL.name),
                      arguments={"n": 1})


class Seen(Linked):
    """A `Linked` stage that notes what it is called with and what it holds."""

    def __init__(self, seen: list[Any]) -> None:
        self.seen = seen

    async def run(self, invocation: Invocation) -> ToolResult:
        self.seen.append(self.proceed)
        result = await self.proceed(invocation)
        result.error = f"leaked {TOKEN}"  # the redaction stage outside it must still catch this
        return result


@pytest.fixture
def upstream() -> Any:
    with RecordingServer() as server:
        server.route("/items", lambda r: Reply(200, {"ok": True}))
        yield server


async def test_a_linked_stage_holds_the_rest_of_its_chain_and_is_called_with_the_invocation_alone(
        upstream: RecordingServer) -> None:
    seen: list[Any] = []
    plain_calls: list[Proceed] = []

    async def plain(invocation: Invocation, proceed: Proceed) -> ToolResult:
        plain_calls.append(proceed)
        return await proceed(invocation)

    redaction, stage = RedactResult(Redactor([TOKEN])), Seen(seen)
    async with executor_for(upstream.url, TOOL) as executor:
        pipeline = Pipeline([redaction, stage, plain], Execute(executor))
        chain = pipeline.chain(AGENT_TOOL)
        # The chain's entry is the first stage's own `run`, on a copy that holds the rest: no link frame before it.
        assert getattr(chain, "__func__", None) is RedactResult.run and chain.__self__ is not redaction
        linked_stage = chain.__self__.proceed.__self__
        assert type(linked_stage) is Seen and linked_stage is not stage and not hasattr(stage, "proceed")
        result = await chain(_invocation())
        again = await pipeline(_invocation())
    assert result.ok and result.error == "leaked [REDACTED]" and again.error == "leaked [REDACTED]"
    # The plain stage got `proceed` from a link of the pipeline's, the same one on every call of the tool's chain.
    assert seen[0] is seen[1] and len(plain_calls) == 2 and plain_calls[0] is plain_calls[1]
    assert len(upstream.requests) == 2


async def test_a_linked_stage_called_as_a_stage_outside_a_chain_runs_the_same(upstream: RecordingServer) -> None:
    seen: list[Any] = []
    async with executor_for(upstream.url, TOOL) as executor:
        terminal = Execute(executor)
        result = await RedactResult(Redactor([TOKEN]))(_invocation(), Seen(seen).link(terminal))
    assert result.ok and result.error == "leaked [REDACTED]" and seen == [terminal]
