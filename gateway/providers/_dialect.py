"""Tool definitions per dialect, from `gateway.dialects` (the compiler's renderers).

The fallbacks only keep the adapters usable while `gateway.dialects` is absent (it is written in parallel);
they pass the schema through unchanged.
"""

from __future__ import annotations

from typing import Any

try:
    from ..dialects import anthropic_tool, gemini_function, openai_tool
except ImportError:  # pragma: no cover - only before gateway.dialects exists

    def openai_tool(t: Any, strict: bool = False) -> dict[str, Any]:  # type: ignore[misc]
        return {"type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}

    def anthropic_tool(t: Any) -> dict[str, Any]:  # type: ignore[misc]
        return {"name": t.name, "description": t.description, "input_schema": t.input_schema}

    def gemini_function(t: Any) -> dict[str, Any]:  # type: ignore[misc]
        return {"name": t.name, "description": t.description, "parametersJsonSchema": t.input_schema}

__all__ = ["anthropic_tool", "gemini_function", "openai_tool"]
