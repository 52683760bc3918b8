"""`POST /v1/chat/completions`: OpenAI's request in, the agent's loop run, OpenAI's answer (or SSE) out.

`model` names the agent, whose tools come from agents.yaml. A caller may bring `tools` of its own
(`gateway.server.caller_tools`): when the model calls one, the answer hands that call back as OpenAI would
(`tool_calls`, finish reason `tool_calls`) after the gateway ran its own calls of that turn, and the caller's
next request, with the `tool` results, goes on with the run (`gateway.server.handoff`). Otherwise the answer's
assistant message holds only the final text; the tool calls the gateway made travel in the `gateway` extension
beside `choices`
(`steps`, `pending_approvals`, `cut`). Streaming sends the text in `delta.content` and each step as
its own chunk with empty `choices` and a `gateway` field, which OpenAI clients skip over.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from .. import loop
from ..assembly import GatewayState, Generation
from ..config.model import AgentConfig
from ..errors import GatewayError
from ..kernel.caller import bind_caller, current_caller
from ..kernel.redaction import Redactor
from ..kernel.usage import Usage
from ..loop_types import EventHandler, LoopEvent, RunResult
from ..messages import Message, ToolCall
from ..providers.keys import provider_problem
from ..safety.client_shares import OverShare
from ..safety.shares import Held
from .api_errors import APIError, FastJSONResponse, api_error_from
from .api_schemas import CHAT_REQUEST_SCHEMA
from .auth import admit_agent
from .caller_tools import CallerToolOptions, check_caller_tools, parse_chat_tools
from .chat_request import parse_messages, parse_params
from .handoff import keep_turn, restore_turns, store_of
from .inert import Ignored, place_inert, read_inert
from .limits import check_counts, check_shape
from .routes import agent_of, read_json, state_of, toolset_of
from .self_call import self_call_problem
from .stopping import RUN_KEY, stopped_run_error

logger = logging.getLogger("gateway.server")



async def chat_completions(request: Request) -> Response:
    state = state_of(request)
    body = await read_json(request)
    if not isinstance(body, dict):
        raise APIError(400, f"The body must be a JSON object, not {type(body).__name__}.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise APIError(400, "`model` is required: the name of an agent (GET /v1/models lists them).", param="model")
    await admit_agent(request.scope, model)  # another client's agent: 403; charged to the agent's rate limit
    check_counts(body, "messages")
    tools = parse_chat_tools(body)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise APIError(400, "`stream` must be a boolean.", param="stream")
    messages = parse_messages(body.get("messages"))
    params = parse_params(body)
    inert = read_inert(body)
    # What the gateway's own OpenAPI document refuses and the checks above let through (a negative temperature, a
    # bad `stop` list, ...): the document and the door agree.
    await check_shape(CHAT_REQUEST_SCHEMA, body, document="ChatRequest")
    stream_options = body.get("stream_options") or {}
    if not isinstance(stream_options, dict):
        raise APIError(400, "`stream_options` must be an object.", param="stream_options")
    include_usage = stream and bool(stream_options.get("include_usage"))

    client = request.scope.get("gateway.client")
    if not stream:
        async with state.use() as generation:
            run = await _Run.prepared(state, generation, model, messages, params, tools, client=client, inert=inert,
                                      server=request.scope.get("server"))
            request.scope[RUN_KEY] = run  # a run the stopping instance cuts gets its row (`record_stopped`)
            try:
                result = await run.execute(generation)
            except Exception as exc:
                raise api_error_from(exc, secrets_redactor(generation).text) from None
        return FastJSONResponse(completion_body(run, result))
    # Checked before the stream starts, so these mistakes still get their status code.
    run = await _Run.prepared(state, state.current, model, messages, params, tools, client=client, inert=inert,
                              server=request.scope.get("server"))
    request.scope[RUN_KEY] = run
    return _EventStream(_stream_chunks(run, include_usage), run, media_type="text/event-stream",
                        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def chat_stream(state: GatewayState, model: str, messages: Any, *, client: str | None) -> Response:
    """The chat door's streamed answer for `model` on `messages` (OpenAI chat messages), for doors that speak
    no OpenAI request of their own (the console's chat): the same run, events and audit as `stream: true`."""
    check_counts({"messages": messages}, "messages")
    parsed = parse_messages(messages)
    run = await _Run.prepared(state, state.current, model, parsed, {}, CallerToolOptions(), client=client)
    return _EventStream(_stream_chunks(run, False), run, media_type="text/event-stream",
                        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


class _EventStream(StreamingResponse):
    """A streaming response that notices a client leaving even while it has nothing to send.

    Starlette (under ASGI 2.4 servers) learns of a disconnect only from a failing send; a run waiting on
    the model would go on, and call tools, for a client that is gone. Listening for `http.disconnect`
    cancels the stream, and with it the run, at once. The run's share of its client's runs is given back when
    the stream ends, however it ends (also when its body never started).
    """

    def __init__(self, content: AsyncIterator[bytes], run: _Run, **options: Any) -> None:
        super().__init__(content, **options)
        self.run = run

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:

                async def stream() -> None:
                    with contextlib.suppress(OSError):  # the client went away mid-send
                        await self.stream_response(send)
                    group.cancel_scope.cancel()

                group.start_soon(stream)
                await self.listen_for_disconnect(receive)
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):  # given back however the stream ended
                await self.run.release()


class _Run:
    """One chat request's run: its id, agent, input, and how it calls the loop."""

    def __init__(self, state: GatewayState, agent: AgentConfig, messages: list[Message], params: dict[str, Any],
                 *, client: Any = None, tools: CallerToolOptions | None = None, prefix: str = "chatcmpl-",
                 keep: bool = True) -> None:
        self.keep = keep
        """Keep a turn handed back to the caller's tools (Responses' `store: false` keeps nothing)."""
        self.state = state
        self.agent = agent
        self.messages = messages
        self.params = params
        self.client = client if isinstance(client, str) else None
        self.tools = tools or CallerToolOptions()
        self.id = f"{prefix}{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.ignored: list[Ignored] = list(self.tools.ignored)
        """What the request carried that had no effect (`gateway.ignored` in the answer)."""
        self.door_state: dict[str, Any] | None = None
        """What the door needs to answer the run if it pauses and is resumed (the Responses door's shape)."""
        self.share: Held | None = None
        """The run's place in its client's share of runs (`gateway.max_runs_per_client`), until it ends."""
        self.caller = current_caller()
        """Who asked (the request's caller: client, user, when it began), for a row written after it unwound."""
        self.recorded = False
        """Whether the chat's row is written (the run returned, or failed in its stream)."""

    @classmethod
    async def prepared(cls, state: GatewayState, generation: Generation, model: str, messages: list[Message],
                       params: dict[str, Any], tools: CallerToolOptions, *, client: Any = None,
                       prefix: str = "chatcmpl-", keep: bool = True, inert: dict[str, Any] | None = None,
                       ignored: list[Ignored] | None = None, server: tuple[str, int] | None = None) -> _Run:
        """The run of `model` (checked: agent, provider, caller tools), its handed-back turns put back. `inert`:
        the request's parameters that change nothing the gateway does (`gateway.server.inert`), passed to the
        provider where it takes them; `ignored`: what the door already knows had no effect; `server`: the address
        the request came to (the ASGI scope's), to refuse a provider that is this gateway itself."""
        agent = _checked_agent(generation, model, server)
        params = {**params, **check_caller_tools(tools, agent, toolset_of(generation, agent.name), generation)}
        provider = generation.runtime.manifest.providers.get(agent.provider)
        passed, unused = place_inert(inert or {}, provider.kind if provider is not None else "")
        caller = client if isinstance(client, str) else None
        messages = await restore_turns(store_of(state), messages, agent=agent.name, client=caller)
        run = cls(state, agent, messages, {**params, **passed}, client=client, tools=tools, prefix=prefix, keep=keep)
        run.ignored += [*(ignored or []), *unused]
        run.share = await take_run_share(state, generation, run.client)  # last: one refused above holds none
        return run

    async def record_stopped(self, sent: int) -> None:
        """The chat's row of a run the stopping instance cut (`stopping`): its loop never returned, so no other row
        says how it ended. Status `stopped`, with how many of its tool calls were sent (each has its own row, under
        the run's id: `cancelled` after or before sending, or its outcome)."""
        safety = self.state.safety
        if safety is None or self.recorded:
            return
        self.recorded = True
        caller = self.caller
        latency = (time.perf_counter() - caller.started) * 1000 if caller.started is not None else 0.0
        with bind_caller(client=caller.client, subject=caller.subject, started=caller.started):
            await safety.audit.record_chat(agent=self.agent.name, status="stopped", run_id=self.id,
                                           latency_ms=latency, client=self.client, error=stopped_run_error(sent))

    async def release(self) -> None:
        """The run is over (or never started): its client may start another."""
        share, self.share = self.share, None
        if share is not None:
            await share.release()

    @contextlib.asynccontextmanager
    async def reported(self) -> AsyncIterator[MemoryObjectReceiveStream[tuple[str, Any]]]:
        """Run in a task of its own and yield what it reports: ("event", LoopEvent)s, then ("done", RunResult) or
        ("error", APIError). The status of a streamed answer is 200 already, so a failure is audited here. Leaving
        the block early (the client went away) cancels the run and its tool calls."""
        send, receive = anyio.create_memory_object_stream[tuple[str, Any]](max_buffer_size=1024)

        async def on_event(event: LoopEvent) -> None:
            await send.send(("event", event))

        async def drive() -> None:
            async with send:
                try:
                    # Not `execute`: a streamed run holds its place until its stream ends (`_EventStream`), its
                    # last chunks and its stored answer among it.
                    async with self.state.use() as generation:
                        result = await self._execute(generation, on_event)
                    await send.send(("done", result))
                except Exception as exc:  # every failure goes in the stream, for the client's SDK to raise
                    error = api_error_from(exc, secrets_redactor(self.state.current).text)
                    safety = self.state.safety
                    if safety is not None:
                        self.recorded = True
                        try:
                            await safety.on_run_error(run_id=self.id, agent=self.agent, error=error)
                        except GatewayError:  # an audit that cannot write: the error still goes out
                            logger.error("the failed stream's audit row was not written")
                    await send.send(("error", error))

        task = asyncio.ensure_future(drive())
        try:
            async with receive:
                yield receive
        finally:
            if not task.done():
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def execute(self, generation: Generation) -> RunResult:
        """The run, unstreamed: its place given back when it ends, however it ends."""
        try:
            return await self._execute(generation, None)
        finally:
            await self.release()

    async def _execute(self, generation: Generation, on_event: EventHandler | None) -> RunResult:
        adapter = generation.adapter(self.agent.provider)
        # The run's tool calls name its agent and carry its id in the audit log (one run's steps).
        with bind_caller(agent=self.agent.name, run_id=self.id):
            result = await loop.run(
                self.agent,
                list(self.messages),
                adapter=adapter,
                toolset=toolset_of(generation, self.agent.name),
                invoke=generation.runner.for_agent(self.agent.name),
                params=self.params,
                on_event=on_event,
                stream=on_event is not None,
                caller_tools=self.tools.tools,
                tool_choice=self.tools.tool_choice,
            )
        if self.keep:
            await keep_turn(store_of(self.state), result, agent=self.agent.name, client=self.client)
        if result.state is not None and self.door_state is not None:
            result.state["door"] = self.door_state  # kept with the paused run: its resume answers as this door
        safety = self.state.safety
        if safety is not None:  # holds a paused run's approvals, records the chat
            self.recorded = True
            await safety.on_run_result(run_id=self.id, agent=self.agent, client=self.client, result=result)
        return result

    def chunk(self, choices: list[dict[str, Any]], **extra: Any) -> bytes:
        data = {"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                "model": self.agent.name, "choices": choices, **extra}
        return sse(data)


def _checked_agent(generation: Generation, model: str, server: tuple[str, int] | None = None) -> AgentConfig:
    """The agent `model` names, after saying what is missing before any call: an unknown agent (404), an
    unknown provider, a cloud provider without a key or a provider that is this gateway (503: this gateway's
    configuration, not an upstream)."""
    agent = agent_of(generation, model, code="model_not_found", param="model")
    manifest = generation.runtime.manifest
    problem = provider_problem(manifest, agent) or self_call_problem(manifest, agent, server)
    if problem is not None:
        raise APIError(503, problem, type="configuration_error", code="provider_not_configured")
    return agent


async def take_run_share(state: GatewayState, generation: Generation, client: str | None) -> Held:
    """A new run's place in its client's share (`gateway.max_runs_per_client`), held until the run ends; 429 with
    Retry-After when the client has its whole share in flight."""
    try:
        return await state.runs.take(client, generation.runtime.manifest.gateway.max_runs_per_client)
    except OverShare as exc:
        raise APIError(429, str(exc), code="too_many_runs",
                       headers={"Retry-After": exc.retry_after_header}) from None


def secrets_redactor(generation: Generation) -> Redactor:
    """A redactor of every secret in this generation's agents.yaml (provider keys, api tokens, client keys)."""
    redactor: Redactor = generation.memo("secrets_redactor", lambda: Redactor(generation.runtime.manifest.secrets()))
    return redactor


def completion_body(run: _Run, result: RunResult) -> dict[str, Any]:
    message = result.message
    answer: dict[str, Any] = {"role": "assistant", "content": message.content or "", "refusal": None}
    if result.handed_back:
        answer["content"] = message.content or None
        answer["tool_calls"] = handed_back_calls(result)
    return {
        "id": run.id,
        "object": "chat.completion",
        "created": run.created,
        "model": run.agent.name,
        "choices": [{
            "index": 0,
            "message": answer,
            "finish_reason": result.finish_reason,  # a pause or a cap is told in `gateway`
            "logprobs": None,
        }],
        "usage": usage_dict(result.usage),
        "gateway": gateway_extension(result, getattr(run, "ignored", ())),
    }


def handed_back_calls(result: RunResult) -> list[dict[str, Any]]:
    """The caller's own calls, as OpenAI's `tool_calls` (arguments: the model's own text)."""
    return [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": arguments_text(c)}}
            for c in result.handed_back]


def arguments_text(call: ToolCall) -> str:
    raw = call.raw_arguments
    return raw if isinstance(raw, str) else json.dumps(call.arguments if call.arguments is not None else raw or {})


def gateway_extension(result: RunResult, ignored: Iterable[Ignored] = ()) -> dict[str, Any]:
    """The answer's `gateway` object: the run's (steps, approvals, ...) and what the request carried in vain."""
    extension = result.gateway_extension()
    listed = [item.to_dict() for item in ignored]
    if listed:
        extension["ignored"] = listed
    return extension


def usage_dict(usage: Usage) -> dict[str, int]:
    return {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens}


async def _stream_chunks(run: _Run, include_usage: bool) -> AsyncIterator[bytes]:
    """The SSE body: role chunk, text deltas and step events as they happen, the final chunk, [DONE]."""
    turn_text: list[str] = []  # the text streamed of the model's latest turn (LLM call)
    turn = -1
    yield run.chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
    async with run.reported() as receive:
        async for kind, item in receive:
            if kind == "event":
                if item.type == "text":
                    if item.iteration != turn:
                        turn, turn_text = item.iteration, []
                    turn_text.append(item.text)
                chunk = _event_chunk(run, item)
                if chunk is not None:
                    yield chunk
            elif kind == "done":
                rest = _unstreamed_text(item.message.content or "", "".join(turn_text))
                if rest:  # text the run added after the model's (what waits for approval): as plain text too
                    yield run.chunk([{"index": 0, "delta": {"content": rest}, "finish_reason": None}])
                if item.handed_back:
                    calls = [{"index": i, **c} for i, c in enumerate(handed_back_calls(item))]
                    yield run.chunk([{"index": 0, "delta": {"tool_calls": calls}, "finish_reason": None}])
                yield run.chunk([{"index": 0, "delta": {}, "finish_reason": item.finish_reason}],
                                gateway=gateway_extension(item, run.ignored))
                if include_usage:
                    yield run.chunk([], usage=usage_dict(item.usage))
            else:
                yield sse(streamed_error(item))
    yield b"data: [DONE]\n\n"



def streamed_error(error: APIError) -> dict[str, Any]:
    """A failure after the stream's 200, as the error event OpenAI's own chat streams send (`{"error": {...}}`),
    which the openai SDK's stream reader raises as an `APIError` whose `body` is the `error` object alone: what the
    unstreamed answer has beside it (`gateway`: the steps and `may_have_run`, when tools were sent before the
    failure) goes inside it too, so the caller holding that exception can read what may have run."""
    body = error.body()
    extension = body.get("gateway")
    if extension is not None:
        body["error"] = {**body["error"], "gateway": extension}
    return body


def _unstreamed_text(final: str, streamed: str) -> str:
    """What the final answer's text holds beyond the deltas of the model's latest turn, already sent."""
    if final.startswith(streamed):
        return final[len(streamed):]
    return "\n\n" + final if streamed else final


def _event_chunk(run: _Run, event: LoopEvent) -> bytes | None:
    """Text goes to `delta.content`; a step or an approval to its own chunk, `choices` empty."""
    if event.type == "text":
        if not event.text:
            return None
        return run.chunk([{"index": 0, "delta": {"content": event.text}, "finish_reason": None}])
    payload: dict[str, Any] = {"event": event.type}
    if event.step is not None:
        payload["step"] = event.step.to_dict()
    if event.approvals:
        payload["pending_approvals"] = [p.to_dict() for p in event.approvals]
    return run.chunk([], gateway=payload)


def sse(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":"), default=str).encode() + b"\n\n"
