"""MCP: `inputSchema` is the input schema; `outputSchema` must have `type: "object"` at its root.

A non-object output is wrapped as `{"type": "object", "properties": {"result": <schema>}}` and the structured
result must then be sent as `{"result": value}` (see `mcp_structured_content`).
"""

from __future__ import annotations

from typing import Any

from .tool import ToolLike


def mcp_tool(t: ToolLike) -> dict[str, Any]:
    rendered: dict[str, Any] = {"name": t.name, "description": t.description, "inputSchema": t.input_schema}
    output = mcp_output_schema(declared_output_schema(t))
    if output is not None:
        rendered["outputSchema"] = output
    method = getattr(getattr(t, "tool", None) or t, "method", None)
    if isinstance(method, str):
        read_only = method in ("GET", "HEAD", "OPTIONS")
        rendered["annotations"] = {"readOnlyHint": read_only, "destructiveHint": method == "DELETE",
                                   "idempotentHint": method in ("GET", "HEAD", "OPTIONS", "PUT", "DELETE")}
    return rendered


def declared_output_schema(t: ToolLike) -> dict[str, Any] | None:
    """The output schema clients are told: none when the gateway does not enforce it (`output_check: warn|off`),
    since MCP clients reject structured content that breaks a declared schema. A view reads its tool's setting."""
    source = getattr(t, "source", t)
    return t.output_schema if getattr(source, "output_check", "enforce") == "enforce" else None


def mcp_output_wraps(output_schema: dict[str, Any] | None) -> bool:
    return output_schema is not None and output_schema.get("type") != "object"


def mcp_output_schema(output_schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """`outputSchema` for MCP: the output itself when its root is an object, else wrapped in `result`."""
    if output_schema is None:
        return None
    if not mcp_output_wraps(output_schema):
        return output_schema
    inner = {k: v for k, v in output_schema.items() if k != "$defs"}
    wrapped: dict[str, Any] = {"type": "object", "properties": {"result": inner}, "required": ["result"]}
    if "$defs" in output_schema:
        wrapped["$defs"] = output_schema["$defs"]  # refs are `#/$defs/...`: they must stay at the root
    return wrapped


def mcp_structured_content(output_schema: dict[str, Any] | None, value: Any) -> Any:
    """The `structuredContent` to send for `value`, matching `mcp_output_schema`."""
    return {"result": value} if mcp_output_wraps(output_schema) else value
