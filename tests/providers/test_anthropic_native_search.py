"""Anthropic native tool search on the wire: what the adapter sends is what the official SDK's types describe.

The SDK's request types are TypedDicts; pydantic validates them at run time (unknown keys refused), so the
deferred tools, the search server tool and the echoed server blocks are judged by Anthropic's own definitions.
"""

from __future__ import annotations

from typing import Any

import pydantic
import pytest
from anthropic.types import ContentBlockParam, ToolUnionParam
from loop_support import StandInInvoke, adapter_for, agent_config, agent_tool, toolset
from scripted_llm import Call, Reply, ScriptedLLM, ToolSearch

from gateway.errors import ProviderError
from gateway.loop import run
from gateway.messages import Message
from gateway.offer.toolsearch import ToolOffer
from gateway.providers.anthropic import MAX_DEFERRED_TOOLS
from gateway.providers.deferred import SERVER_SEARCH, deferred

pytestmark = pytest.mark.anyio

STRICT = pydantic.ConfigDict(extra="forbid")
TOOL = pydantic.TypeAdapter(ToolUnionParam, config=STRICT)
BLOCK = pydantic.TypeAdapter(ContentBlockParam, config=STRICT)


def _agent() -> Any:
    config = agent_config("anthropic")
    config.tool_search = "native"
    config.pinned = ["list_order"]
    return config


def _tools() -> Any:
    return toolset(*(agent_tool(f"list_{thing}") for thing in ("order", "refund", "invoice")))


@pytest.mark.parametrize("stream", [False, True])
async def test_every_tool_sent_and_every_block_echoed_is_a_valid_sdk_param(llm: ScriptedLLM, stream: bool) -> None:
    llm.script(Reply(text="Let me look.", tool_search=ToolSearch("refunds", found=["list_refund"]),
                     calls=[Call("list_refund", {"city": "Oslo"})]), Reply(text="done"))
    await run(_agent(), [Message(role="user", content="refunds?")], adapter=adapter_for("anthropic", llm.url),
              toolset=_tools(), invoke=StandInInvoke(), stream=stream)
    first, second = llm.bodies()
    for tool in first["tools"]:
        TOOL.validate_python(tool)
    assert [(t["name"], t.get("defer_loading", False)) for t in first["tools"]] == [
        ("list_order", False), ("list_refund", True), ("list_invoice", True), ("tool_search_tool_bm25", False)]
    for message in second["messages"]:
        for block in message["content"]:
            BLOCK.validate_python(block)
    assistant = second["messages"][1]["content"]
    assert [b["type"] for b in assistant] == ["text", "server_tool_use", "tool_search_tool_result", "tool_use"]


async def test_a_search_error_is_passed_back_for_the_model_to_handle(llm: ScriptedLLM) -> None:
    llm.script(Reply(tool_search=ToolSearch("refunds", error="unavailable"), finish="end_turn",
                     text="Search is down."))
    result = await run(_agent(), [Message(role="user", content="refunds?")],
                       adapter=adapter_for("anthropic", llm.url), toolset=_tools(), invoke=StandInInvoke())
    assert result.message.content == "Search is down." and result.steps == []
    blocks = result.messages[-1].extras["anthropic_blocks"]
    assert blocks[-1]["content"] == {"type": "tool_search_tool_result_error", "error_code": "unavailable"}


async def test_more_deferred_tools_than_anthropic_takes_is_a_clear_error(llm: ScriptedLLM) -> None:
    adapter = adapter_for("anthropic", llm.url)
    view = ToolOffer(_agent(), _tools()).views()[0]
    many = [deferred(type(view)(name=f"t{i}", description="", input_schema={"type": "object"}, output_schema=None,
                                source=None)) for i in range(MAX_DEFERRED_TOOLS + 1)]
    with pytest.raises(ProviderError, match=f"{MAX_DEFERRED_TOOLS + 1} tools to defer.*at most {MAX_DEFERRED_TOOLS}"):
        await adapter.complete("model-x", [Message(role="user", content="hi")], [*many, SERVER_SEARCH])
    assert llm.requests == []  # refused before anything was sent
