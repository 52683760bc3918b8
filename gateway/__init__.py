"""gateway: OpenAPI specs in, exact tools out, one chat endpoint for LLM agents.

The names below are imported when first used (PEP 562): a command imports only what it runs (`gateway mcp`
never loads the HTTP server, the providers or the loop's wording validators it does not need).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .kernel.lazy import lazy_names

_WHERE = {
    "AdapterPool": ".providers",
    "AgentConfig": ".config.model",
    "AgentTool": ".catalog",
    "ApiSpec": ".catalog",
    "Argument": ".catalog",
    "AuditUnavailable": ".errors",
    "BodyBinding": ".catalog",
    "Catalog": ".catalog",
    "ConfigError": ".errors",
    "Decision": ".loop_types",
    "Diagnostic": ".catalog",
    "Encoding": ".catalog",
    "GatewayError": ".errors",
    "Invocation": ".kernel.calls",
    "LoopError": ".loop_types",
    "LoopEvent": ".loop_types",
    "Manifest": ".config.model",
    "Message": ".messages",
    "PendingApproval": ".loop_types",
    "Pipeline": ".execution.pipeline",
    "ProviderAdapter": ".providers",
    "RunResult": ".loop_types",
    "Runtime": ".runtime",
    "RuntimeHolder": ".runtime",
    "Server": ".catalog",
    "Stage": ".kernel.calls",
    "Step": ".loop_types",
    "Tool": ".catalog",
    "ToolCall": ".messages",
    "ToolHooks": ".kernel.calls",
    "ToolResult": ".messages",
    "ToolRunner": ".execution.runner",
    "Toolset": ".toolsets",
    "__version__": ".kernel",
    "build_pipeline": ".assembly",
    "build_toolsets": ".toolsets",
    "compile_document": ".openapi",
    "compile_specs": ".openapi",
    "get_adapter": ".providers",
    "load_manifest": ".config.loader",
    "load_runtime": ".runtime",
    "render_tools": ".dialects",
}
"""Each public name and the module (relative to this package) that defines it."""

if TYPE_CHECKING:
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

__getattr__, __dir__ = lazy_names(__name__, _WHERE, globals(), __all__)
