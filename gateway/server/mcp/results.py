"""A `ToolResult` shaped as MCP's `CallToolResult`, in wire form.

A JSON body travels as `structuredContent` (wrapped as `{"result": ...}` for a 2025 client when the output
schema's root is not an object) beside its text; a failure is `isError` with a text that says what failed, the
HTTP status and the body, so a model can act on it. The verdict is the call pipeline's, the same on every door
(a 2xx body that breaks the output schema is an `invalid_output` failure); the shaping is MCP's: a tool with an
output schema makes clients require `structuredContent`, which a truncated body cannot give, so that is an error.

Results are dicts, not the SDK's pydantic models: the SDK sends a dict as it is (its result check still runs),
where a model would be built, validated and dumped again on every call.

The JSON is written once. A body that is exactly the parse of the api's JSON text (`ToolResult.body_json`: no
secret in the text in any form, no JSON escape, nothing cut or changed since) is not written again from its parse:
the text content is the api's text when it is on one line (a pretty-printed answer is written compact, as any
other body, so the model is not sent its indentation), and where the door writes the answer itself (`inline`,
`stateless`), `structuredContent` is written from that text too.

Where the door writes the answer itself, the result's text content and structured content travel beside the SDK
kernel's result (`ResultAside`) rather than through the kernel's result check, whose rules for them hold by
construction here: the content is one `TextContent`, `{"type": "text", "text": <str>}` (any string is a valid text,
and the check's JSON-mode dump of it is the same dict: a test holds this against the SDK's own check); the
structured content is `dict[str, Any]`, a JSON object with string keys and any values, dumped as JSON, and ours is
the parse of a JSON object (or `{"result": ...}`). That check's walk and copy of every value was the largest single
cost of an MCP call (bench/README.md, branch mcp32), and of the text's (branch mcp33). The kernel still checks and
shapes the rest of the result (`isError`, the era's fields, the `serverInfo` stamp). Over stdio and the SDK's own
transport everything stays in the result, checked by the kernel as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from ...catalog import AgentTool
from ...dialects import mcp_structured_content
from ...jsonwire import dumps_text
from ...messages import ToolResult
from ...truncation import CUT_NOTE

if TYPE_CHECKING:
    from ...safety.audit import Sends


class ResultAside:
    """What of one call's result the door writes itself (see the module's docstring): the text content, and the
    structured content with the JSON text it is exactly the parse of (None: written from the value)."""

    __slots__ = ("json", "text", "value", "sends")

    def __init__(self) -> None:
        self.text: str | None = None
        self.value: Any = None
        self.json: bytes | None = None
        self.sends: Sends | None = None
        """The calls a `tools/call` answered in the request's task sent (`watch_sends`; for `stopping`)."""

    def put(self, result: dict[str, Any]) -> bool:
        """Put what was set aside into the kernel's `result` (wire form); whether it holds JSON text only orjson
        writes (a fragment)."""
        if self.text is not None:
            result["content"] = [{"type": "text", "text": self.text}]
        if self.value is None:
            return False
        if self.json is None:
            result["structuredContent"] = self.value
            return False
        result["structuredContent"] = orjson.Fragment(self.json)
        return True

    def take_back(self, result: dict[str, Any]) -> None:
        """Write the structured content from its value after all (something else in `result` needs the general
        writer, which does not take a fragment)."""
        result["structuredContent"] = self.value


def call_result(agent_tool: AgentTool, result: ToolResult, *, modern: bool,
                aside: ResultAside | None = None) -> dict[str, Any]:
    """The `CallToolResult` for `result`; `modern` for the 2026-07-28 protocol (any schema at the root); `aside`:
    where the text and structured content go when the door writes the answer itself (see the module's docstring)."""
    if not result.ok:
        return wire_result(error_text(result), None, is_error=True, aside=aside)
    body = result.body
    is_json = not isinstance(body, str) and (result.media_type or "json").endswith("json")
    raw = result.body_json  # the api's text, standing for `body` (see `ToolResult.body_json`)
    if isinstance(body, str):
        text = body
    elif raw is not None and b"\n" not in (raw := raw.strip()):
        text = raw.decode()  # UTF-8: the parse was orjson's, which reads nothing else
    else:
        text = dumps_text(body)
    if result.truncated:
        text += "\n" + CUT_NOTE  # the words of every door: the model is told to ask for a smaller page
    if result.warning:
        text += f"\n[warning: {result.warning}]"
    schema = agent_tool.enforced_output_schema
    if schema is None:
        structured = body if is_json and (modern or isinstance(body, dict)) else None
    elif result.truncated:
        message = (f"The API answered {result.status} but the body was cut at the gateway's limit, so it cannot "
                   f"be checked against the spec's output schema. The body:\n{text}")  # ends with CUT_NOTE
        return wire_result(message, None, is_error=True, aside=aside)
    else:  # the pipeline checked the body against the output schema (a body that breaks it is already a failure)
        structured = body if modern else mcp_structured_content(schema, body)
    if aside is None or structured is None:
        return wire_result(text, structured, aside=aside)
    aside.value = structured
    if raw is not None:
        aside.json = raw if structured is body else b'{"result":%b}' % raw  # (2025's wrap of a non-object root)
    return wire_result(text, None, aside=aside)


def wire_result(text: str, structured: Any, *, is_error: bool = False,
                aside: ResultAside | None = None) -> dict[str, Any]:
    """A `CallToolResult` of one text content (with `aside`, the text goes there and the content list is empty
    until the door puts it back)."""
    if aside is not None:
        aside.text = text
    wire: dict[str, Any] = {"content": [] if aside is not None else [{"type": "text", "text": text}]}
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
