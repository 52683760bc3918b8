"""One agent's tools as an MCP server over stdio (`gateway mcp AGENT`), for desktop clients."""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from ...assembly import GatewayState
from ...jsonwire import holds_lone_surrogate
from ...kernel.caller import current_caller, stdio_client
from .found import STDIO_SESSION
from .listing import checked_agent, era_of
from .server import MessageFacts, build_mcp_server

LONE_SURROGATE = ("The request holds a lone surrogate (an unpaired \\ud800-\\udfff escape), which is not text; send "
                  "valid Unicode.")


async def serve_stdio(state: GatewayState, agent: str) -> None:
    """Serve until the client closes stdin."""
    checked_agent(state.current, agent)
    # One process serves one client over one connection: the session a 2025 client's searches add tools to
    # (a 2026-07-28 client hears of changes only on a subscription, which the gateway does not serve).
    def facts_of(ctx: Any) -> MessageFacts:  # the agent of the command line, the process's caller, no client key
        caller = current_caller()
        return MessageFacts(agent, client_of(ctx), STDIO_SESSION if era_of(ctx.protocol_version) == "legacy" else None,
                            caller.subject, caller.token)

    server = build_mcp_server(state, facts_of)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(RefusingLoneSurrogates(read_stream, write_stream), write_stream,
                         server.create_initialization_options())


def client_of(ctx: Any) -> str:
    """The audit's client of a stdio message: `stdio`, with the name the MCP client declared (`clientInfo.name` of
    its `initialize`, the SDK's `ServerSession.client_params`), as `gateway call` has `cli` (`kernel.caller`)."""
    params = ctx.session.client_params
    return stdio_client(params.client_info.name if params is not None else None)


class RefusingLoneSurrogates:
    """The stdio transport's incoming messages, less the requests holding a lone surrogate: each is answered with an
    invalid-params error for its id, as the HTTP door refuses such a body. The SDK's JSON parser refuses the line
    (`"\\ud800"` is valid JSON but no text) and hands the server an exception without the request's id, so the
    client waited for ever for that answer."""

    def __init__(self, inner: Any, write_stream: Any) -> None:
        """`inner`: the transport's read stream; `write_stream`: where the refusals go (the transport's one writer)."""
        self._inner = inner
        self._write = write_stream

    @property
    def last_context(self) -> Any:
        """The sender's context of the last message, as the SDK's own stream keeps it."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item: SessionMessage | Exception = await self._inner.receive()
            request_id = _refused_request(item)
            if request_id is None:
                return item
            error = types.ErrorData(code=types.INVALID_PARAMS, message=LONE_SURROGATE)
            await self._write.send(SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> RefusingLoneSurrogates:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> RefusingLoneSurrogates:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None,
                        exc_tb: TracebackType | None) -> None:
        await self.aclose()


def _refused_request(item: object) -> str | int | None:
    """The id of the request the transport could not parse because it holds a lone surrogate; None for anything
    else (a message, another error, a notification, an id that is itself no text)."""
    if not isinstance(item, ValidationError):
        return None
    errors = item.errors()
    line = errors[0].get("input") if errors and errors[0]["type"] == "json_invalid" else None
    if not isinstance(line, str):
        return None
    try:
        message = json.loads(line)  # Python's parser takes lone surrogates
    except ValueError:
        return None
    if not isinstance(message, dict) or "method" not in message or not holds_lone_surrogate(message):
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int) or holds_lone_surrogate(request_id):
        return None
    return request_id
