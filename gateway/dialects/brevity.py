"""What keeps a tool's definition short for a model: its size in tokens, estimated over every rendering
(`definition_tokens`), and a description cut to its first sentence (`first_sentences`). Model views
(`gateway.offer.views`) and code mode's function signatures (`gateway.codemode`) both measure and cut with these.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

from .gemini_schema import gemini_function
from .mcp import mcp_tool
from .tool import ToolLike

CHARS_PER_TOKEN = 3
"""A conservative estimate for JSON schemas (tokenizers give 3-4 characters per token on them)."""
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[`\"'])")


def estimate_tokens(value: Any) -> int:
    return len(orjson.dumps(value)) // CHARS_PER_TOKEN + 1


def definition_tokens(tool: ToolLike) -> int:
    """The estimated tokens of `tool`'s definition in its largest provider rendering."""
    # Imported at the first definition measured: `render` imports OpenAI's strict mode (four modules, a dozen
    # dataclasses), which a door rendering one format (`gateway mcp`'s listing) needs only for a tool too big for
    # its budget (`gateway.offer.views`).
    from .render import anthropic_tool, openai_tool

    renderings: list[Callable[[Any], dict[str, Any]]] = [
        openai_tool, lambda t: openai_tool(t, strict=True), anthropic_tool, gemini_function, mcp_tool]
    return max(estimate_tokens(render(tool)) for render in renderings)


def first_sentences(text: str, limit: int) -> str:
    """`text` cut to its first sentence (or paragraph), at most `limit` characters."""
    text = (text or "").strip()
    if len(text) <= 120 and "\n" not in text:
        return text
    first = text.split("\n\n", 1)[0].strip()
    parts = _SENTENCE.split(first, maxsplit=1)
    short = parts[0].strip()
    if len(short) > limit:
        short = short[: limit - 1].rstrip() + "…"
    return short
