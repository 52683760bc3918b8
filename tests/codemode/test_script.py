"""One run_code call: the script's tool calls go to the door's host, approvals pause it, limits end it."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from gateway.catalog import AgentTool, Tool
from gateway.codemode import FunctionNames, Limits, Paused, Script
from gateway.loop_types import Decision
from gateway.messages import ToolCall, ToolResult

pytestmark = pytest.mark.anyio


def _tool(name: str, method: str = "GET", approval: str = "never", properties: dict | None = None,
          required: tuple[str, ...] = ()) -> AgentTool:
    schema = {"type": "object", "properties": properties or {"id": {"type": "integer"}}, "required": list(required)}
    tool = Tool(name=name, api="shop", operation_id=name, method=method, path=f"/{name}", description=name,
                input_schema=schema)
    return AgentTool(name=name, description=name, input_schema=schema, tool=tool, approval=approval)  # type: ignore[arg-type]


class Host:
    """The door's seam, answering from `answers` (a tool name -> a function of the arguments)."""

    def __init__(self, *tools: AgentTool, answers: dict[str, Any] | None = None) -> None:
        self.tools = {t.name: t for t in tools}
        self.answers = answers or {}
        self.calls: list[tuple[str, dict[str, Any], str | None]] = []

    def tool(self, name: str) -> AgentTool | None:
        return self.tools.get(name)

    async def needs_pause(self, tool: AgentTool, call: ToolCall) -> bool:
        return tool.needs_approval

    async def call(self, tool: AgentTool, call: ToolCall, approval: str | None) -> ToolResult:
        self.calls.append((tool.name, dict(call.arguments or {}), approval))
        answer = self.answers.get(tool.name)
        if isinstance(answer, ToolResult):
            return answer
        body = answer(call.arguments) if answer else {"tool": tool.name, "args": call.arguments}
        return ToolResult(ok=True, status=200, media_type="application/json", body=body)


def _script(host: Host, limits: Limits | None = None, max_result_bytes: int = 64_000) -> Script:
    return Script("call_1", FunctionNames(host.tools), host, limits or Limits(), max_result_bytes)


SHOP = dict(answers={"listItems": lambda a: [{"id": 1, "price": 5}, {"id": 2, "price": 50}],
                     "getItem": lambda a: {"id": a["id"], "stock": 0 if a["id"] == 2 else 3},
                     "restock": lambda a: {"id": a["id"], "stock": a["amount"]}})


def _shop() -> Host:
    return Host(_tool("listItems"), _tool("getItem", required=("id",)),
                _tool("restock", "POST", "writes", {"id": {"type": "integer"}, "amount": {"type": "integer"}}),
                **SHOP)


READ_READ_WRITE = """
items = listItems()
dear = [i for i in items if i["price"] > 10]
item = getItem(id=dear[0]["id"])
done = restock(id=item["id"], amount=5) if item["stock"] == 0 else None
{"restocked": done, "looked_at": len(items)}
"""


async def test_reads_run_once_the_write_pauses_and_resumes_from_the_snapshot() -> None:
    host = _shop()
    paused = await _script(host).run({"code": READ_READ_WRITE})
    assert isinstance(paused, Paused)
    assert host.calls == [("listItems", {}, None), ("getItem", {"id": 2}, None)]
    assert (paused.tool, paused.arguments, paused.call_id) == ("restock", {"id": 2, "amount": 5}, "call_1.3")
    state = json.loads(json.dumps(paused.state))  # kept as JSON with the run: what a restarted gateway reads

    host = _shop()  # a fresh host and sandbox: nothing of the first process is left
    result = await _script(host).resume(state, Decision(approve=True), "apr_1")
    assert host.calls == [("restock", {"id": 2, "amount": 5}, "apr_1")]  # the reads are not made again
    assert result.ok and result.body == {"restocked": {"id": 2, "stock": 5}, "looked_at": 2}


async def test_edited_arguments_run_and_a_denial_raises_in_the_script() -> None:
    paused = await _script(_shop()).run({"code": READ_READ_WRITE})
    assert isinstance(paused, Paused)
    host = _shop()
    edited = await _script(host).resume(paused.state, Decision(approve=True, arguments={"id": 2, "amount": 1}),
                                        "apr_1")
    assert host.calls == [("restock", {"id": 2, "amount": 1}, "apr_1")] and edited.body["restocked"]["stock"] == 1

    code = "try:\n    restock(id=1, amount=2)\n    r = 'done'\nexcept RuntimeError as e:\n    r = str(e)\nr"
    paused = await _script(_shop()).run({"code": code})
    assert isinstance(paused, Paused)
    host = _shop()
    denied = await _script(host).resume(paused.state, Decision(approve=False, reason="not today"), "apr_2")
    assert host.calls == [] and denied.ok
    assert denied.body == "restock was refused by a human: not today. Nothing was sent."


