"""Tool definitions in each wire format: `json` (the catalog's own view), `openai`, `anthropic`, `gemini`, `mcp`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .gemini_schema import gemini_function
from .mcp import mcp_tool
from .strict import strict_form
from .strict_allof import NotStrict
from .tool import FORMATS, ToolLike

__all__ = ["FORMATS", "anthropic_tool", "json_tool", "openai_tool", "render_tools"]


def render_tools(tools: Iterable[ToolLike], format: str, *, strict: bool = False) -> list[dict[str, Any]]:
    """Render every tool in one wire format (`json`, `openai`, `anthropic`, `gemini`, `mcp`): the tools as given,
    exact or a model's view of them (`gateway.offer.views.model_view` makes those)."""
    if format == "json":
        return [json_tool(t) for t in tools]
    if format == "openai":
        return [openai_tool(t, strict=strict) for t in tools]
    if format == "anthropic":
        return [anthropic_tool(t) for t in tools]
    if format == "gemini":
        return [gemini_function(t) for t in tools]
    if format == "mcp":
        return [mcp_tool(t) for t in tools]
    raise ValueError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")


def json_tool(t: ToolLike) -> dict[str, Any]:
    to_dict = getattr(t, "to_dict", None)
    if callable(to_dict):
        return to_dict()  # type: ignore[no-any-return]
    rendered = {"name": t.name, "description": t.description, "input_schema": t.input_schema,
                "output_schema": t.output_schema}
    inner = getattr(t, "tool", None)
    for key in ("api", "operation_id", "method", "path"):
        rendered[key] = getattr(inner, key, None) if inner is not None else None
    return rendered


def openai_tool(t: ToolLike, strict: bool = False) -> dict[str, Any]:
    """A Chat Completions tool; with `strict`, in strict mode when the schema allows (else `strict: false`
    with the exact schema: see `strict.py`)."""
    function: dict[str, Any] = {"name": t.name, "description": t.description, "parameters": t.input_schema}
    if strict:
        try:
            function["parameters"] = strict_form(t.input_schema).schema
            function["strict"] = True
        except NotStrict:
            function["strict"] = False
    return {"type": "function", "function": function}


def anthropic_tool(t: ToolLike) -> dict[str, Any]:
    return {"name": t.name, "description": t.description, "input_schema": t.input_schema}
