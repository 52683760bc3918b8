"""A plain `tools/call` the door answers itself, answered by a server middleware without the kernel's three
pydantic passes over what the door already knows the shape of.

The SDK's kernel (`ServerRunner.on_request`) runs, for every `tools/call`, three validations around the handler:
the request's surface (`validate_client_request`: the params as the version's `CallToolRequest`, every argument
value walked and copied), the same params again as the handler's `CallToolRequestParams`, and the result's surface
(`serialize_server_result`). `Server.middleware` is the SDK's public list of server middleware, and the kernel's
documented rule is that a middleware that answers without `call_next` returns its own well-formed result. `PlainCalls`
is the innermost one: it answers a `tools/call` itself when every rule those three passes hold is plain to see, and
hands everything else to `call_next` (the kernel's own path, unchanged):

- the request: params a dict of `name` (a string) and, optionally, `arguments` (an object, or null), from a client
  the kernel's gate lets in with its `client_params` recorded (a 2025 session's `initialize`, or a 2026-07-28
  envelope with client info), no cache hint configured for the method, and:
  - in a 2025 session (a handshake protocol version) nothing else (so no `_meta`, no task);
  - in the stateless 2026-07-28 era the request's `_meta` (the envelope, required there) and nothing else, an
    envelope the SDK's own checks accepted before: the version's surface and the handler's model are asked once
    for each envelope (by its exact text: `repr` of a JSON value tells `1`, `1.0` and `true` apart) with a stub
    name, and their verdict is kept (up to 256 envelopes of up to 2,048 characters; a longer one is the kernel's).
    Those models have no rule that ties `_meta` to another field, so an envelope they accept once they accept
    beside any plain name and arguments.
  Such params pass the version's surface and the handler's model by construction: those models' only rules for
  them are the types checked here (`CallToolRequestParams`: `name: str`, `arguments: dict[str, Any] | None`);
- the door writes the answer (the request carries a `ResultAside`, see `results`): the handler's result is then
  `{"content": [], "isError": <bool>, "resultType": "complete"}` (the text and structured content travel aside),
  whose surface dump is asked of the SDK's own `serialize_server_result` once per protocol version and flag and
  copied per call, with, in the 2026-07-28 era, the server's `serverInfo` stamp in `_meta` (the server's public
  `server_info_stamp`, a fresh dict per answer, where the kernel stamps a result without `_meta`); any other
  result is dumped by that function per call, as the kernel does.

Over stdio, through the SDK's transport or for a request that is not plain, nothing changes.
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
from mcp_types import CORE_RESULT_TYPES, SERVER_INFO_META_KEY, methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

logger = logging.getLogger("gateway.mcp")

Context = ServerRequestContext[Any, Any]
Answer = Callable[[Context, Any, str, dict[str, Any] | None], Awaitable[dict[str, Any]]]
"""The call handler's work, given the message's facts, the tool's name and its arguments (`build_mcp_server`'s)."""

_PLAIN_KEYS = frozenset({"name", "arguments"})
_ENVELOPED_KEYS = frozenset({"name", "arguments", "_meta"})
_METHOD = "tools/call"
_ENVELOPE_KEPT = 2048
"""The longest envelope text whose verdict is kept (the official client's is about 180 characters): what is kept is
bounded by 256 of these, whatever the body limit lets a client send."""
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
        self._envelopes: dict[tuple[str, str], bool] = {}
        """Whether the SDK's checks accept a 2026-07-28 envelope, by version and the envelope's text."""

    async def __call__(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        params = ctx.params
        version = ctx.protocol_version
        if ctx.method != _METHOD or not self.plain(params, version):
            return await call_next(ctx)
        facts = self.facts_of(ctx)
        if facts.aside is None or ctx.session.client_params is None or _METHOD in self.server.cache_hints:
            return await call_next(ctx)
        return self.wire(version, await self.answer(ctx, facts, params["name"], params.get("arguments")))

    def plain(self, params: Mapping[str, Any] | None, version: str) -> TypeGuard[dict[str, Any]]:
        """Whether `tools/call` params are plainly valid at `version` (see the module's docstring)."""
        return plain_params(params) if version in HANDSHAKE_PROTOCOL_VERSIONS else self.enveloped(params, version)

    def enveloped(self, params: Mapping[str, Any] | None, version: str) -> TypeGuard[dict[str, Any]]:
        """Whether 2026-07-28 `tools/call` params are plainly valid: a plain name and arguments beside an envelope
        (`_meta`) the version's surface and the handler's model accepted (see the module's docstring)."""
        if version not in MODERN_PROTOCOL_VERSIONS or type(params) is not dict or \
                not params.keys() <= _ENVELOPED_KEYS or type(params.get("name")) is not str:
            return False
        arguments, meta = params.get("arguments"), params.get("_meta")
        if (arguments is not None and type(arguments) is not dict) or type(meta) is not dict:
            return False
        text = repr(meta)  # (of JSON values, their exact text: 1, 1.0 and True differ)
        if len(text) > _ENVELOPE_KEPT:
            return False  # an envelope this long is not kept: the kernel judges it, as before
        key = (version, text)
        verdict = self._envelopes.get(key)
        if verdict is None:
            verdict = self._envelopes[key] = envelope_accepted(version, meta)
            if len(self._envelopes) > 256:  # a client that makes up envelopes is asked each time
                self._envelopes.clear()
        return verdict

    def wire(self, version: str, result: dict[str, Any]) -> dict[str, Any]:
        """`result`'s wire form at `version`, as the kernel's result check (and, in the 2026-07-28 era, its
        `serverInfo` stamp) gives it."""
        if result == _ASIDE_OK or result == _ASIDE_ERROR:  # (a dict's comparison, in C)
            is_error = result["isError"] is True
            dump = self._dumps.get((version, is_error))
            if dump is None:
                dump = self._dumps[(version, is_error)] = methods.serialize_server_result(
                    _METHOD, version, _ASIDE_ERROR if is_error else _ASIDE_OK)
            if version in MODERN_PROTOCOL_VERSIONS:  # (the sieve keeps `resultType`; the result has no `_meta`)
                return {**dump, "content": [], "_meta": {SERVER_INFO_META_KEY: self.server.server_info_stamp}}
            return {**dump, "content": []}  # (a list of its own: the door puts the text content in it)
        modern = version in MODERN_PROTOCOL_VERSIONS
        result_type = result.get("resultType")
        if modern and isinstance(result_type, str) and result_type not in CORE_RESULT_TYPES:
            dumped = dict(result)  # an extension's claimed shape: the kernel leaves it to the extension
        else:
            try:
                dumped = methods.serialize_server_result(_METHOD, version, result)
            except ValidationError:  # the kernel's answer to a handler's invalid result
                logger.exception("handler for %r returned an invalid result", _METHOD)
                raise MCPError(code=types.INTERNAL_ERROR, message="Handler returned an invalid result") from None
        return self._stamped(dumped) if modern else dumped

    def _stamped(self, dumped: dict[str, Any]) -> dict[str, Any]:
        """The kernel's `serverInfo` stamp on a 2026-07-28 result: a `_meta` of the handler's keeps a stamp it
        wrote (unless null), a `_meta` that is no object is the handler's own."""
        if dumped.get("resultType") is None:
            dumped["resultType"] = "complete"
        meta = dumped.get("_meta")
        if meta is None:
            dumped["_meta"] = {SERVER_INFO_META_KEY: self.server.server_info_stamp}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
            dumped["_meta"] = {**meta, SERVER_INFO_META_KEY: self.server.server_info_stamp}
        return dumped


def plain_params(params: Mapping[str, Any] | None) -> TypeGuard[dict[str, Any]]:
    """Whether `tools/call` params are plainly valid for every version's surface and the handler's model: a dict of
    a string `name` and, optionally, `arguments` (an object or null), nothing else."""
    if type(params) is not dict or not params.keys() <= _PLAIN_KEYS or type(params.get("name")) is not str:
        return False
    arguments = params.get("arguments")
    return arguments is None or type(arguments) is dict  # (the door's JSON parse: keys are strings)


def envelope_accepted(version: str, meta: dict[str, Any]) -> bool:
    """Whether the SDK's checks of a 2026-07-28 `tools/call` accept `meta` as its envelope: the version's surface
    (`validate_client_request`) and the handler's model (`CallToolRequestParams`), asked with a stub name."""
    stub = {"name": "", "_meta": meta}
    try:
        methods.validate_client_request(_METHOD, version, stub)
        types.CallToolRequestParams.model_validate(stub, by_name=False)
    except (ValidationError, KeyError, ValueError):
        return False
    return True
