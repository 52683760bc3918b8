"""What a request may carry, and the 4xx that says so, in OpenAI's error shape.

- The request line and headers: 414 past `MAX_TARGET_BYTES` of path and query, 431 past `MAX_HEADERS` headers or
  `MAX_HEADER_BYTES` of them (`HeadersTooLarge`, `TargetTooLong`), answered by the request envelope before any key
  is checked or anything routed.
- The body's size: 413 (`BodyTooLarge`). The request envelope (`gateway.server.envelope`) enforces it: a declared
  `Content-Length` over the limit is refused before the body is read (one within it is passed on untouched: the
  server frames the body by that length); a body of unknown length is counted as it arrives and refused once it
  passes the limit, so no route ever buffers more than that.
- The number of things in a chat or Responses request (`check_counts`): messages or input items, their content
  parts and tool calls, the caller's tools. Every one of them costs the event loop work in the doors, the loop
  and the provider adapters, so a body within the size limit still may not hold 60,000 tiny messages: 400 with
  OpenAI's code for it, `array_above_max_length`, and the limit in the message.
- The shape of a chat request against the gateway's own OpenAPI document (`check_shape`): jsonschema_rs judges on
  the loop; what it refuses is worded in a worker thread.
"""

from __future__ import annotations

from typing import Any

from jsonschema.exceptions import best_match

from ..execution.arguments import run_off_the_loop
from ..execution.fastschema import is_valid, usable
from ..execution.schema_errors import BudgetSpent, first_errors
from .api_errors import APIError

MAX_HEADERS = 100
"""Header fields of one request (gunicorn's default `limit_request_fields`)."""
MAX_HEADER_BYTES = 32 * 1024
"""Names and values of all the header fields together (nginx's default buffers: 4 x 8 KB)."""
MAX_TARGET_BYTES = 16 * 1024
"""The path and query of one request."""
MAX_MESSAGES = 4096
"""Messages of a chat request, or items of a Responses request's `input`."""
MAX_PARTS = 16_384
"""Content parts and tool calls of all the messages together."""
MAX_TOOLS = 512
"""The caller's own tools."""


class BodyTooLarge(APIError):
    """Refuses a body over the limit; raised from `receive` mid-body, it is answered like any other `APIError`."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"The request body is larger than the limit of {limit} bytes.",
                         headers={"Connection": "close"})


class HeadersTooLarge(APIError):
    def __init__(self, count: int, size: int) -> None:
        super().__init__(431, f"The request carries {count} header fields, {size} bytes; the gateway takes at most "
                              f"{MAX_HEADERS} fields and {MAX_HEADER_BYTES} bytes.",
                         code="request_header_fields_too_large", headers={"Connection": "close"})


class TargetTooLong(APIError):
    def __init__(self, size: int) -> None:
        super().__init__(414, f"The request's path and query are {size} bytes long; the gateway takes at most "
                              f"{MAX_TARGET_BYTES}.", code="uri_too_long", headers={"Connection": "close"})


def check_counts(body: dict[str, Any], items: str) -> None:
    """400 when `body[items]` (messages or input items), their parts and tool calls together, or `tools` hold
    more than the gateway takes. Counts only lists; their shape is checked later."""
    _check_length(body.get(items), items, MAX_MESSAGES)
    _check_length(body.get("tools"), "tools", MAX_TOOLS)
    entries = body.get(items)
    if not isinstance(entries, list):
        return
    parts = 0
    for entry in entries:
        if isinstance(entry, dict):
            for key in ("content", "tool_calls"):
                value = entry.get(key)
                if isinstance(value, list):
                    parts += len(value)
    if parts > MAX_PARTS:
        raise APIError(400, f"Invalid '{items}': its content parts and tool calls number {parts}; the gateway takes "
                            f"at most {MAX_PARTS} in one request.", param=items, code="array_above_max_length")


def check_conversation(count: int, param: str) -> None:
    """400 when a conversation continued from a stored response grows past `MAX_MESSAGES` (each continuation would
    cost more than the last)."""
    if count > MAX_MESSAGES:
        raise APIError(400, f"The conversation holds {count} messages with this input; the gateway takes at most "
                            f"{MAX_MESSAGES}. Start a new one (without previous_response_id) with what matters.",
                       param=param, code="array_above_max_length")


def _check_length(value: Any, name: str, limit: int) -> None:
    if isinstance(value, list) and len(value) > limit:
        raise APIError(400, f"Invalid '{name}': array too long. Expected an array with maximum length {limit}, but "
                            f"got an array with length {len(value)} instead.", param=name,
                       code="array_above_max_length")


async def check_shape(schema: Any, body: Any, *, document: str) -> None:
    """400 naming the first place where `body` breaks `schema` (`document`: the schema's name in the gateway's
    OpenAPI document, for the message when no place can be named)."""
    if is_valid(schema, body):
        return
    refusal = await run_off_the_loop(lambda: _shape_refusal(schema, body, document))
    if refusal is not None:
        raise refusal


def _shape_refusal(schema: Any, body: Any, document: str) -> APIError | None:
    try:
        error = best_match(first_errors(schema, body, 8))
    except BudgetSpent:
        error = None
    if error is None:
        if not usable(schema):
            return None
        return APIError(400, f"The body does not match {document} (GET /openapi.json).")
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
    return APIError(400, f"`{where or 'body'}`: {error.message[:300]}", param=where or None)
