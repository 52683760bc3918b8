"""What every dialect renders (anything with a name, a description and the exact input/output schemas), and the
formats there are."""

from __future__ import annotations

from typing import Any, Protocol

FORMATS = ("json", "openai", "anthropic", "gemini", "mcp")
"""Kept here, apart from `render`, which imports OpenAI's strict mode: the command line offers the formats as
choices before it renders any."""


class ToolLike(Protocol):
    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
