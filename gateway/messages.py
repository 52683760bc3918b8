"""The loop's internal form: provider-neutral messages, tool calls and tool results.

Provider adapters (`gateway.providers`) translate between these and each wire format; the
executor turns a `ToolCall` into a `ToolResult`; the server renders them as OpenAI shapes.
"""

from __future__ import annotations

import builtins
import json
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]

ErrorType = Literal[
    "invalid_arguments",  # arguments failed the input schema, or could not be parsed: nothing was sent
    "unknown_tool",  # the model named a tool it does not have
    "upstream_error",  # the API answered with a non-2xx status
    "invalid_output",  # the API answered 2xx with a body that breaks the spec's output schema (the request ran)
    "transport_error",  # connect/read failure, reset, too many redirects, refused redirect
    "timeout",  # the call's deadline passed
    "circuit_open",  # the api's breaker is open after failures in a row: not sent; the error says when it probes again
    "approval_pending",  # the tool needs a human's approval first: nothing was sent
    "approval_denied",  # a human refused the call
    "configuration_error",  # the gateway cannot build the request (e.g. a relative server without base_url)
    "rate_limited",  # a gateway rate limit or per-run cap refused the call
    "truncated_turn",  # the model's turn was cut by its token limit: its calls were not executed
    "delegate_error",  # a sub-agent's run failed
    "hook_denied",  # a configured hook refused the call or withheld its result
    "credential_in_arguments",  # the arguments carry a credential the gateway holds (exfiltration): nothing was sent
    "user_required",  # the api acts as the signed-in user, and there is none (or their token was refused): not sent
    "insufficient_scope",  # the user may not have the scopes the operation needs: nothing was sent
    "not_connected",  # the user has not connected their account to the api yet (the error has the link): not sent
    "auth_unavailable",  # the authorization server cannot be reached: nothing was sent
    "store_unavailable",  # the shared state a call is counted in (Redis, the PostgreSQL store) did not answer: not sent
    "code_error",  # a run_code script failed: a syntax error, an exception it did not catch, what the sandbox refuses
    "code_limit",  # a run_code script passed one of its agent's code_limits (time, memory, tool calls)
]

NOT_SENT: frozenset[str] = frozenset({"invalid_arguments", "unknown_tool", "approval_pending", "approval_denied",
                                      "rate_limited", "truncated_turn", "hook_denied", "store_unavailable",
                                      "circuit_open", "credential_in_arguments"})
"""Error types of calls refused before anything was sent to their api."""


@dataclass(slots=True, kw_only=True)
class ToolCall:
    """One call the model asked for, normalized from any wire format."""

    id: str
    """The provider's call id, or a synthesized one (unique per turn) when the provider gave none."""
    name: str
    arguments: dict[str, Any] | None = None
    """The parsed arguments; None when they could not be parsed (see `parse_error`)."""
    raw_arguments: str | dict[str, Any] | None = None
    """Exactly what the provider sent (a JSON string for OpenAI, an object for the others)."""
    parse_error: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    """Provider state that must be echoed back (e.g. Gemini `thoughtSignature`)."""

    def unread_text(self) -> str:
        """Arguments that could not be read (`parse_error`), as an audit row or a span shows them: the text that came
        (a value that was not text, written as JSON), any character no store can write (a lone surrogate) escaped.
        Bounded as every row's arguments are, by what the door reads (a request body, a model's answer)."""
        raw = self.raw_arguments
        text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, default=str)
        try:
            text.encode()
        except UnicodeEncodeError:
            text = text.encode(errors="backslashreplace").decode()
        return text


@dataclass(slots=True, kw_only=True)
class ToolResult:
    """What one tool call produced: the HTTP outcome, or an error the model can act on."""

    ok: bool
    status: int | None = None
    """The upstream HTTP status; None when no request was sent."""
    media_type: str | None = None
    body: Any = None
    """Parsed JSON, text, or for binary a short description with size and type."""
    truncated: bool = False
    error: str | None = None
    """For failures: a message written for the model (what went wrong and how to fix it)."""
    error_type: ErrorType | None = None
    duration_ms: float = 0.0
    bytes: int = 0
    """Bytes of the upstream body read."""
    approval_id: str | None = None
    """Set with `error_type == "approval_pending"`."""
    warning: str | None = None
    """A success with something to know: the body breaks the spec's output schema (`output_check: warn`)."""
    redacted_under: object = field(default=None, repr=False, compare=False)
    """The `Redactor.epoch` under which `body` was redacted (the executor redacts what it read while it parses
    it); the pipeline's redaction stage, with the same redactor and epoch, does not walk the body again. Not part
    of the result a door answers with."""
    body_json: builtins.bytes | None = field(default=None, repr=False, compare=False)
    """The body's JSON text as the api sent it, while `body` is exactly its parse (nothing redacted, cut or
    changed since): a door may write these bytes in its answer rather than write `body` again. Whoever changes
    `body` sets this to None (the redaction stage, the hooks' stage). Not part of the result a door answers with."""

    whole: Any = field(default=None, repr=False, compare=False)
    """With `whole_read`: what the cut `body` (`truncated`) was cut from, read to its end, parsed (or its text),
    redacted; the output check judges it instead of the cut, then drops it. Not part of the result a door answers
    with."""
    whole_read: bool = field(default=False, repr=False, compare=False)
    """Whether `whole` holds the whole body. False with `truncated`: the body was cut where the gateway stops
    reading (`gateway.http.reading.hard_cap`), its end never seen, so nothing judged it."""

    def to_dict(self) -> dict[str, Any]:
        shown = {
            "ok": self.ok,
            "status": self.status,
            "media_type": self.media_type,
            "body": self.body,
            "truncated": self.truncated,
            "error": self.error,
            "error_type": self.error_type,
            "duration_ms": round(self.duration_ms, 3),
            "bytes": self.bytes,
        }
        if self.approval_id:
            shown["approval_id"] = self.approval_id
        if self.warning:
            shown["warning"] = self.warning
        return shown

    @classmethod
    def failure(cls, error_type: ErrorType, error: str, **fields: Any) -> ToolResult:
        return cls(ok=False, error_type=error_type, error=error, **fields)


@dataclass(slots=True, kw_only=True)
class Message:
    """One message of a conversation, in no provider's format."""

    role: Role
    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    """For assistant messages."""
    tool_call_id: str | None = None
    """For tool messages: the call this answers."""
    name: str | None = None
    """For tool messages: the tool's name (Gemini and Ollama need it)."""
    is_error: bool = False
    """For tool messages: the result was an error (Anthropic's `is_error`)."""
    extras: dict[str, Any] = field(default_factory=dict)
    """Provider state to echo back: Anthropic thinking blocks, DeepSeek `reasoning_content`, ..."""
    kept_extras: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    """`extras` as the store keeps them, when they held one of the gateway's secrets: redacted (the reasoning, as the
    reply's text is). The run itself echoes `extras` as they came to the provider that wrote them (Anthropic refuses
    a thinking block whose text no longer matches its signature); None: the same as `extras`."""
