"""Code mode in the loop: run_code beside the tools (on) or alone with the search tools (only); a script's tool
calls are the run's calls, and a call under approval pauses the run until a human decides."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from loop_support import KINDS, StandInInvoke, adapter_for, agent_config, agent_tool, toolset
from scripted_llm import Call, Reply, ScriptedLLM

from gateway.loop import resume, run
from gateway.loop_types import Decision
from gateway.messages import Message, ToolCall, ToolResult

pytestmark = pytest.mark.anyio

SCRIPT = """
items = listItems()
cheap = [i for i in items if i["price"] < 10]
item = getItem(id=cheap[0]["id"])
restock(id=item["id"], amount=5)["stock"] if item["stock"] == 0 else "in stock"
"""


def _tools() -> Any:
    return toolset(agent_tool("listItems", properties={}),
                   agent_tool("getItem", properties={"id": {"type": "integer"}}),
                   agent_tool("restock", method="POST", approval="writes",
                              properties={"id": {"type": "integer"}, "amount": {"type": "integer"}}))


def _answer(tool: Any, call: ToolCall) -> ToolResult:
    args = call.arguments or {}
    body = {"listItems": [{"id": 1, "price": 50}, {"id": 2, "price": 5}],
            "getItem": {"id": args.get("id"), "stock": 0},
            "restock": {"id": args.get("id"), "stock": args.get("amount")}}[tool.name]
    return ToolResult(ok=True, status=200, media_type="application/json", body=body)


def _agent(kind: str = "openai", mode: str = "on") -> Any:
    agent = agent_config(kind)
    agent.code_mode = mode
    return agent


async def _start(llm: ScriptedLLM, invoke: StandInInvoke, kind: str = "openai", mode: str = "on") -> Any:
    return await run(_agent(kind, mode), [Message(role="user", content="restock the cheap item")],
                     adapter=adapter_for(kind, llm.url), toolset=_tools(), invoke=invoke)


async def _resume(llm: ScriptedLLM, state: dict, decisions: dict, invoke: StandInInvoke, kind: str = "openai",
                  mode: str = "on") -> Any:
    # A fresh adapter and a JSON round trip of the state: what a restarted gateway has.
    return await resume(json.loads(json.dumps(state)), decisions, agent=_agent(kind, mode),
                        adapter=adapter_for(kind, llm.url), toolset=_tools(), invoke=invoke)


def _offered(body: dict) -> list[str]:
    return [t.get("function", t).get("name") for t in body["tools"]]


@pytest.mark.parametrize("kind", KINDS)
async def test_reads_run_once_the_write_pauses_and_the_approval_resumes_the_script(llm: ScriptedLLM,
                                                                                     kind: str) -> None:
    llm.script(Reply(calls=[Call("run_code", {"code": SCRIPT})]), Reply(text="Restocked item 2."))
    invoke = StandInInvoke(_answer)
    paused = await _start(llm, invoke, kind)
    assert invoke.calls == [("listItems", {}), ("getItem", {"id": 2})]
    [pending] = paused.pending_approvals
    assert (pending.tool, pending.arguments) == ("restock", {"id": 2, "amount": 5})
    [shown] = paused.steps  # the paused answer shows the script with the calls it made
    assert shown.tool == "run_code" and shown.error_type == "approval_pending"
    assert [s.tool for s in shown.steps] == ["listItems", "getItem"]

    invoke = StandInInvoke(_answer)  # a restarted gateway: nothing of the first run is left but its state
    result = await _resume(llm, paused.state, {pending.id: "approve"}, invoke, kind)
    assert invoke.calls == [("restock", {"id": 2, "amount": 5})]  # only the write, once
    assert result.message.content == "Restocked item 2." and not result.paused
    [step] = result.steps
    assert step.tool == "run_code" and step.ok
    assert [s.tool for s in step.steps] == ["listItems", "getItem", "restock"]
    assert "run_code" in json.dumps(llm.requests[1].body) and len(llm.requests) == 2
    assert result.messages[-2].role == "tool" and result.messages[-2].content == "5"  # the result reached the model


async def test_run_code_is_offered_beside_the_tools_with_their_signatures(llm: ScriptedLLM) -> None:
    llm.script(Reply(text="Nothing to do."))
    await _start(llm, StandInInvoke(_answer))
    body = llm.requests[0].body
    assert _offered(body) == ["listItems", "getItem", "restock", "run_code"]
    description = body["tools"][-1]["function"]["description"]
    assert "def restock(*, id: int = None, amount: int = None) -> Any" in description
    assert body["tools"][-1]["function"]["parameters"]["required"] == ["code"]


async def test_code_mode_only_offers_run_code_and_search_and_refuses_direct_calls(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("search_tools", {"query": "restock an item"}), Call("restock", {"id": 1})]),
               Reply(text="done"))
    invoke = StandInInvoke(_answer)
    result = await _start(llm, invoke, mode="only")
    assert _offered(llm.requests[0].body) == ["run_code", "search_tools", "describe_tool"]
    assert _offered(llm.requests[1].body) == ["run_code", "search_tools", "describe_tool"]  # nothing loaded
    assert invoke.calls == [] and not result.paused  # the write was refused, not queued for a human
    search, refused = [m for m in result.messages if m.role == "tool"]
    found = json.loads(search.content)["tools"]
    assert found[0]["name"] == "restock" and found[0]["signature"].startswith("def restock(*, id: int = None")
    assert "call it as a function in a run_code script" in refused.content


async def test_a_denial_raises_in_the_script_and_the_model_reads_it(llm: ScriptedLLM) -> None:
    code = "try:\n    restock(id=2, amount=1)\n    r = 'ok'\nexcept RuntimeError as e:\n    r = str(e)\nr"
    llm.script(Reply(calls=[Call("run_code", {"code": code})]), Reply(text="It was refused."))
    paused = await _start(llm, StandInInvoke(_answer))
    invoke = StandInInvoke(_answer)
    decision = Decision(approve=False, reason="stock is frozen")
    result = await _resume(llm, paused.state, {paused.pending_approvals[0].id: decision}, invoke)
    assert invoke.calls == []
    assert "restock was refused by a human: stock is frozen" in result.messages[-2].content


async def test_the_other_calls_of_a_paused_batch_run_once(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("getItem", {"id": 7}), Call("run_code", {"code": "restock(id=1, amount=2)"})]),
               Reply(text="done"))
    paused = await _start(llm, StandInInvoke(_answer))
    assert [s.tool for s in paused.steps] == ["getItem", "run_code"]
    invoke = StandInInvoke(_answer)
    result = await _resume(llm, paused.state, {paused.pending_approvals[0].id: "approve"}, invoke)
    assert invoke.calls == [("restock", {"id": 1, "amount": 2})]
    assert [s.tool for s in result.steps] == ["getItem", "run_code"] and all(s.ok for s in result.steps)
    tool_messages = [m for m in llm.requests[1].body["messages"] if m["role"] == "tool"]
    assert [json.loads(m["content"]) for m in tool_messages] == [{"id": 7, "stock": 0}, {"id": 1, "stock": 2}]


async def test_a_script_that_writes_twice_pauses_twice(llm: ScriptedLLM) -> None:
    code = "a = restock(id=1, amount=1)\nb = restock(id=2, amount=2)\n[a['stock'], b['stock']]"
    llm.script(Reply(calls=[Call("run_code", {"code": code})]), Reply(text="done"))
    first = await _start(llm, StandInInvoke(_answer))
    invoke = StandInInvoke(_answer)
    second = await _resume(llm, first.state, {first.pending_approvals[0].id: "approve"}, invoke)
    assert second.paused and invoke.calls == [("restock", {"id": 1, "amount": 1})]
    assert second.pending_approvals[0].arguments == {"id": 2, "amount": 2}
    done = await _resume(llm, second.state, {second.pending_approvals[0].id: "approve"}, invoke)
    assert invoke.calls == [("restock", {"id": 1, "amount": 1}), ("restock", {"id": 2, "amount": 2})]
    assert done.messages[-2].content == "[1, 2]"


async def test_script_calls_count_against_the_runs_tool_call_cap(llm: ScriptedLLM) -> None:
    llm.script(Reply(calls=[Call("run_code", {"code": "[getItem(id=i)['id'] for i in range(5)]"})]),
               Reply(text="done"))
    agent = _agent()
    agent.policy.max_tool_calls = 3
    invoke = StandInInvoke(_answer)
    result = await run(agent, [Message(role="user", content="x")], adapter=adapter_for("openai", llm.url),
                       toolset=_tools(), invoke=invoke)
    assert len(invoke.calls) == 2  # the script is one of the run's three calls, as a delegation is
    [answer] = [m for m in result.messages if m.role == "tool"]
    assert "reached its cap of 3 tool calls" in answer.content
    assert result.cut  # and the run then ends with a summary, as at the cap without code mode


RAISING_LAST_LINES = {  # the script's last line raises: the traceback quotes it, and the error's marks, as written
    "alone": ("items = listItems()\nitems[5]['price']", "  line 2, in <module>\n    items[5]['price']\n    ~~~~~~~~\n"),
    "after a semicolon": ("x = 2; getItem(id=x)['price']",
                          "  line 1, in <module>\n    x = 2; getItem(id=x)['price']\n           " + "~" * 22 + "\n"),
    "in a lambda": ("(lambda: 1 / 0)()", "  line 1, in <module>\n    (lambda: 1 / 0)()\n    ~~~~~~~~~~~~~~~~~\n"
                    "  line 1, in <lambda>\n    (lambda: 1 / 0)()\n             ~~~~~\n"),
}


@pytest.mark.parametrize("code, quoted", RAISING_LAST_LINES.values(), ids=list(RAISING_LAST_LINES))
async def test_the_model_reads_its_last_line_as_it_wrote_it_when_that_line_raises(llm: ScriptedLLM, code: str,
                                                                                  quoted: str) -> None:
    llm.script(Reply(calls=[Call("run_code", {"code": code})]), Reply(text="It failed."))
    await run(_agent(), [Message(role="user", content="x")], adapter=adapter_for("openai", llm.url),
              toolset=_tools(), invoke=StandInInvoke(_answer))
    [read] = [json.loads(m["content"]) for m in llm.requests[-1].body["messages"] if m["role"] == "tool"]
    assert read["error_type"] == "code_error"
    assert quoted in read["error"]
    assert "__gateway" not in read["error"]


async def test_scripts_waiting_their_turn_leave_the_places_to_the_turns_other_calls(llm: ScriptedLLM) -> None:
    """Two places (`max_parallel_calls: 2`), two scripts and a plain call in one turn: the turn's scripts run one at a
    time, and the second, waiting for the first, holds no place, so the plain call runs beside the first. The first
    script's call waits for the plain call to come (at most 30 s: a hang guard, not a measure); before, the waiting
    script held the second place and the plain call came only once the first script had ended."""
    llm.script(Reply(calls=[Call("run_code", {"code": "listItems()"}), Call("run_code", {"code": "listItems()"}),
                            Call("getItem", {"id": 7})]), Reply(text="done"))
    plain_came = anyio.Event()
    seen_by_script: list[bool] = []

    async def invoke(tool: Any, call: ToolCall) -> ToolResult:
        if tool.name == "getItem":
            plain_came.set()
        elif not seen_by_script:  # the first script's call
            with anyio.move_on_after(30):
                await plain_came.wait()
            seen_by_script.append(plain_came.is_set())
        return _answer(tool, call)

    agent = _agent()
    agent.policy.max_parallel_calls = 2
    result = await run(agent, [Message(role="user", content="x")], adapter=adapter_for("openai", llm.url),
                       toolset=_tools(), invoke=invoke)
    assert seen_by_script == [True]  # before: [False], the plain call had no place while the first script ran
    assert [s.tool for s in result.steps] == ["run_code", "run_code", "getItem"] and all(s.ok for s in result.steps)
