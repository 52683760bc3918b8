"""OpenAI Responses native tool search on the wire, judged by the official SDK's request types.

The SDK's request types are TypedDicts; pydantic validates them at run time (unknown keys refused), so the
deferred functions, the `tool_search` tool and the echoed search items are judged by OpenAI's own definitions.
"""

from __future__ import annotations

from typing import Any

import pydantic
import pytest
from loop_support import StandInInvoke, adapter_for, agent_config, agent_tool, toolset
from openai.types.responses import ResponseInputItemParam, ToolParam
from scripted_llm import Call, Reply, ScriptedLLM, ToolSearch

from gateway.loop import run
from gateway.messages import Message

pytestmark = pytest.mark.anyio

STRICT = pydantic.ConfigDict(extra="forbid")
TOOL = pydantic.TypeAdapter(ToolParam, config=STRICT)
ITEM = pydantic.TypeAdapter(ResponseInputItemParam, config=STRICT)


def _agent() -> Any:
    config = agent_config("openai-responses")
    config.tool_search = "native"
    config.pinned = ["list_order"]
    return config


@pytest.mark.parametrize("stream", [False, True])
async def test_every_tool_sent_and_every_item_echoed_is_a_valid_sdk_param(llm: ScriptedLLM, stream: bool) -> None:
    llm.script(Reply(text="Let me look.", tool_search=ToolSearch("refunds", found=["list_refund"]),
                     calls=[Call("list_refund", {"city": "Oslo"})]), Reply(text="done"))
    tools = toolset(*(agent_tool(f"list_{thing}") for thing in ("order", "refund", "invoice")))
    await run(_agent(), [Message(role="user", content="refunds?")], adapter=adapter_for("openai-responses", llm.url),
              toolset=tools, invoke=StandInInvoke(), stream=stream)
    first, second = llm.bodies()
    for tool in first["tools"]:
        # The SDK's FunctionToolParam marks `strict` required; the API takes it as optional (left out, it tries
        # strict validation where the schema allows), and the adapter sends it only in strict mode.
        TOOL.validate_python({"strict": None, **tool} if tool["type"] == "function" else tool)
    order, space, search = first["tools"]
    assert (order["name"], order.get("defer_loading")) == ("list_order", None)
    assert space["type"] == "namespace" and space["name"] == "test" and "test" in space["description"]
    assert [(f["name"], f["defer_loading"]) for f in space["tools"]] == [("list_refund", True), ("list_invoice", True)]
    assert search == {"type": "tool_search"}
    for item in second["input"]:
        ITEM.validate_python(item)
    assert [i["type"] for i in second["input"]] == ["message", "message", "message", "tool_search_call",
                                                    "tool_search_output", "function_call", "function_call_output"]
