"""A `ToolResult` shaped as MCP's `CallToolResult`, in wire form.

A JSON body travels as `structuredContent` (wrapped as `{"result": ...}` for a 2025 client when the output
schema's root is not an object) beside its text; a failure is `isError` with a text that says what failed, the
HTTP status and the body, so a model can act on it. The verdict is the call pipeline's, the same on every door
(a 2xx body that breaks the output schema is an `invalid_output` failure); the shaping is MCP's: a tool with an
output schema makes clients require `structuredContent`, which a truncated body cannot give, so that is an error.

Results are dicts, not the SDK's pydantic models: the SDK sends a dict as it is (its result check still runs),
where a model would be built, validated and dumped again on every call.
"""

from __future__ import annotations

from typing import Any

from ...catalog import AgentTool
from ...dialects import mcp_structured_content
from ...jsonwire import dumps_text
from ...messages import ToolResult


def call_result(agent_tool: AgentTool, result: ToolResult, *, modern: bool) -> dict[str, Any]:
    """The `CallToolResult` for `result`; `modern` for the 2026-07-28 protocol (any schema at the root)."""
    if not result.ok:
        return wire_result(error_text(result), None, is_error=True)
    body = result.body
    is_json = not isinstance(body, str) and (result.media_type or "json").endswith("json")
    text = body if isinstance(body, str) else dumps_text(body)
    if result.truncated:
        text += "\n[truncated]"
    if result.warning:
        text += f"\n[warning: {result.warning}]"
    schema = agent_tool.enforced_output_schema
    if schema is None:
        structured = body if is_json and (modern or isinstance(body, dict)) else None
        return wire_result(text, structured)
    if result.truncated:
        message = (f"The API answered {result.status} but the body was truncated at the size limit, so it cannot "
                   f"be checked against the spec's output schema. The body:\n{text}")
        return wire_result(message, None, is_error=True)
    # The pipeline checked the body against the output schema (a body that breaks it is already a failure).
    return wire_result(text, body if modern else mcp_structured_content(schema, body))


def wire_result(text: str, structured: Any, *, is_error: bool = False) -> dict[str, Any]:
    wire: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if structured is not None:
        wire["structuredContent"] = structured
    wire["isError"] = is_error
    wire["resultType"] = "complete"  # required by 2026-07-28; the SDK drops it from a 2025 answer
    return wire


def error_text(result: ToolResult) -> str:
    """What failed, for the model: the error, the HTTP status, the body, an approval's id."""
    parts = [f"Error ({result.error_type or 'error'}): {result.error or 'the call failed'}"]
    if result.status is not None:
        parts.append(f"HTTP status: {result.status}")
    if result.body not in (None, ""):
        body = result.body if isinstance(result.body, str) else dumps_text(result.body)
        parts.append(f"Body: {body}")
    if result.approval_id:
        parts.append(f"Approval id: {result.approval_id}")
    return "\n".join(parts)
