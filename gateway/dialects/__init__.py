"""Tool definitions in each provider's wire format, rendered at the edge from the exact catalog schema.

Formats: `json` (the catalog's own view), `openai` (Chat Completions `tools`, optionally in strict mode),
`anthropic`, `gemini` (one `FunctionDeclaration` per tool) and `mcp` (MCP `Tool`). The input is anything
with `name`, `description`, `input_schema` and `output_schema` (`Tool` and `AgentTool` both). Schemas are
never changed in place: the catalog shares them between tools.

Modules: `render` (the formats), `strict` (OpenAI strict mode) with `strict_allof` (folding `allOf`),
`strict_limits` (OpenAI's size limits) and `strict_decode` (the way back to the exact schema),
`gemini` (Gemini's schema subset), `mcp` (MCP's output-schema rules), `brevity` (a definition's size in tokens,
a description's first sentence).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..kernel.lazy import lazy_names
from .gemini_schema import gemini_function, gemini_schema
from .mcp import declared_output_schema, mcp_output_schema, mcp_output_wraps, mcp_structured_content, mcp_tool
from .strict_allof import NotStrict
from .tool import FORMATS, ToolLike

_WHERE = {
    "StrictArgumentsError": ".strict_decode",
    "StrictForm": ".strict",
    "anthropic_tool": ".render",
    "json_tool": ".render",
    "openai_tool": ".render",
    "render_tools": ".render",
    "strict_arguments": ".strict",
    "strict_form": ".strict",
    "strict_reason": ".strict",
    "strict_schema": ".strict",
}
"""The names imported when first used (PEP 562): OpenAI's strict mode (`strict`, `strict_decode`, `strict_limits`:
a dozen dataclasses) and `render`, which imports it. The MCP door renders its own format only, and `gateway mcp`'s
first listing should not wait for the others."""

if TYPE_CHECKING:
    from .render import anthropic_tool, json_tool, openai_tool, render_tools
    from .strict import StrictForm, strict_arguments, strict_form, strict_reason, strict_schema
    from .strict_decode import StrictArgumentsError

__all__ = [
    "FORMATS",
    "NotStrict",
    "StrictArgumentsError",
    "StrictForm",
    "ToolLike",
    "anthropic_tool",
    "declared_output_schema",
    "drop_strict_nulls",
    "gemini_function",
    "gemini_schema",
    "json_tool",
    "mcp_output_schema",
    "mcp_output_wraps",
    "mcp_structured_content",
    "mcp_tool",
    "openai_tool",
    "render_tools",
    "strict_arguments",
    "strict_form",
    "strict_reason",
    "strict_schema",
]


__getattr__, __dir__ = lazy_names(__name__, _WHERE, globals(), __all__)


def drop_strict_nulls(input_schema: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """The former name of `strict_arguments` (which also decodes what strict mode encodes)."""
    from .strict import strict_arguments

    return strict_arguments(input_schema, arguments)
