"""`POST /v1/responses` and `GET /v1/responses/{id}`: OpenAI's Responses API in front of the agent's loop.

`model` names the agent. The run is the chat door's (`gateway.server.chat`): the same loop, policies, approvals,
audit and caller tools; only the wire shapes differ (`gateway.server.responses_wire`). Answers are stored in the
gateway's store unless `store: false`, scoped to the caller's client key: `GET /v1/responses/{id}` and
`previous_response_id` find only the caller's own (404 for anyone else's, as for an id that never existed).
A parameter the gateway can't honour is refused with a 400 naming it, never dropped; one that changes nothing
the gateway does (`prompt_cache_key`, `include`, `client_metadata`, `reasoning.summary`: `gateway.server.inert`)
is passed to the provider where it takes it, else ignored and listed in `gateway.ignored`. The gateway's steps
travel in the `gateway` field beside `output`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..loop_types import LoopEvent, RunResult, message_from_dict
from ..messages import Message
from ..store import ResponseRecord, Store
from .api_errors import APIError, api_error_from
from .api_schemas import RESPONSES_REQUEST_SCHEMA
from .auth import admit_agent
from .caller_tools import parse_responses_tools
from .chat import _EventStream, _Run, gateway_extension, secrets_redactor
from .chat_request import parse_params
from .handoff import TURN_PREFIX, owner, store_of
from .inert import INERT_PARAMS, Ignored, read_inert
from .limits import check_conversation, check_counts, check_shape
from .responses_object import ResponseShape
from .responses_wire import EventWriter, StreamedOutput, output_items, parse_input
from .routes import read_json, state_of
from .run_answers import ANSWER_PREFIX
from .stopping import RUN_KEY, STREAM_TAIL_KEY, Sent, stopped_message

logger = logging.getLogger("gateway.server")

# Request fields the door reads (each honoured), and those accepted only with their default value.
_READ = frozenset({"model", "input", "instructions", "stream", "store", "previous_response_id", "tools", "tool_choice",
                   "parallel_tool_calls", "temperature", "top_p", "max_output_tokens", "metadata", "user", "text",
                   "reasoning", "stream_options"}) | INERT_PARAMS
_DEFAULTS: dict[str, tuple[Any, ...]] = {"truncation": ("disabled",), "background": (False,),
                                         "service_tier": ("auto", "default"), "include": ([],)}


async def create_response(request: Request) -> Response:
    state = state_of(request)
    body = await read_json(request)
    if not isinstance(body, dict):
        raise APIError(400, f"The body must be a JSON object, not {type(body).__name__}.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise APIError(400, "`model` is required: the name of an agent (GET /v1/models lists them).", param="model")
    await admit_agent(request.scope, model)  # another client's agent: 403; charged to the agent's rate limit
    check_counts(body, "input")
    ignored = _refuse_unhonoured(body)
    inert = read_inert(body)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise APIError(400, "`stream` must be a boolean.", param="stream")
    keep = body.get("store", True)
    if not isinstance(keep, bool):
        raise APIError(400, "`store` must be a boolean.", param="store")
    tools = parse_responses_tools(body)
    params = parse_params(_chat_params(body))
    # What the gateway's own OpenAPI document refuses and the checks above let through: the two agree.
    await check_shape(RESPONSES_REQUEST_SCHEMA, body, document="ResponsesRequest")
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise APIError(400, "`instructions` must be a string.", param="instructions")
    client = request.scope.get("gateway.client")
    caller = client if isinstance(client, str) else None
    store = store_of(state)
    history = await _history(store, body.get("previous_response_id"), model, caller)
    given = [Message(role="system", content=instructions)] if instructions else []
    given += history + parse_input(body.get("input"))
    check_conversation(len(given), "previous_response_id" if history else "input")
    answer = _Answer(store, body, keep=keep, instructions=bool(instructions))
    if not stream:
        async with state.use() as generation:
            run = await _Run.prepared(state, generation, model, given, params, tools, client=client, prefix="resp_",
                                      inert=inert, ignored=ignored, keep=keep,
                                      server=request.scope.get("server"))
            request.scope[RUN_KEY] = run  # a run the stopping instance cuts gets its row (`record_stopped`)
            answer.shape(run)  # before the run: a pause keeps it
            try:
                result = await run.execute(generation)
            except Exception as exc:
                raise api_error_from(exc, secrets_redactor(generation).text) from None
        output = output_items(result, answer.first_new(run), namespaces(run))
        return JSONResponse(await answer.finish(run, result, output))
    run = await _Run.prepared(state, state.current, model, given, params, tools, client=client, prefix="resp_",
                              inert=inert, ignored=ignored, keep=keep, server=request.scope.get("server"))
    request.scope[RUN_KEY] = run
    answer.shape(run)
    write = EventWriter()
    streamed = StreamedOutput(write)
    # A stream the stopping instance cuts ends with the Responses API's own failure (`stopping`, `cut_doors`).
    request.scope[STREAM_TAIL_KEY] = functools.partial(cut_tail, write, streamed, answer, run)
    return _EventStream(_stream_events(run, answer, write, streamed), run, media_type="text/event-stream",
                        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def get_response(request: Request) -> Response:
    client = request.scope.get("gateway.client")
    record = await _own_record(store_of(state_of(request)), request.path_params["id"],
                               client if isinstance(client, str) else None)
    return JSONResponse(record.body)


def namespaces(run: _Run) -> dict[str, str]:
    """The namespace of each caller tool that came in a `namespace` tool, by name (its calls go back with it)."""
    return {tool.name: tool.namespace for tool in run.tools.tools if tool.namespace}


def _refuse_unhonoured(body: dict[str, Any]) -> list[Ignored]:
    """A 400 for what the gateway can't honour; what it leaves aside (and says so) is returned."""
    for key, value in body.items():
        if key in _READ or value is None or value in _DEFAULTS.get(key, ()):
            continue
        raise APIError(400, f"`{key}` is not supported by the gateway's Responses API (it would be ignored); "
                            f"leave it out.", param=key, code="unsupported_parameter")
    text = body.get("text") or {}
    if not isinstance(text, dict) or set(text) - {"format", "verbosity"} or text.get("verbosity") not in (None,
                                                                                                        "medium"):
        raise APIError(400, "`text` may only carry `format` here.", param="text", code="unsupported_parameter")
    reasoning = body.get("reasoning") or {}
    if not isinstance(reasoning, dict) or any(v is not None for k, v in reasoning.items()
                                              if k not in ("effort", "summary")):
        raise APIError(400, "`reasoning` may only carry `effort` (and `summary`, which is ignored) here.",
                       param="reasoning", code="unsupported_parameter")
    summary = reasoning.get("summary")
    if summary not in (None, "none"):
        return [Ignored("reasoning.summary", "the gateway hands back no reasoning summaries")]
    return []


