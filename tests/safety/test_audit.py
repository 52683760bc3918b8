from __future__ import annotations

import functools
import time
from pathlib import Path

import pytest

from gateway.catalog import AgentTool, Tool
from gateway.errors import AuditUnavailable, StoreUnavailable
from gateway.kernel.caller import Caller, UserToken, bind_caller, current_caller
from gateway.kernel.redaction import Redactor
from gateway.messages import ToolCall, ToolResult
from gateway.safety.audit import AuditLog
from gateway.store import AuditRow, MemoryStore, ResponseRecord, SQLiteStore, Store

pytestmark = pytest.mark.anyio

SECRET = "tok-9f8e7d6c5b4a"


def _tool() -> Tool:
    return Tool(name="shop_create", api="shop", operation_id="create", method="POST", path="/items", description="",
                input_schema={})


async def test_tool_row_has_caller_and_redacted_arguments() -> None:
    store = MemoryStore()
    audit = AuditLog(store, Redactor([SECRET]))
    result = ToolResult.failure("upstream_error", f"HTTP 401: bad token {SECRET}", status=401, bytes=42,
                                duration_ms=12.5)
    with bind_caller(client="ci", agent="clerk", run_id="r1"):
        await audit.record_tool(_tool(), {"note": f"use {SECRET}", "n": 1}, result)
    (row,) = await audit.recent()
    assert row["client"] == "ci" and row["agent"] == "clerk" and row["tool"] == "shop_create"
    assert row["api"] == "shop" and row["status"] == "upstream_error" and row["http_status"] == 401
    assert row["bytes"] == 42 and row["latency_ms"] == 12.5 and row["run_id"] == "r1"
    assert SECRET not in repr(row) and row["arguments"]["n"] == 1
    assert row["time"].endswith("Z") and row["time"][:4].isdigit()


async def test_caller_binding_nests_and_resets() -> None:
    assert current_caller().client is None
    with bind_caller(client="a", agent="x"):
        with bind_caller(agent="y"):
            assert (current_caller().client, current_caller().agent) == ("a", "y")
        assert current_caller().agent == "x"
    assert current_caller().agent is None


async def test_an_inner_binding_keeps_every_other_field() -> None:
    values = {"client": "c", "agent": "a", "run_id": "r", "approvals": {"t": "apr"}, "started": 1.5, "notes": {},
              "subject": "ann", "token": UserToken(value="t0ken", subject="ann")}
    assert set(values) == set(Caller._fields)  # a new field must be listed here too
    with bind_caller(**values):
        for name in values:
            with bind_caller(**{name: None}):
                kept = {other: getattr(current_caller(), other) for other in values if other != name}
                assert kept == {other: value for other, value in values.items() if other != name}
                assert getattr(current_caller(), name) is None
        assert current_caller() == Caller(**values)
    with pytest.raises(TypeError):
        with bind_caller(nobody="x"):
            pass


async def test_approved_call_carries_its_approval_id() -> None:
    audit = AuditLog(MemoryStore())
    with bind_caller(approvals={"shop_create": "apr_1"}):
        await audit.record_tool(_tool(), {}, ToolResult(ok=True, status=201))
    assert (await audit.recent())[0]["approval"] == "apr_1"


async def test_chat_row_and_agent_filter() -> None:
    audit = AuditLog(MemoryStore())
    await audit.record_chat(agent="clerk", status="ok", latency_ms=5, usage={"total_tokens": 30}, run_id="r")
    await audit.record_chat(agent="weather", status="error", latency_ms=1, error="HTTP 502")
    assert [r["agent"] for r in await audit.recent(agents={"clerk"})] == ["clerk"]
    assert (await audit.recent(agents={"clerk"}))[0]["usage"] == {"total_tokens": 30}
    assert len(await audit.recent(limit=1)) == 1


async def test_retention_prunes_old_rows() -> None:
    store = MemoryStore()
    audit = AuditLog(store, retention_days=1)
    await store.add_audit(AuditRow(time=time.time() - 3 * 86400, kind="tool", agent="old"))
    await store.add_audit(AuditRow(time=time.time(), kind="tool", agent="new"))
    assert await audit.prune() == 1
    assert [r["agent"] for r in await audit.recent()] == ["new"]
    assert await AuditLog(store, retention_days=None).prune() == 0


async def test_writes_prune_at_most_hourly() -> None:
    store = MemoryStore()
    await store.add_audit(AuditRow(time=time.time() - 90 * 86400, kind="tool", agent="old"))
    audit = AuditLog(store, retention_days=30)
    await audit.record_chat(agent="clerk", status="ok", latency_ms=1)
    assert [r["agent"] for r in await audit.recent()] == ["clerk"]


