"""gateway: OpenAPI specs in, exact tools out, one chat endpoint for LLM agents."""

from __future__ import annotations

from .assembly import build_pipeline
from .catalog import AgentTool, ApiSpec, Argument, BodyBinding, Catalog, Diagnostic, Encoding, Server, Tool
from .config.loader import load_manifest
from .config.model import AgentConfig, Manifest
from .dialects import render_tools
from .errors import AuditUnavailable, ConfigError, GatewayError
from .execution.pipeline import Pipeline
from .execution.runner import ToolRunner
from .kernel import __version__
from .kernel.calls import Invocation, Stage, ToolHooks
from .loop_types import Decision, LoopError, LoopEvent, PendingApproval, RunResult, Step
from .messages import Message, ToolCall, ToolResult
from .openapi import compile_document, compile_specs
from .providers import AdapterPool, ProviderAdapter, get_adapter
from .runtime import Runtime, RuntimeHolder, load_runtime
from .toolsets import Toolset, build_toolsets

__all__ = [
    "AdapterPool",
    "AgentConfig",
    "AgentTool",
    "ApiSpec",
    "Argument",
    "AuditUnavailable",
    "BodyBinding",
    "Catalog",
    "ConfigError",
    "Decision",
    "Diagnostic",
    "Encoding",
    "GatewayError",
    "Invocation",
    "LoopError",
    "LoopEvent",
    "Manifest",
    "Message",
    "PendingApproval",
    "Pipeline",
    "ProviderAdapter",
    "RunResult",
    "Runtime",
    "RuntimeHolder",
    "Server",
    "Stage",
    "Step",
    "Tool",
    "ToolCall",
    "ToolHooks",
    "ToolResult",
    "ToolRunner",
    "Toolset",
    "__version__",
    "build_pipeline",
    "build_toolsets",
    "compile_document",
    "compile_specs",
    "get_adapter",
    "load_manifest",
    "load_runtime",
    "render_tools",
]