def _chat_params(body: dict[str, Any]) -> dict[str, Any]:
    """The Responses request's sampling fields in the chat terms the loop passes to providers."""
    params = {"temperature": body.get("temperature"), "top_p": body.get("top_p"),
              "max_tokens": body.get("max_output_tokens"), "user": body.get("user"),
              "reasoning_effort": (body.get("reasoning") or {}).get("effort")}
    text_format = (body.get("text") or {}).get("format")
    if isinstance(text_format, dict) and text_format.get("type") == "json_schema":
        schema = {k: v for k, v in text_format.items() if k != "type"}
        params["response_format"] = {"type": "json_schema", "json_schema": schema}
    elif isinstance(text_format, dict) and text_format.get("type") == "json_object":
        params["response_format"] = {"type": "json_object"}
    elif text_format is not None and (not isinstance(text_format, dict) or text_format.get("type") != "text"):
        raise APIError(400, "`text.format` must be text, json_object or json_schema.", param="text.format")
    return params


async def _own_record(store: Store, response_id: str, client: str | None) -> ResponseRecord:
    kept_elsewhere = response_id.startswith((TURN_PREFIX, ANSWER_PREFIX))  # handed-back turns, resumed runs' answers
    record = None if kept_elsewhere else await store.get_response(response_id)
    if record is None or record.client != owner(client):  # someone else's is as unknown as one that never was
        raise APIError(404, f"No response with id {response_id!r} is kept for this key (one made with `store: false`, "
                            "another key's, one older than gateway.conversation_retention_days, or one of this "
                            "key's oldest, removed past gateway.max_stored_conversations_per_client, is not).",
                       code="response_not_found")
    return record


async def _history(store: Store, previous: Any, model: str, client: str | None) -> list[Message]:
    if previous is None:
        return []
    if not isinstance(previous, str) or not previous:
        raise APIError(400, "`previous_response_id` must be a response id.", param="previous_response_id")
    record = await _own_record(store, previous, client)
    if record.agent != model:
        raise APIError(400, f"Response {previous!r} was answered by agent {record.agent!r}, not {model!r}.",
                       param="previous_response_id")
    waiting = [p.get("id") for p in (record.body.get("gateway") or {}).get("pending_approvals") or []]
    if waiting:  # its last turn's calls have no results yet: the decision's answer continues it
        raise APIError(409, f"Response {previous!r} waits for approval {', '.join(map(str, waiting))}: decide it "
                            "(POST /approvals/{id}); the decision's answer is this response, finished, and the one to "
                            "continue from.", param="previous_response_id", code="response_waiting")
    return [message_from_dict(m) for m in record.messages]


