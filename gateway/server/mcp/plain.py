"""A plain `tools/call` the door answers itself, answered by a server middleware without the kernel's three
pydantic passes over what the door already knows the shape of.

The SDK's kernel (`ServerRunner.on_request`) runs, for every `tools/call`, three validations around the handler:
the request's surface (`validate_client_request`: the params as the version's `CallToolRequest`, every argument
value walked and copied), the same params again as the handler's `CallToolRequestParams`, and the result's surface
(`serialize_server_result`). `Server.middleware` is the SDK's public list of server middleware, and the kernel's
documented rule is that a middleware that answers without `call_next` returns its own well-formed result. `PlainCalls`
is the innermost one: it answers a `tools/call` itself when every rule those three passes hold is plain to see, and
hands everything else to `call_next` (the kernel's own path, unchanged):

- the request: a 2025 session's (a handshake protocol version), params a dict of `name` (a string) and, optionally,
  `arguments` (an object, or null) and nothing else (so no `_meta`, no task), from a client whose `initialize` the
  kernel recorded (`client_params`: its gate for every method but `ping`), and no cache hint configured for the
  method. Such params pass the version's surface and the handler's model by construction: those models' only rules
  for them are the types checked here (`CallToolRequestParams`: `name: str`, `arguments: dict[str, Any] | None`);
- the door writes the answer (the request carries a `ResultAside`, see `results`): the handler's result is then
  `{"content": [], "isError": <bool>, "resultType": "complete"}` (the text and structured content travel aside),
  whose surface dump is asked of the SDK's own `serialize_server_result` once per protocol version and flag and
  copied per call; any other result is dumped by that function per call, as the kernel does.

Over stdio, through the SDK's transport, in the stateless era or for a request that is not plain, nothing changes.
Tests (tests/server/test_mcp_plain.py) hold the rule's answers against the kernel's for the same requests.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeGuard

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types import methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError

logger = logging.getLogger("gateway.mcp")

Context = ServerRequestContext[Any, Any]
Answer = Callable[[Context, Any, str, dict[str, Any] | None], Awaitable[dict[str, Any]]]
"""The call handler's work, given the message's facts, the tool's name and its arguments (`build_mcp_server`'s)."""

_PLAIN_KEYS = frozenset({"name", "arguments"})
_METHOD = "tools/call"
_ASIDE_OK = {"content": [], "isError": False, "resultType": "complete"}
_ASIDE_ERROR = {"content": [], "isError": True, "resultType": "complete"}
"""The handler's result when its text and structured content went aside (see `results.wire_result`)."""


class PlainCalls:
    """The server middleware that answers a plain `tools/call` (see the module's docstring)."""

    def __init__(self, server: Server[Any], facts_of: Callable[[Context], Any], answer: Answer) -> None:
        """Parameters: server: the server whose middleware this is (its cache hints); facts_of: whom and what a
        message is for (`MessageFacts`: the door's `aside`); answer: the call handler's work."""
        self.server = server
        self.facts_of = facts_of
        self.answer = answer
        self._dumps: dict[tuple[str, bool], dict[str, Any]] = {}
        """The SDK's surface dump of a result whose text and structured content went aside, by version and flag."""

    async def __call__(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        params = ctx.params
        if ctx.method != _METHOD or ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS or \
                not plain_params(params):
            return await call_next(ctx)
        facts = self.facts_of(ctx)
        if facts.aside is None or ctx.session.client_params is None or _METHOD in self.server.cache_hints:
            return await call_next(ctx)
        return self.wire(ctx.protocol_version, await self.answer(ctx, facts, params["name"], params.get("arguments")))

    def wire(self, version: str, result: dict[str, Any]) -> dict[str, Any]:
        """`result`'s wire form at `version`, as the kernel's result check gives it."""
        if result == _ASIDE_OK or result == _ASIDE_ERROR:  # (a dict's comparison, in C)
            is_error = result["isError"] is True
            dump = self._dumps.get((version, is_error))
            if dump is None:
                dump = self._dumps[(version, is_error)] = methods.serialize_server_result(
                    _METHOD, version, _ASIDE_ERROR if is_error else _ASIDE_OK)
            return {**dump, "content": []}  # (a list of its own: the door puts the text content in it)
        try:
            return methods.serialize_server_result(_METHOD, version, result)
        except ValidationError:  # the kernel's answer to a handler's invalid result
            logger.exception("handler for %r returned an invalid result", _METHOD)
            raise MCPError(code=types.INTERNAL_ERROR, message="Handler returned an invalid result") from None


def plain_params(params: Mapping[str, Any] | None) -> TypeGuard[dict[str, Any]]:
    """Whether `tools/call` params are plainly valid for every version's surface and the handler's model: a dict of
    a string `name` and, optionally, `arguments` (an object or null), nothing else."""
    if type(params) is not dict or not params.keys() <= _PLAIN_KEYS or type(params.get("name")) is not str:
        return False
    arguments = params.get("arguments")
    return arguments is None or type(arguments) is dict  # (the door's JSON parse: keys are strings)