async def test_a_failed_call_raises_runtime_error_the_script_can_catch() -> None:
    failure = ToolResult.failure("upstream_error", "Not Found", status=404, body={"message": "no item 9"})
    host = Host(_tool("getItem"), answers={"getItem": failure})
    code = "try:\n    getItem(id=9)\nexcept RuntimeError as e:\n    caught = str(e)\ncaught"
    result = await _script(host).run({"code": code})
    assert result.ok
    assert result.body.startswith("getItem failed (upstream_error, HTTP 404): Not Found\nanswer: ")
    assert "no item 9" in result.body
    uncaught = await _script(host).run({"code": "getItem(id=9)"})
    assert not uncaught.ok and uncaught.error_type == "code_error"
    assert "RuntimeError: getItem failed (upstream_error, HTTP 404)" in uncaught.error
    assert "(1 tool call(s) ran before)" in uncaught.error


@pytest.mark.parametrize("code, says", [
    ("open('/etc/passwd').read()", "PermissionError"),
    ("import os\nos.listdir('/')", "PermissionError"),
    ("import os\nos.getenv('HOME')", "not supported"),
    ("import subprocess\nsubprocess.run(['id'])", "ModuleNotFoundError: No module named 'subprocess'"),
    ("import socket\nsocket.create_connection(('127.0.0.1', 80))", "No module named 'socket'"),
    ("from pathlib import Path\nPath('/etc/hostname').read_text()", "PermissionError"),
])
async def test_files_environment_and_os_modules_are_a_code_error(code: str, says: str) -> None:
    result = await _script(Host()).run({"code": code})
    assert not result.ok and result.error_type == "code_error"
    assert says in result.error and "no files, network, environment" in result.error


async def test_an_endless_loop_and_too_much_memory_end_at_their_limits() -> None:
    limits = Limits(time=0.3, memory=8 * 1024 * 1024)
    looping = await _script(Host(), limits).run({"code": "while True:\n    pass"})
    assert not looping.ok and looping.error_type == "code_limit" and "code_limits.time" in looping.error
    growing = await _script(Host(), limits).run({"code": "x = []\nwhile True:\n    x.append('a' * 100000)"})
    assert not growing.ok and growing.error_type == "code_limit" and "code_limits.memory" in growing.error


async def test_the_tool_call_limit_stops_the_script_before_the_call_past_it() -> None:
    host = Host(_tool("getItem"))
    result = await _script(host, Limits(tool_calls=3)).run({"code": "for i in range(10):\n    getItem(id=i)"})
    assert not result.ok and result.error_type == "code_limit" and "code_limits.tool_calls" in result.error
    assert [args["id"] for _, args, _ in host.calls] == [0, 1, 2]


async def test_what_is_not_a_tool_or_not_a_keyword_call_raises_in_the_script() -> None:
    host = Host(_tool("getItem"))
    unknown = await _script(host).run({"code": "deleteEverything()"})
    assert not unknown.ok and "NameError: name 'deleteEverything' is not defined" in unknown.error
    positional = await _script(host).run({"code": "getItem(3)"})
    assert not positional.ok and "TypeError: getItem() takes keyword arguments only" in positional.error
    as_value = await _script(host).run({"code": "f = getItem\nf(id=1)"})
    assert not as_value.ok and "called directly by its name" in as_value.error
    assert host.calls == []


async def test_the_result_is_json_cut_to_the_limit_with_what_was_printed() -> None:
    host = Host(_tool("getItem"))
    result = await _script(host).run({"code": "print('checking')\n{'s': {2, 1}, 't': (1, 2), 'n': None}"})
    assert result.ok and result.body == {"result": {"s": [1, 2], "t": [1, 2], "n": None}, "printed": "checking\n"}
    big = await _script(host, max_result_bytes=2000).run({"code": "[{'id': i, 'name': 'x' * 50} for i in range(500)]"})
    assert big.ok and big.truncated and len(json.dumps(big.body)) < 2500
    assert big.body[-1].startswith("[… truncated:")