class _Answer:
    """The Response object of one run, and keeping it in the store (`gateway.server.responses_object`)."""

    def __init__(self, store: Store, request: dict[str, Any], *, keep: bool, instructions: bool) -> None:
        self.store = store
        self.request = request
        self.keep = keep
        self.instructions = instructions
        self._shape: ResponseShape | None = None

    def shape(self, run: _Run) -> ResponseShape:
        """What the run's Response needs from the request; a paused run keeps it (its resume answers with it)."""
        if self._shape is None:
            skip = (1 if run.agent.instructions else 0) + (1 if self.instructions else 0)
            self._shape = ResponseShape.of(
                self.request, keep=self.keep, created=run.created, first_new=self.first_new(run), skip=skip,
                namespaces=namespaces(run), ignored=[item.to_dict() for item in run.ignored])
            run.door_state = self._shape.to_state()
        return self._shape

    def first_new(self, run: _Run) -> int:
        """Where the run's own messages begin in its result (after the agent's instructions and the input)."""
        return len(run.messages) + (1 if run.agent.instructions else 0)

    def body(self, run: _Run, *, status: str, output: list[dict[str, Any]], error: dict[str, Any] | None = None) \
            -> dict[str, Any]:
        return self.shape(run).body(run.id, run.agent.name, status=status, output=output, error=error)

    async def finish(self, run: _Run, result: RunResult, output: list[dict[str, Any]]) -> dict[str, Any]:
        shape = self.shape(run)
        body = shape.finished(run.id, run.agent.name, result, gateway_extension(result, run.ignored), output)
        await shape.keep_answer(self.store, run.id, run.agent.name, owner(run.client), body, result)
        return body


async def _stream_events(run: _Run, answer: _Answer, write: EventWriter,
                         output: StreamedOutput) -> AsyncIterator[bytes]:
    """The Responses event stream: lifecycle events, output items as the run says and hands back, steps."""
    started = answer.body(run, status="in_progress", output=[])
    yield write("response.created", response=started)
    yield write("response.in_progress", response=started)
    async with run.reported() as receive:
        async for kind, item in receive:
            if kind == "event":
                for chunk in _event_chunks(write, output, item):
                    yield chunk
            elif kind == "done":
                for chunk in output.calls(item.handed_back, namespaces(run)):
                    yield chunk
                final = await answer.finish(run, item, output.items)
                done = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
                yield write(done, response=final)
            else:
                for chunk in output.close():
                    yield chunk
                # Response.error.code is one of OpenAI's own codes; the gateway's code goes in the message.
                code = "rate_limit_exceeded" if item.status == 429 else "server_error"
                error = {"code": code, "message": f"{item.message} ({item.code})"}
                yield write("response.failed", response=answer.body(run, status="failed", output=output.items,
                                                                    error=error))


def cut_tail(write: EventWriter, output: StreamedOutput, answer: _Answer, run: _Run, sent: Sent) -> bytes:
    """The last events of a stream the stopping instance cut: its open items closed, then `response.failed`, whose
    Response says why in its `error` (`server_error`, one of OpenAI's codes; the gateway's code in the message, as
    every streamed failure here) and whether the call was sent in its `gateway` field."""
    chunks = output.close()
    error = {"code": "server_error", "message": f"{stopped_message(sent)} (instance_stopped)"}
    response = answer.body(run, status="failed", output=output.items, error=error)
    response["gateway"] = {**(response.get("gateway") or {}), "code": "instance_stopped", "sent": sent,
                           "may_have_run": sent == "sent"}
    return b"".join([*chunks, write("response.failed", response=response)])


def _event_chunks(write: EventWriter, output: StreamedOutput, event: LoopEvent) -> list[bytes]:
    if event.type == "text":
        return output.text(event.text, event.iteration) if event.text else []
    data: dict[str, Any] = {}
    if event.step is not None:
        data["step"] = event.step.to_dict()
    if event.approvals:
        data["pending_approvals"] = [p.to_dict() for p in event.approvals]
    return [write(f"gateway.{event.type}", **data)]
