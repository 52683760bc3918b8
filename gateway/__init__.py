"""gateway: OpenAPI specs in, exact tools out, one chat endpoint for LLM agents."""

from __future__ import annotations

from .catalog import ApiSpec, Argument, BodyBinding, Catalog, Diagnostic, Encoding, Server, Tool
from .manifest import AgentConfig, Manifest
from .manifest_loader import load_manifest
from .messages import Message, ToolCall, ToolResult
from .runtime import Runtime, RuntimeHolder, load_runtime
from .toolsets import AgentTool, Toolset, build_toolsets

__version__ = "0.1.0"

__all__ = [
    "AgentConfig",
    "AgentTool",
    "ApiSpec",
    "Argument",
    "BodyBinding",
    "Catalog",
    "Diagnostic",
    "Encoding",
    "Manifest",
    "Message",
    "Runtime",
    "RuntimeHolder",
    "Server",
    "Tool",
    "ToolCall",
    "ToolResult",
    "Toolset",
    "__version__",
    "build_toolsets",
    "load_manifest",
    "load_runtime",
]
