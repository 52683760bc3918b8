"""The run_code tool: what its description documents, within the tool budget, and what each mode offers."""

from __future__ import annotations

from gateway.catalog import AgentTool, Tool
from gateway.codemode import RUN_CODE, FunctionNames, Limits, run_code_tool
from gateway.config.model import AgentConfig
from gateway.offer.toolsearch import ToolOffer
from gateway.offer.views import definition_tokens
from gateway.toolsets import Toolset


def _tools(count: int) -> list[AgentTool]:
    tools = []
    for i in range(count):
        schema = {"type": "object", "required": ["owner"], "properties": {
            "owner": {"type": "string", "description": "Who owns it."}, "page": {"type": "integer"},
            "state": {"type": "string", "enum": ["open", "closed"]}}}
        output = {"type": "array", "items": {"type": "object", "properties": {
            "id": {"type": "integer"}, "title": {"type": "string"}, "labels": {"type": "array", "items": {
                "type": "object", "properties": {"name": {"type": "string"}}}}}}}
        name = f"list-things-{i}"
        tool = Tool(name=name, api="shop", operation_id=name, method="GET", path=f"/t{i}",
                    description=f"List things of kind {i}.", input_schema=schema)
        tools.append(AgentTool(name=name, description=f"List things of kind {i}.", input_schema=schema,
                               output_schema=output, tool=tool))
    return tools


def _run_code(tools: list[AgentTool], budget: int, searching: bool = False) -> AgentTool:
    return run_code_tool(tools, FunctionNames(t.name for t in tools), total=len(tools), limits=Limits(),
                         budget=budget, searching=searching)


def test_every_function_with_nested_types_when_the_budget_allows() -> None:
    tool = _run_code(_tools(3), 4000)
    assert tool.name == RUN_CODE and tool.input_schema["required"] == ["code"]
    assert ('def list_things_1(*, owner: str, page: int = None, state: Literal["open", "closed"] = None) '
            "-> list[{id?: int, title?: str, labels?: list[{name?: str}]}]") in tool.description
    assert "# List things of kind 2." in tool.description and "more function" not in tool.description
    assert "30s of execution, 256 MB, 50 tool calls" in tool.description


def test_a_small_budget_gets_shorter_signatures_then_fewer_functions() -> None:
    tools = _tools(40)
    assert definition_tokens(_run_code(tools[:6], 4000)) > 700
    shorter = _run_code(tools[:6], 700)
    assert definition_tokens(shorter) <= 700 and "def list_things_5(*, owner: str" in shorter.description
    assert "def list_things_5(" in shorter.description and "{name?: str}" not in shorter.description
    fewer = _run_code(tools, 700, searching=True)
    assert definition_tokens(fewer) <= 700
    assert "def list_things_0(" in fewer.description and "def list_things_39(" not in fewer.description
    listed = fewer.description.count("def list_things_")
    assert f"... and {40 - listed} more function(s), one per tool of this agent: search_tools finds them" in \
        fewer.description


def _agent(mode: str, **fields: object) -> AgentConfig:
    return AgentConfig(name="a", model="p/m", code_mode=mode, **fields)


def test_each_mode_offers_its_tools() -> None:
    tools = _tools(3)
    toolset = Toolset(agent="a", tools={t.name: t for t in tools})
    assert [t.name for t in ToolOffer(_agent("off"), toolset).views()] == [t.name for t in tools]
    assert [t.name for t in ToolOffer(_agent("on"), toolset).views()] == [*(t.name for t in tools), RUN_CODE]
    only = ToolOffer(_agent("only"), toolset)
    assert [t.name for t in only.views()] == [RUN_CODE, "search_tools", "describe_tool"]
    assert only.load(tools[0].name) is not None and only.loaded == []


def test_a_large_agent_documents_its_pinned_tools_and_search_shows_the_rest() -> None:
    tools = _tools(80)
    toolset = Toolset(agent="a", tools={t.name: t for t in tools})
    offer = ToolOffer(_agent("on", pinned=["list-things-7"]), toolset)
    assert [t.name for t in offer.views()] == ["list-things-7", "search_tools", "describe_tool", RUN_CODE]
    assert offer.code is not None
    assert "def list_things_7(" in offer.code.description and "def list_things_8(" not in offer.code.description
    assert "... and 79 more function(s)" in offer.code.description
    ok, body = offer.answer("search_tools", {"query": "things of kind 12", "limit": 3})
    assert ok and all(item["signature"].startswith(f"def {item['function']}(*, owner: str") for item in body["tools"])