async def test_the_hourly_sweep_prunes_conversations_too() -> None:
    store = MemoryStore()
    nine_days_ago = time.time() - 9 * 86400
    await store.save_response(ResponseRecord(id="resp_old", agent="clerk", client=None, created=nine_days_ago))
    await store.save_response(ResponseRecord(id="resp_recent", agent="clerk", client=None))
    await AuditLog(store, conversation_days=7).record_chat(agent="clerk", status="ok", latency_ms=1)
    assert await store.get_response("resp_old") is None
    assert await store.get_response("resp_recent") is not None
    await AuditLog(store, conversation_days=None).prune(time.time() + 365 * 86400)
    assert await store.get_response("resp_recent") is not None  # None keeps them forever


async def test_a_failing_store_fails_the_call_closed(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(MemoryStore):
        async def add_audit(self, row: AuditRow) -> None:
            raise OSError("disk full")

    with pytest.raises(AuditUnavailable, match="disk full"):
        await AuditLog(Broken()).record_tool(_tool(), {}, ToolResult(ok=True))
    assert "audit row not written" in caplog.text


async def test_an_empty_redactor_is_kept_and_learns_secrets_later() -> None:
    # A redactor without secrets is falsy: the audit log must keep the very object it was given.
    redactor = Redactor()
    store = MemoryStore()
    audit = AuditLog(store, redactor)
    redactor.add("s3cret-value-42")
    await audit.record_tool(_tool(), {"note": "s3cret-value-42"}, ToolResult(ok=True))
    (row,) = await store.list_audit()
    assert row.arguments == {"note": "[REDACTED]"}


@pytest.mark.parametrize("stage_secrets", [[], ["other-secret-1234"], [SECRET]])
async def test_arguments_the_stage_redacted_are_redacted_by_the_log_too(stage_secrets: list[str]) -> None:
    """The audit stage redacts with the generation's redactor and the log skips its own pass only when that one
    knows every secret the log's does: a secret only the log knows is still replaced."""
    from gateway.kernel.calls import Invocation
    from gateway.safety.audit import RecordCall

    tool = _tool()
    audit = AuditLog(MemoryStore(), Redactor([SECRET]))
    stage = RecordCall(audit, Redactor(stage_secrets))
    call_arguments = {"note": f"use {SECRET}"}
    agent_tool = AgentTool(name=tool.name, description="", input_schema={}, tool=tool)
    invocation = Invocation(agent="clerk", agent_tool=agent_tool, tool=tool,
                            call=ToolCall(id="c1", name=tool.name, arguments=call_arguments),
                            arguments=call_arguments, client=None, door="direct")

    async def proceed(_: Invocation) -> ToolResult:
        return ToolResult(ok=True, status=200)

    await stage(invocation, proceed)
    (row,) = await audit.recent()
    assert SECRET not in repr(row["arguments"]) and "[REDACTED]" in row["arguments"]["note"]


async def _call_through_the_audit(store: Store) -> tuple[AuditLog, list[str]]:
    """One call through the audit's two stages (the row before the send, its outcome after)."""
    import functools

    from gateway.kernel.calls import Invocation
    from gateway.safety.audit import RecordCall

    tool = _tool()
    audit = AuditLog(store, Redactor([SECRET]))
    audit._pruned_at = time.time()  # no retention sweep due: the call's writes alone
    record = RecordCall(audit, Redactor([SECRET]))
    agent_tool = AgentTool(name=tool.name, description="", input_schema={}, tool=tool)
    arguments = {"note": f"use {SECRET}"}
    invocation = Invocation(agent="clerk", agent_tool=agent_tool, tool=tool,
                            call=ToolCall(id="c1", name=tool.name, arguments=arguments), arguments=arguments)
    seen: list[str] = []

    async def send(_: Invocation) -> ToolResult:
        seen.extend(row["status"] for row in await audit.recent())  # what is committed when the call leaves
        return ToolResult(ok=True, status=201, bytes=7, duration_ms=3.0)

    await record(invocation, proceed=functools.partial(record.before_send(), proceed=send))
    return audit, seen


class _NoAwaitedWrites(SQLiteStore):
    async def add_audit(self, row: AuditRow) -> None:
        raise AssertionError("a free inline connection writes the row at once")

    async def update_audit(self, row: AuditRow) -> None:
        raise AssertionError("a free inline connection writes the outcome at once")


async def test_a_calls_row_and_outcome_are_written_at_once_when_the_store_can(tmp_path: Path) -> None:
    """With SQLite's inline connection free, neither write is awaited (no coroutine, no queue): the row is committed
    `running` before the call is sent and its outcome before the stage returns."""
    store = _NoAwaitedWrites(tmp_path / "audit.db")
    audit, seen = await _call_through_the_audit(store)
    assert seen == ["running"]
    (row,) = await audit.recent()
    assert (row["status"], row["http_status"], row["bytes"], row["latency_ms"]) == ("ok", 201, 7, 3.0)
    assert SECRET not in repr(row["arguments"]) and row["agent"] == "clerk" and row["api"] == "shop"
    await store.aclose()


async def test_a_store_that_cannot_write_at_once_still_has_the_row_written_first() -> None:
    """Other stores (`Store.add_audit_now` answers False) are awaited: the same rows."""
    audit, seen = await _call_through_the_audit(MemoryStore())
    assert seen == ["running"]
    (row,) = await audit.recent()
    assert (row["status"], row["http_status"], row["bytes"]) == ("ok", 201, 7)


class _RefusingAtOnce(SQLiteStore):
    def add_audit_now(self, row: AuditRow) -> bool:
        raise StoreUnavailable("disk full")


async def test_a_row_refused_at_once_is_not_sent(tmp_path: Path) -> None:
    store = _RefusingAtOnce(tmp_path / "audit.db")
    with pytest.raises(AuditUnavailable, match="did not send it"):
        await _call_through_the_audit(store)
    assert await store.list_audit() == []
    await store.aclose()


async def test_the_row_before_the_send_hands_back_the_sends_own_awaitable(tmp_path: Path) -> None:
    """Written at once, the stage before the send keeps no frame waiting through the call: what it answers is the
    rest of the pipeline's own awaitable (with the row committed `running` before it)."""
    from gateway.kernel.calls import Invocation
    from gateway.safety.audit import RecordCall

    store = SQLiteStore(tmp_path / "audit.db")
    audit = AuditLog(store)
    audit._pruned_at = time.time()
    stage = RecordCall(audit).before_send()
    tool = _tool()
    invocation = Invocation(agent="clerk", agent_tool=AgentTool(name=tool.name, description="", input_schema={},
                                                                tool=tool),
                            tool=tool, call=ToolCall(id="c1", name=tool.name, arguments={}), arguments={})
    result = ToolResult(ok=True, status=200)

    async def send() -> ToolResult:
        return result

    pending = send()
    assert stage(invocation, proceed=lambda _: pending) is pending
    assert [row.status for row in await store.list_audit()] == ["running"]
    assert await pending is result
    await store.aclose()


@pytest.mark.parametrize("inline", [True, False])
async def test_a_call_handed_on_to_be_sent_says_so_itself(tmp_path: Path, inline: bool) -> None:
    """The direct door reads whether its call was sent from the call itself (`Invocation.sent`, for a cut's answer:
    `stopping.sent_in`), not from a count in a context variable: set once the row before sending is written, whichever
    way the store writes it; a call whose row was refused was not sent."""
    from gateway.kernel.calls import Invocation
    from gateway.safety.audit import RecordCall
    from gateway.server.stopping import SENDS_KEY, sent_in

    tool = _tool()

    def invocation() -> Invocation:
        return Invocation(agent="clerk", agent_tool=AgentTool(name=tool.name, description="", input_schema={},
                                                              tool=tool),
                          tool=tool, call=ToolCall(id="c1", name=tool.name, arguments={}), arguments={})

    store: Store = SQLiteStore(tmp_path / "audit.db") if inline else MemoryStore()
    record = RecordCall(AuditLog(store))
    call = invocation()
    seen: list[str] = []

    async def send(sent: Invocation) -> ToolResult:
        seen.append(sent_in({SENDS_KEY: sent}))  # what a cut would tell the caller while the call is out
        return ToolResult(ok=True, status=200)

    assert sent_in({SENDS_KEY: call}) == "not sent"
    await record(call, proceed=functools.partial(record.before_send(), proceed=send))
    assert seen == ["sent"] and call.sent and sent_in({SENDS_KEY: call}) == "sent"

    refusing = _RefusingAtOnce(tmp_path / "refusing.db")
    refused = invocation()
    record = RecordCall(AuditLog(refusing))
    with pytest.raises(AuditUnavailable):
        await record(refused, proceed=functools.partial(record.before_send(), proceed=send))
    assert not refused.sent and sent_in({SENDS_KEY: refused}) == "not sent" and seen == ["sent"]
    await refusing.aclose()
    if isinstance(store, SQLiteStore):
        await store.aclose()
