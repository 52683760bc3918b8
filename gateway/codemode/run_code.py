"""The `run_code` tool a model is offered in code mode: `{"code": string}`, and a description that teaches the
script's functions with their typed signatures (`gateway.codemode.signatures`).

The description fits the tool budget (`gateway.tool_budget`, like any tool's view): the signatures are written
with nested types two levels deep, then one, then without return types, then without summaries; when even the
shortest do not all fit, the first ones that do are listed and the rest are named by count, with the way to
find them (`search_tools`, whose answer shows a found tool's signature, or `describe_tool`). A large agent
(tool search on) lists the functions of its pinned tools: the rest are found by search.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..catalog import AgentTool
from ..dialects.brevity import definition_tokens
from .sandbox import Limits
from .script import CODE_SCHEMA
from .signatures import FunctionNames, signature

RUN_CODE = "run_code"
RUN_CODE_TOOL = AgentTool(name=RUN_CODE, description="", input_schema=CODE_SCHEMA)
"""`run_code` where no description is needed: what a script's audit row names, what shapes its result at the MCP
door (no output schema). Each door offers its own, with the agent's functions in the description."""
_LEVELS = ({"depth": 2}, {"depth": 1}, {"depth": 1, "returns": False}, {"depth": 1, "returns": False,
                                                                      "summary": False})
_HEAD = """Run a short Python script that calls this agent's tools as functions; only its result comes back to you.
Use it for work of several steps (list, filter, then act on each): one script instead of a call per step.
- Each tool is a function of that name taking keyword arguments; it returns the parsed answer body (dicts and
  lists). A failed call raises RuntimeError (catch it to go on). Call functions directly: no await, no threads.
- The value of the script's last expression is the result (JSON); print() output comes beside it.
- Python with these modules only: json, re, math, datetime, collections, itertools, functools, random, decimal,
  hashlib, base64, csv, copy, bisect, typing, dataclasses. No files, network or environment. Limits per script:
  {time:g}s of execution, {memory} MB, {tool_calls} tool calls.
- Types: {{a: int, b?: str}} is a dict with the key a and the optional key b; `= None` marks an optional
  argument (None means not given); **{{"a-b": str}} is an argument whose name is not an identifier.
"""

_CACHE: dict[tuple[Any, ...], AgentTool] = {}


def run_code_tool(functions: Sequence[AgentTool], names: FunctionNames, *, total: int, limits: Limits,
                  budget: int, searching: bool) -> AgentTool:
    """The `run_code` tool documenting `functions` (of `total` the agent has) within `budget` tokens.

    Parameters: names: every tool's name in the script; searching: the model has `search_tools` to find the
    functions that are not listed."""
    key = (tuple(id(f) for f in functions), tuple(names.function(f.name) for f in functions), total, limits,
           budget, searching)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    head = _HEAD.format(time=limits.time, memory=limits.memory // (1024 * 1024), tool_calls=limits.tool_calls)
    tool = _fit(head, functions, names, total, budget, searching)
    if len(_CACHE) > 1024:
        _CACHE.clear()
    _CACHE[key] = tool
    return tool


def _fit(head: str, functions: Sequence[AgentTool], names: FunctionNames, total: int, budget: int,
         searching: bool) -> AgentTool:
    for level in _LEVELS:
        lines = [signature(f, names.function(f.name), **level) for f in functions]  # type: ignore[arg-type]
        tool = _tool(head, lines, total, searching)
        if definition_tokens(tool) <= budget:
            return tool
    # Even the shortest signatures do not all fit: as many as do, the rest by count.
    low, high = 0, len(lines)
    while low < high:  # the largest count that fits
        middle = (low + high + 1) // 2
        if definition_tokens(_tool(head, lines[:middle], total, searching)) <= budget:
            low = middle
        else:
            high = middle - 1
    return _tool(head, lines[:low], total, searching)


def _tool(head: str, lines: Sequence[str], total: int, searching: bool) -> AgentTool:
    parts = [head, "Functions:", *lines] if lines else [head]
    left = total - len(lines)
    if left > 0:
        find = ("search_tools finds them (its answer shows each one's signature)" if searching
                else "they are the other tools you are offered, with the same names and arguments")
        parts.append(f"... and {left} more function(s), one per tool of this agent: {find}.")
    return AgentTool(name=RUN_CODE, description="\n".join(parts), input_schema=CODE_SCHEMA)
