"""Tools the caller brings, on both chat doors: their declarations, `tool_choice`, `parallel_tool_calls`.

A caller's tool is offered to the model beside the agent's own and handed back when called (`gateway.loop`).
A caller tool with an agent tool's name and the same input schema is that tool (a client that uses the agent as
its model and the same gateway's MCP server as its tools declares them again): it is not offered twice, and the
model's call of it runs in the gateway. With a different schema it may not take the name (the model could not
tell them apart, and the gateway would have to guess which one to run): 400; nor may it take one of the gateway's
own tools' names (`search_tools`, `describe_tool`, `call_tool`, `run_code`, offered by tool search and code mode,
whether this agent has them or not). On the Responses door the functions of a `namespace` tool are caller tools
too (handed back with their namespace); a built-in tool (`web_search`, `file_search`, ...) is left out, as the
gateway offers the agent's model none, and listed in `gateway.ignored`. `tool_choice` and `parallel_tool_calls`
reach the provider only for OpenAI's two wire formats; for another provider anything but the default is refused
with a 400 that says so, never dropped. Choices are normalized to the Chat Completions form
(`{"type": "function", "function": {"name"}}`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..assembly import Generation
from ..catalog import AgentTool
from ..codemode.run_code import RUN_CODE
from ..config.model import AgentConfig
from ..loop_types import CallerToolSpec
from ..offer.toolsearch import SEARCH_TOOL
from ..offer.views import DESCRIBE_TOOL
from ..providers.registry import ADAPTERS
from ..toolsets import Toolset
from .api_errors import APIError
from .inert import Ignored
from .mcp.search import CALL_TOOL

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
RESERVED = frozenset({SEARCH_TOOL, DESCRIBE_TOOL, CALL_TOOL, RUN_CODE})
"""The gateway's own tools' names: a caller's tool of that name would be run as the gateway's (or shadow it)."""


@dataclass(slots=True, kw_only=True)
class CallerToolOptions:
    """What a request says about tools: the caller's own, and how the model may call tools."""

    tools: list[CallerToolSpec] = field(default_factory=list)
    tool_choice: Any = None
    """None, "auto", "none", "required", or `{"type": "function", "function": {"name"}}`."""
    parallel_tool_calls: bool | None = None
    ignored: list[Ignored] = field(default_factory=list)
    """Tools left out: built-in tools, and the agent's own tools declared again (they run in the gateway)."""


def parse_chat_tools(body: dict[str, Any]) -> CallerToolOptions:
    """`tools`, `tool_choice`, `parallel_tool_calls` of a Chat Completions request."""
    if body.get("functions") or body.get("function_call") is not None:
        raise APIError(400, "`functions`/`function_call` are the deprecated form: send `tools` and `tool_choice`.",
                       param="functions", code="unsupported_parameter")
    raw = body.get("tools")
    tools = []
    if raw is not None:
        if not isinstance(raw, list):
            raise APIError(400, "`tools` must be an array of {type: function, function: {name, parameters}}.",
                           param="tools")
        for index, item in enumerate(raw):
            where = f"tools[{index}]"
            function = item.get("function") if isinstance(item, dict) else None
            if not isinstance(item, dict) or item.get("type") != "function" or not isinstance(function, dict):
                kind = item.get("type") if isinstance(item, dict) else type(item).__name__
                raise APIError(400, f"`{where}`: only function tools are supported, not {kind!r}.", param=where)
            tools.append(_spec(function, f"{where}.function"))
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        function = choice.get("function")
        if choice.get("type") != "function" or not isinstance(function, dict) or not isinstance(
                function.get("name"), str):
            raise APIError(400, "`tool_choice` must be none, auto, required or {type: function, function: {name}}.",
                           param="tool_choice")
        choice = {"type": "function", "function": {"name": function["name"]}}
    return CallerToolOptions(tools=tools, tool_choice=_choice(choice),
                             parallel_tool_calls=_parallel(body.get("parallel_tool_calls")))


def parse_responses_tools(body: dict[str, Any]) -> CallerToolOptions:
    """`tools`, `tool_choice`, `parallel_tool_calls` of a Responses API request (flat function tools, the
    functions of `namespace` tools; built-in tools left out)."""
    raw = body.get("tools")
    tools: list[CallerToolSpec] = []
    ignored: list[Ignored] = []
    if raw is not None:
        if not isinstance(raw, list):
            raise APIError(400, "`tools` must be an array of {type: function, name, parameters}.", param="tools")
        for index, item in enumerate(raw):
            where = f"tools[{index}]"
            kind = item.get("type") if isinstance(item, dict) else None
            if not isinstance(item, dict) or not isinstance(kind, str) or not kind:
                raise APIError(400, f"`{where}` must be a tool object with a `type`.", param=where)
            if kind == "function":
                tools.append(_spec(item, where))
            elif kind == "namespace":
                tools.extend(_namespace(item, where, ignored))
            else:
                ignored.append(_built_in(kind, where))
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        if choice.get("type") != "function" or not isinstance(choice.get("name"), str):
            raise APIError(400, "`tool_choice` must be none, auto, required or {type: function, name}.",
                           param="tool_choice")
        choice = {"type": "function", "function": {"name": choice["name"]}}
    return CallerToolOptions(tools=tools, tool_choice=_choice(choice),
                             parallel_tool_calls=_parallel(body.get("parallel_tool_calls")), ignored=ignored)


