"""The direct-call door: `POST /agents/{agent}/tools/{tool}`, one tool call outside any chat.

The body is the arguments object; the answer is the `ToolResult`: 200 when the call succeeded, otherwise the
OpenAI-shaped error with the status of the failure (422 invalid arguments, 502 upstream, 504 timeout, ...) and
the full `ToolResult` beside it under `result`, so a caller sees both a standard error and every detail.

Every tool call of a script takes this door, so it is a small ASGI app (`DirectCall`) mounted as the endpoint of
an ordinary Starlette `Route` (the router matches it, sets its path parameters and the route in the scope, and
its other methods get 405): it admits the routed agent itself (what `AgentGate` does on the other routes), reads
the body straight from `receive` and writes its answer in two messages, making no `Request` or `Response` object
on the way.
"""

from __future__ import annotations

import random
from typing import Any

import orjson
from starlette.types import Message, Receive, Scope, Send

from ..assembly import GatewayState, Generation
from ..catalog import AgentTool
from ..errors import AuditUnavailable
from ..execution.runner import CallPlan
from ..kernel.caller import bind_caller, current_caller
from ..kernel.calls import Door
from ..messages import ToolCall, ToolResult
from ..safety.audit import watch_sends
from .api_errors import APIError, json_bytes, status_for_result
from .auth import AGENT, Access, admit_agent
from .routes import known_agent, parse_json_body
from .stopping import CUT_KEY, SENDS_KEY, AnswerCut

PATH = "/agents/{agent}/tools/{tool}"
_JSON_HEADER = (b"content-type", b"application/json")


class DirectCall:
    """The door, as an ASGI app; its path parameters come in `scope["path_params"]`."""

    __slots__ = ("state", "answer_cut")

    def __init__(self, state: GatewayState, answer_cut: AnswerCut | None = None) -> None:
        """Parameters: state: the app's `GatewayState` (given once: reading it through `app.state` steps through
        Starlette's `State.__getattr__` in Python on every call); answer_cut: the answer to a call the stopping
        instance cuts (`cut_doors.answer_cut`; put in the scope for the request envelope, `stopping`)."""
        self.state = state
        self.answer_cut = answer_cut

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # One frame from the route to the pipeline (every call of a script waits in it): its outcomes other than
        # 200 and 202 are raised as the `APIError` to answer.
        scope[CUT_KEY] = self.answer_cut
        try:
            params = scope["path_params"]
            agent, name = params["agent"], params["tool"]
            # The routed agent admitted here, as `AgentGate` admits it on other routes, without the gate's frame
            # around the call (the caller is bound to the plan's agent below).
            access = scope.get("gateway.access")
            if not (isinstance(access, Access) and access.checks_nothing):
                await admit_agent(scope, agent)
            scope[AGENT] = agent
            async with self.state.use() as generation:
                plan = _door_plans(generation).get((agent, name)) or _plan(generation, agent, name)
                message = await receive()
                if message["type"] == "http.request" and not message.get("more_body", False):
                    body = message.get("body", b"")  # the usual: the whole body in one message, read in this frame
                else:
                    body = await _rest_of_body(message, receive)
                    if body is None:
                        return  # the client left before its body arrived: nobody to answer
                client = scope.get("gateway.client")
                try:
                    arguments = parse_json_body(body, default={}, text_status=422)
                    if not isinstance(arguments, dict):
                        raise APIError(400, "The body must be the arguments as a JSON object, "
                                            f"not {type(arguments).__name__}.")
                except APIError as unread:  # refused as before, and recorded as a call the validation refused
                    await refuse_unread(plan, body.decode(errors="backslashreplace"), unread.message, door="direct",
                                        client=client if isinstance(client, str) else None)
                    raise
                try:
                    # The call runs as the caller the auth layer bound (the same `gateway.client`); its agent and
                    # client travel in the plan's `Invocation`, which every stage reads: no narrowed caller is bound
                    # for a call that nothing reads it in.
                    # Whether it was sent is the call's own (`Invocation.sent`, for `stopping`: a cut call is told);
                    # a delegation's calls are counted as they are sent (`watch_sends`).
                    client_name = client if isinstance(client, str) else None
                    invocation = plan.invocation(arguments, door="direct", client=client_name)
                    chain = plan.chain
                    if invocation is not None and chain is not None:
                        scope[SENDS_KEY] = invocation
                        result = await chain(invocation)
                    else:
                        with watch_sends() as sends:
                            scope[SENDS_KEY] = sends
                            result = await plan.start(arguments, door="direct", client=client_name)
                except AuditUnavailable as exc:
                    raise _unavailable(exc) from None
                status = status_for_result(result)
                if status not in (200, 202):  # a call that ran (200) or waits for approval (202) is answered below
                    raise _failed(result, status)
                # Answered while the generation is still held: its release is not on the caller's wait.
                content = _answer(result)
                await send({"type": "http.response.start", "status": status,
                            "headers": [(b"content-length", b"%d" % len(content)), _JSON_HEADER]})
                await send({"type": "http.response.body", "body": content})
        except APIError as error:
            await error.response()(scope, receive, send)


