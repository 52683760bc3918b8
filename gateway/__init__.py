"""gateway: OpenAPI specs in, exact tools out, one chat endpoint for LLM agents."""

from __future__ import annotations

from .catalog import ApiSpec, Argument, BodyBinding, Catalog, Diagnostic, Encoding, Server, Tool
from .messages import Message, ToolCall, ToolResult

__version__ = "0.1.0"

__all__ = [
    "ApiSpec",
    "Argument",
    "BodyBinding",
    "Catalog",
    "Diagnostic",
    "Encoding",
    "Message",
    "Server",
    "Tool",
    "ToolCall",
    "ToolResult",
    "__version__",
]