def _namespace(item: dict[str, Any], where: str, ignored: list[Ignored]) -> list[CallerToolSpec]:
    """The function tools of a `namespace` tool, each a caller tool that remembers its namespace."""
    name = item.get("name")
    members = item.get("tools")
    if not isinstance(name, str) or not name or not isinstance(members, list):
        raise APIError(400, f"`{where}`: a namespace tool needs a `name` and a `tools` array.", param=where)
    specs = []
    for index, member in enumerate(members):
        at = f"{where}.tools[{index}]"
        kind = member.get("type") if isinstance(member, dict) else None
        if not isinstance(member, dict) or not isinstance(kind, str):
            raise APIError(400, f"`{at}` must be a tool object with a `type`.", param=at)
        if kind == "function":
            spec = _spec(member, at)
            spec.namespace = name
            specs.append(spec)
        else:
            ignored.append(_built_in(kind, at))
    return specs


def _built_in(kind: str, where: str) -> Ignored:
    return Ignored(where, f"a built-in {kind!r} tool: the gateway offers the agent's model no built-in tools, only "
                          "functions (the agent's own and yours)")


def check_caller_tools(options: CallerToolOptions, agent: AgentConfig, toolset: Toolset,
                       generation: Generation) -> dict[str, Any]:
    """Refuse what the agent can't honour; the provider params to add (`parallel_tool_calls`)."""
    own = set(toolset.names)
    seen: set[str] = set()
    kept: list[CallerToolSpec] = []
    for index, tool in enumerate(options.tools):
        if tool.name in RESERVED:
            raise APIError(400, f"Your tool {tool.name!r} has the name of one of the gateway's own tools "
                                f"({', '.join(sorted(RESERVED))}): rename yours.",
                           param=f"tools[{index}]", code="tool_name_taken")
        agent_tool = toolset.get(tool.name)
        if agent_tool is not None:
            if not same_tool(tool, agent_tool):
                raise APIError(400, f"Your tool {tool.name!r} has the name of one of agent {agent.name!r}'s own tools "
                                    f"but another input schema (GET /agents/{agent.name}/tools lists them; the same "
                                    f"schema would be that tool, run by the gateway): rename yours.",
                               param=f"tools[{index}]", code="tool_name_taken")
            options.ignored.append(Ignored(f"tools[{index}]", f"agent {agent.name!r}'s own tool {tool.name!r}, with "
                                                              "the same schema: the gateway runs it"))
            continue
        if tool.name in seen:
            raise APIError(400, f"Two of your tools are named {tool.name!r}.", param=f"tools[{index}]")
        seen.add(tool.name)
        kept.append(tool)
    options.tools = kept
    choice = options.tool_choice
    if isinstance(choice, dict):
        name = choice["function"]["name"]
        if name not in own and name not in seen:
            raise APIError(400, f"`tool_choice` names {name!r}, which is neither one of your tools nor one of "
                                f"agent {agent.name!r}'s.", param="tool_choice")
    if choice == "required" and not options.tools and not own:
        raise APIError(400, f"`tool_choice: required`, but agent {agent.name!r} has no tools and you sent none.",
                       param="tool_choice")
    provider = generation.runtime.manifest.providers.get(agent.provider)
    kind = provider.kind if provider is not None else ""
    adapter = ADAPTERS.get(kind)
    passes = adapter is not None and adapter.passes_tool_choice
    if choice not in (None, "auto", "none") and not passes:
        raise APIError(400, f"`tool_choice: {_shown(choice)}` can't be honoured: agent {agent.name!r} runs on a "
                            f"{kind} provider, and the gateway passes tool_choice on to OpenAI's APIs only. Leave "
                            f"it out, or use auto or none.", param="tool_choice", code="unsupported_parameter")
    params: dict[str, Any] = {}
    if options.parallel_tool_calls is not None:
        if passes:
            params["parallel_tool_calls"] = options.parallel_tool_calls
        elif options.parallel_tool_calls is False:
            raise APIError(400, f"`parallel_tool_calls: false` can't be honoured: agent {agent.name!r} runs on a "
                                f"{kind} provider, which the gateway can't ask for one call at a time.",
                           param="parallel_tool_calls", code="unsupported_parameter")
    return params


def same_tool(tool: CallerToolSpec, agent_tool: AgentTool) -> bool:
    """Whether a caller's declaration is the agent tool's own: its input schema as the gateway lists it (MCP's
    `inputSchema`, `format=openai`), give or take what clients add to a schema they pass on (an empty
    `properties`)."""
    return _canonical(tool.input_schema) == _canonical(agent_tool.input_schema)


def _canonical(schema: dict[str, Any]) -> str:
    if schema.get("type") == "object" and "properties" not in schema:
        schema = {**schema, "properties": {}}
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def _spec(function: dict[str, Any], where: str) -> CallerToolSpec:
    name = function.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise APIError(400, f"`{where}.name` must match ^[a-zA-Z0-9_-]{{1,64}}$, got {name!r}.", param=f"{where}.name")
    description = function.get("description") or ""
    if not isinstance(description, str):
        raise APIError(400, f"`{where}.description` must be a string.", param=f"{where}.description")
    parameters = function.get("parameters")
    if parameters is None:
        parameters = {"type": "object", "properties": {}}
    if not isinstance(parameters, dict):
        raise APIError(400, f"`{where}.parameters` must be a JSON Schema object.", param=f"{where}.parameters")
    return CallerToolSpec(name=name, description=description, input_schema=parameters)


def _choice(choice: Any) -> Any:
    if choice is None or isinstance(choice, dict) or choice in ("auto", "none", "required"):
        return choice
    raise APIError(400, f"`tool_choice` must be none, auto, required or a function, not {choice!r}.",
                   param="tool_choice")


def _parallel(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise APIError(400, "`parallel_tool_calls` must be a boolean.", param="parallel_tool_calls")


def _shown(choice: Any) -> str:
    return f"{{function: {choice['function']['name']}}}" if isinstance(choice, dict) else str(choice)
