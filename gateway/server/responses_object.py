"""The Response object of a run on `POST /v1/responses`: when it is first answered, and when its approvals resume it.

A run started on the Responses door is answered, stored and continued as a Responses run to the end: what its
answer needs from the request (the fields a Response echoes, `store`, where the run's own messages begin, the
namespaces of the caller's tools) is its `ResponseShape`, kept in a paused run's state (`door`), so the decision
that resumes it answers a Response (not a chat completion), replaces the stored one (the waiting text goes, the
approved call's result is in the conversation `previous_response_id` continues) and keeps its id.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ..loop_types import RunResult, message_to_dict
from ..store import ResponseRecord, Store
from ..store.kept_conversations import keep_conversation
from .responses_wire import output_items, status_of, usage_object

ECHOED = ("instructions", "metadata", "parallel_tool_calls", "tool_choice", "tools", "temperature", "top_p",
          "max_output_tokens", "previous_response_id", "text", "user")
"""Request fields a Response object repeats."""
DOOR = "responses"


@dataclass(slots=True, kw_only=True)
class ResponseShape:
    """What a run's Response object needs from its request."""

    request: dict[str, Any]
    """The request's `ECHOED` fields."""
    keep: bool
    """`store`: the answer is kept for `GET /v1/responses/{id}` and `previous_response_id`."""
    created: int
    first_new: int
    """Where the run's own messages begin in its result (after the instructions and the input)."""
    skip: int
    """System messages at the start of the result that are not kept (the agent's and the request's instructions)."""
    namespaces: dict[str, str] = field(default_factory=dict)
    """The `namespace` of each caller function that came in one, by name."""
    ignored: list[dict[str, str]] = field(default_factory=list)
    """`gateway.ignored` of the request."""

    @classmethod
    def of(cls, request: dict[str, Any], **facts: Any) -> ResponseShape:
        return cls(request={key: request.get(key) for key in ECHOED if request.get(key) is not None}, **facts)

    def to_state(self) -> dict[str, Any]:
        """The shape as a paused run keeps it (JSON). Its fields as they are, not `asdict`'s deep copy: that copied
        the request's echo, caller tools and their schemas, a level of Python recursion at a time on the event loop
        before every run (2 s of every other request's time for 512 tools in a 2 MB body; a RecursionError for a
        schema 500 levels deep: redteam44). Written as JSON when a run pauses; nothing changes them before."""
        return {"kind": DOOR, **{f.name: getattr(self, f.name) for f in fields(self)}}

    @classmethod
    def from_state(cls, state: Any) -> ResponseShape | None:
        """The shape a paused run kept, or None for a run of another door."""
        if not isinstance(state, dict) or state.get("kind") != DOOR:
            return None
        return cls(**{key: value for key, value in state.items() if key != "kind"})

    def body(self, run_id: str, agent: str, *, status: str, output: list[dict[str, Any]],
             result: RunResult | None = None, gateway: dict[str, Any] | None = None,
             incomplete: dict[str, Any] | None = None, error: dict[str, Any] | None = None) -> dict[str, Any]:
        """The Response object; `gateway`: its `gateway` field (the run's steps, approvals, ...)."""
        request = self.request
        body: dict[str, Any] = {
            "id": run_id, "object": "response", "created_at": self.created, "status": status, "model": agent,
            "output": output, "error": error, "incomplete_details": incomplete,
            "instructions": request.get("instructions"), "metadata": request.get("metadata") or {},
            "parallel_tool_calls": request.get("parallel_tool_calls", True) is not False,
            "tool_choice": request.get("tool_choice") or "auto", "tools": list(request.get("tools") or []),
            "temperature": request.get("temperature"), "top_p": request.get("top_p"),
            "max_output_tokens": request.get("max_output_tokens"),
            "previous_response_id": request.get("previous_response_id"), "store": self.keep,
            "text": {"format": (request.get("text") or {}).get("format") or {"type": "text"}},
            "truncation": "disabled", "user": request.get("user"),
            "usage": usage_object(result.usage) if result is not None else None,
        }
        if gateway is not None:
            body["gateway"] = gateway
        return body

    def finished(self, run_id: str, agent: str, result: RunResult, gateway: dict[str, Any],
                 output: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The Response of a run that ended (or paused again); `output`: as streamed, else made from the result,
        with item ids of the run's own (so the same result gives the same object twice)."""
        if output is None:
            output = output_items(result, self.first_new, self.namespaces, ids=f"{run_id}_")
        status, incomplete = status_of(result)
        return self.body(run_id, agent, status=status, output=output, result=result, gateway=gateway,
                         incomplete=incomplete)

    def resumed(self, run_id: str, agent: str, result: RunResult) -> dict[str, Any]:
        """The Response of a run its approvals resumed: the run's gateway object with the request's `ignored`."""
        gateway = result.gateway_extension()
        if self.ignored:
            gateway["ignored"] = self.ignored
        return self.finished(run_id, agent, result, gateway)

    async def keep_answer(self, store: Store, run_id: str, agent: str, client: str | None, body: dict[str, Any],
                          result: RunResult) -> None:
        """Store (or replace) the Response and its conversation, unless the request said `store: false`."""
        if not self.keep:
            return
        messages = [message_to_dict(m) for m in result.messages[self.skip:]]
        await keep_conversation(store, ResponseRecord(id=run_id, agent=agent, client=client, body=body,
                                                      messages=messages))
