"""A `ToolResult` shaped as MCP's `CallToolResult`, in wire form.

A JSON body travels as `structuredContent` (wrapped as `{"result": ...}` for a 2025 client when the output
schema's root is not an object) beside its text; a failure is `isError` with a text that says what failed, the
HTTP status and the body, so a model can act on it. A tool with an output schema makes clients validate
`structuredContent`, so a body that breaks the schema is answered as an error, never sent as if it held.

Results are dicts, not the SDK's pydantic models: the SDK sends a dict as it is (its result check still runs),
where a model would be built, validated and dumped again on every call.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from ...dialects import mcp_structured_content
from ...execution.fastschema import is_valid
from ...jsonwire import dumps_text
from ...messages import ToolResult
from ...toolsets import AgentTool
from ..state import Generation


def call_result(generation: Generation, agent_tool: AgentTool, result: ToolResult, *,
                modern: bool) -> dict[str, Any]:
    """The `CallToolResult` for `result`; `modern` for the 2026-07-28 protocol (any schema at the root)."""
    if not result.ok:
        return wire_result(error_text(result), None, is_error=True)
    body = result.body
    is_json = not isinstance(body, str) and (result.media_type or "json").endswith("json")
    text = body if isinstance(body, str) else dumps_text(body)
    if result.truncated:
        text += "\n[truncated]"
    schema = agent_tool.output_schema
    if schema is None:
        structured = body if is_json and (modern or isinstance(body, dict)) else None
        return wire_result(text, structured)
    if result.truncated:
        problem: str | None = "it was truncated at the size limit"
    else:
        problem = output_schema_problem(generation, agent_tool, body) if is_json else "it is not JSON"
    if problem is not None:
        message = (f"The API answered {result.status} but the body does not match the spec's output schema "
                   f"({problem}). The body:\n{text}")
        return wire_result(message, None, is_error=True)
    return wire_result(text, body if modern else mcp_structured_content(schema, body))


def wire_result(text: str, structured: Any, *, is_error: bool = False) -> dict[str, Any]:
    wire: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if structured is not None:
        wire["structuredContent"] = structured
    wire["isError"] = is_error
    wire["resultType"] = "complete"  # required by 2026-07-28; the SDK drops it from a 2025 answer
    return wire


def output_schema_problem(generation: Generation, agent_tool: AgentTool, body: Any) -> str | None:
    """What is wrong with `body` against the tool's output schema, or None when it holds.

    The verdict belongs to the call pipeline shared by every door (issue 15); until it lands there, MCP asks it
    here, as before."""
    if is_valid(agent_tool.output_schema or {}, body):  # fast yes; jsonschema words any problem below
        return None
    validator = generation.memo(("output-validator", id(agent_tool)),
                                lambda: Draft202012Validator(agent_tool.output_schema or {}))
    error = next(iter(validator.iter_errors(body)), None)
    if error is None:
        return None
    where = "/" + "/".join(str(p) for p in error.absolute_path)
    return f"at {where}: {error.message[:200]}"


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