async def refuse_unread(plan: CallPlan, raw: Any, why: str, *, door: Door, client: str | None) -> None:
    """A call whose arguments could not be read (`raw`: not JSON, or not an object), recorded as any refused call
    is (`ToolRunner.refuse`: its audit row with the text redacted, its span and metrics); the door answers its
    own error. 503 (`APIError`) when its row cannot be written."""
    call = ToolCall(id=f"direct_{random.getrandbits(64):016x}", name=plan.agent_tool.name, raw_arguments=raw,
                    parse_error=why)
    try:
        with bind_caller(client=client, agent=plan.agent):
            await plan.runner.refuse(plan.agent_tool, call, ToolResult.failure("invalid_arguments", why),
                                     door=door, client=client)
    except AuditUnavailable as exc:
        raise _unavailable(exc) from None


def _answer(result: ToolResult) -> bytes:
    """The `ToolResult` as the door's JSON answer. A body that is exactly the parse of the api's JSON text (nothing
    redacted, cut or changed: `ToolResult.body_json`) goes out as that text, not written again from its parse (the
    output check and the redaction judged the parse; a reader of the text gets the same values)."""
    shown = result.to_dict()
    text = result.body_json
    if text is not None:
        shown["body"] = orjson.Fragment(text)
        try:
            return orjson.dumps(shown)
        except TypeError:  # something else orjson refuses (an error text's lone surrogate): the general way
            shown["body"] = result.body
    return json_bytes(shown)


def _failed(result: ToolResult, status: int) -> APIError:
    """The answer to a call that failed: the OpenAI-shaped error with the whole result beside it."""
    # A tool bucket's refusal (ChargeToolBucket) and an open breaker's (`circuit_open`) leave their Retry-After here
    notes = current_caller().notes
    waits = status == 429 or result.error_type == "circuit_open"
    retry_after = notes.get("retry_after") if waits and notes is not None else None
    return APIError(status, result.error or f"The call failed ({result.error_type}).",
                    code=result.error_type or None, extra={"result": result.to_dict()},
                    headers={"Retry-After": retry_after} if retry_after else None)


_DOOR_PLANS = "direct_call.plans"


def _door_plans(generation: Generation) -> dict[tuple[str, str], CallPlan]:
    """(agent, tool name) -> how the agent's tool is called (`CallPlan`), for the pairs the doors have been asked
    for: the agent checked, its toolset searched and the tool's chain of stages found once per generation, not on
    every call (only pairs that exist are kept)."""
    plans: dict[tuple[str, str], CallPlan] = generation.memo(_DOOR_PLANS, dict)
    return plans


def door_plan(generation: Generation, agent: str, name: str) -> CallPlan | None:
    """The plan of a known agent's tool of that name, remembered for the generation; None when it has none (the
    MCP door then looks for its own tools: a script's, tool search's)."""
    plan = _door_plans(generation).get((agent, name))
    if plan is None:
        agent_tool = generation.toolset(agent).get(name)
        if agent_tool is None:
            return None
        plan = _door_plans(generation)[(agent, name)] = generation.runner.for_agent(agent).plan(agent_tool)
    return plan


def _plan(generation: Generation, agent: str, name: str) -> CallPlan:
    """`door_plan`, with a 404 for an unknown agent or tool."""
    plan = door_plan(generation, known_agent(generation, agent), name)
    if plan is None:
        raise APIError(404, f"Agent {agent!r} has no tool {name!r}; GET /agents/{agent}/tools lists them.",
                       code="unknown_tool")
    return plan


async def _rest_of_body(message: Message, receive: Receive) -> bytes | None:
    """The whole request body from its first message on, when that one is not all of it (the door reads a body of one
    message itself: no coroutine of this function's made for it); None when the client disconnected first."""
    if message["type"] != "http.request":
        return None
    chunks = [message.get("body", b"")]
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def run_direct_call(state: GatewayState, generation: Generation, agent: str, agent_tool: AgentTool,
                          arguments: dict[str, Any], *, client: str | None = None, door: Door = "direct") -> ToolResult:
    """One call outside any chat (the HTTP door, MCP over HTTP and stdio) through the generation's call pipeline.

    A call whose audit row cannot be written raises `APIError` 503 (no answer without its row)."""
    return await run_planned(generation.runner.for_agent(agent).plan(agent_tool), arguments, client=client,
                             door=door)


async def run_planned(plan: CallPlan, arguments: dict[str, Any], *, client: str | None = None,
                      door: Door = "direct") -> ToolResult:
    """`run_direct_call` of a tool whose plan the door keeps (the MCP doors; `DirectCall` starts its plan itself, in
    its one frame)."""
    try:
        caller = current_caller()
        if caller.client == client and caller.agent == plan.agent:  # already bound by the request (MCP in its task)
            return await plan.start(arguments, door=door, client=client)
        with bind_caller(client=client, agent=plan.agent):  # MCP handlers run outside the request's context
            return await plan.start(arguments, door=door, client=client)
    except AuditUnavailable as exc:
        raise _unavailable(exc) from None


def _unavailable(exc: AuditUnavailable) -> APIError:
    """No answer without the call's audit row: 503."""
    return APIError(503, str(exc), code="audit_unavailable")