async def test_none_for_an_optional_argument_means_not_given() -> None:
    tool = _tool("listItems", properties={"q": {"type": "string"}, "tag": {"type": ["string", "null"]}})
    host = Host(tool)
    await _script(host).run({"code": "listItems(q=None, tag=None)"})
    assert host.calls == [("listItems", {"tag": None}, None)]


@pytest.mark.parametrize("arguments", [None, {}, {"code": ""}, {"code": 3}])
async def test_a_missing_script_is_invalid_arguments(arguments: Any) -> None:
    result = await _script(Host()).run(arguments)
    assert not result.ok and result.error_type == "invalid_arguments" and "`code`" in result.error


async def test_a_syntax_error_says_where() -> None:
    result = await _script(Host()).run({"code": "x = 1\ndef (:"})
    assert not result.ok and result.error_type == "code_error" and "line 2" in result.error


async def test_a_kept_script_that_cannot_be_restored_is_a_code_error() -> None:
    paused = await _script(_shop()).run({"code": READ_READ_WRITE})
    assert isinstance(paused, Paused)
    spoiled = {**paused.state, "snapshot": base64.b64encode(b"not a dump of monty's").decode()}
    host = _shop()
    result = await _script(host).resume(spoiled, Decision(approve=True), "apr_1")
    assert not result.ok and result.error_type == "code_error" and host.calls == []


async def test_a_scripts_values_are_made_json_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """redteam44: a script's value is as large as its heap allows, and making it JSON (then measuring it) ran on the
    event loop: a script returning 2,000,000 numbers held every other request of the process for 2.5 s (the longest
    wait between two /healthz answers; 0.4 s now, load 10). Both the result and a tool call's arguments are made
    JSON in the sandbox's threads. (A spy around the real `jsonable` says where each value was made.)"""
    import asyncio

    from gateway.codemode import script as script_module

    where: list[str] = []
    real = script_module.jsonable

    def spy(value: Any, depth: int = 0) -> Any:
        if depth == 0:
            try:
                asyncio.get_running_loop()
                where.append("event loop")
            except RuntimeError:
                where.append("thread")
        return real(value, depth)

    monkeypatch.setattr(script_module, "jsonable", spy)
    result = await _script(_shop()).run({"code": "item = getItem(id=1)\n[item['id'], (2, 3)]"})
    assert result.ok and result.body == [1, [2, 3]]
    assert where and set(where) == {"thread"}, where


async def test_a_result_past_the_cap_crosses_into_the_gateway_as_its_beginning_only() -> None:
    """redteam44's left item: a script's result crossed into the gateway whole, as large as its heap (16 scripts at
    once), where an api's answer is read only up to its cap (`hard_cap(max_result_bytes)`, 4 MiB here). It is kept
    in the sandbox and measured there: 40 MB of text now brings over about the cap's worth, and the model reads it
    as an answer past the cap reads ("at least N of at least M bytes left out"). Measured in the gateway's own
    memory (tracemalloc), not in time."""
    import tracemalloc

    host = Host(_tool("getItem"))
    tracemalloc.start()
    try:
        big = await _script(host).run({"code": "text = 'y' * 40_000_000\ntext"})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20_000_000, peak  # the 40 MB result never came over (about the 4 MiB cap did)
    assert big.ok and big.truncated, big.error
    assert isinstance(big.body, str) and len(big.body.encode()) <= 64_000
    assert big.body.startswith("yyyy") and big.body.endswith("of 40000000 bytes left out]")
    numbers = await _script(host).run({"code": "list(range(2_000_000))"})  # its JSON text's beginning
    assert numbers.ok and numbers.truncated and numbers.body.startswith("[0, 1, 2, ")
    assert numbers.body.endswith("of 16888890 bytes left out]")
    walked = await _script(host).run({"code": "[{'x' * 100 + str(i)} for i in range(60_000)]"})  # sets: walked
    assert walked.ok and walked.truncated and walked.body.startswith('[["xxxx'), walked.error
    assert "of at least " in walked.body


async def test_a_result_within_the_cap_comes_over_whole_and_is_cut_as_any_tool_result() -> None:
    host = Host(_tool("getItem"))
    small = await _script(host).run({"code": "x = 1; {'n': x + 1, 's': {3, 2}}"})
    assert small.ok and small.body == {"n": 2, "s": [2, 3]} and not small.truncated
    rows = await _script(host, max_result_bytes=2000).run({"code": "[{'id': i} for i in range(5000)]"})
    assert rows.ok and rows.truncated and rows.body[-1].startswith("[… truncated:")
    statement = await _script(host).run({"code": "x = 1"})  # no last expression: no result, as before
    assert statement.ok and statement.body is None
