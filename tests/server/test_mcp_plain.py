"""`plain`: a 2025 session's plain `tools/call`, answered by the door's innermost server middleware without the
kernel's surface check, its second params validation and its result check; everything else through the kernel, and
either way the same answer (the official `mcp` client is the judge, and the SDK's own result check)."""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Iterator
from typing import Any, NamedTuple

import httpx
import pytest
from mcp import Client
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.runner import ServerRunner
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import INTERNAL_ERROR, methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from server_support import FORECAST
from starlette.requests import Request

from gateway.server.mcp.exchange import JSONExchange
from gateway.server.mcp.plain import PlainCalls, plain_params
from gateway.server.mcp.routing import FACTS_SCOPE_KEY
from gateway.server.mcp.server import facts_from_request

pytestmark = pytest.mark.anyio

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
FORECAST_ARGS = {"latitude": 52.52, "longitude": 13.41}


class _Passes:
    """How often the kernel ran its surface check and its result check of a `tools/call` (the SDK's public functions,
    counted when the kernel calls them: the official client in this process checks what it reads with them too)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.requests = self.results = 0
        check, dump = methods.validate_client_request, methods.serialize_server_result

        def counted_check(method: str, *args: Any, **kwargs: Any) -> Any:
            self.requests += method == "tools/call" and _by_the_kernel()
            return check(method, *args, **kwargs)

        def counted_dump(method: str, *args: Any, **kwargs: Any) -> Any:
            self.results += method == "tools/call" and _by_the_kernel()
            return dump(method, *args, **kwargs)

        monkeypatch.setattr(methods, "validate_client_request", counted_check)
        monkeypatch.setattr(methods, "serialize_server_result", counted_dump)

    def taken(self) -> tuple[int, int]:
        taken = (self.requests, self.results)
        self.requests = self.results = 0
        return taken


def _by_the_kernel() -> bool:
    """Whether the counted function's caller is the SDK's kernel (`mcp.server.runner`)."""
    frame = inspect.currentframe()
    caller = frame.f_back.f_back if frame is not None and frame.f_back is not None else None
    return caller is not None and caller.f_globals.get("__name__") == "mcp.server.runner"


@pytest.fixture
def passes(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Passes]:
    yield _Passes(monkeypatch)


async def _session(client: httpx.AsyncClient, url: str, version: str = "2025-06-18") -> dict[str, str]:
    opened = await client.post(url, headers=ACCEPT, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    assert opened.status_code == 200, opened.text
    headers = {**ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": version}
    assert (await client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            ).status_code == 202
    return headers


@pytest.mark.parametrize("mode, versions", [("legacy", HANDSHAKE_PROTOCOL_VERSIONS),
                                            ("auto", MODERN_PROTOCOL_VERSIONS)])
async def test_the_official_client_gets_a_plain_call_without_the_kernels_passes(
        gw: tuple[str, Any], passes: _Passes, mode: str, versions: Any) -> None:
    """A call of a tool as the official client sends it, in a 2025 session (`legacy`) or stateless 2026-07-28 (its
    default: the envelope in `_meta`, judged once by the SDK's checks on the first call), is answered by the plain
    rule (neither of the kernel's checks runs for it), and the client reads the result it read before."""
    url, _ = gw
    async with Client(f"{url}/mcp/weather", mode=mode) as client:
        assert client.protocol_version in versions
        await client.call_tool("getForecast", FORECAST_ARGS)  # (a stateless envelope judged once)
        passes.taken()
        result = await client.call_tool("getForecast", FORECAST_ARGS)
        assert passes.taken() == (0, 0)
        failed = await client.call_tool("getForecast", {"latitude": "north"})
        assert passes.taken() == (0, 0)
    assert result.is_error is False and result.structured_content == FORECAST
    assert json.loads(result.content[0].text) == FORECAST  # type: ignore[union-attr]
    assert failed.is_error is True and "invalid_arguments" in failed.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize("params", [
    {"name": "getForecast", "arguments": FORECAST_ARGS, "_meta": {"progressToken": 5}},  # _meta: the kernel's
    {"name": "getForecast", "arguments": FORECAST_ARGS, "task": {"ttl": 5}},  # a key the rule does not know
    {"name": "getForecast", "arguments": ["not", "an", "object"]},  # malformed: the kernel's error
    {"name": 5, "arguments": {}},
])
async def test_what_is_not_plain_goes_through_the_kernel(gw: tuple[str, Any], passes: _Passes,
                                                         params: dict[str, Any]) -> None:
    """Params the rule does not see as plainly valid are checked by the kernel as before (and answered alike whether
    the door or the SDK's transport carried them: tests/server/test_mcp_transport.py)."""
    url, _ = gw
    async with httpx.AsyncClient(timeout=10) as client:
        headers = await _session(client, f"{url}/mcp/weather")
        passes.taken()
        answer = (await client.post(f"{url}/mcp/weather", headers=headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})).json()
    requests, results = passes.taken()
    assert requests == 1
    assert results == (1 if "result" in answer else 0), answer


def _stateless(params: dict[str, Any], version: str = "2026-07-28") -> tuple[dict[str, str], dict[str, Any]]:
    headers = {**ACCEPT, "mcp-protocol-version": version, "mcp-method": "tools/call", "mcp-name": params["name"]}
    return headers, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}


ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
            "io.modelcontextprotocol/clientCapabilities": {}}


@pytest.mark.parametrize("params", [
    {"name": "getForecast", "arguments": FORECAST_ARGS, "_meta": ENVELOPE},
    {"name": "getForecast", "arguments": {"latitude": "north"}, "_meta": ENVELOPE},  # a tool error
    {"name": "getForecast", "arguments": None, "_meta": {**ENVELOPE, "io.modelcontextprotocol/logLevel": "info"}},
    {"name": "noSuchTool", "arguments": {}, "_meta": ENVELOPE},  # the handler's error
])
async def test_a_plain_stateless_answer_is_the_kernels_byte_for_byte(gw: tuple[str, Any], passes: _Passes,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     params: dict[str, Any]) -> None:
    """The same stateless request answered on the plain path and, with the rule turned off, by the kernel: the
    same bytes (the `serverInfo` stamp included)."""
    url, _ = gw
    headers, body = _stateless(params)
    async with httpx.AsyncClient(timeout=10) as client:
        await client.post(f"{url}/mcp/weather", headers=headers, json=body)  # (the envelope judged)
        passes.taken()
        plain = await client.post(f"{url}/mcp/weather", headers=headers, json=body)
        assert passes.taken() == (0, 0)
        monkeypatch.setattr(PlainCalls, "enveloped", lambda self, params, version: False)
        kernel = await client.post(f"{url}/mcp/weather", headers=headers, json=body)
        assert passes.taken()[0] == 1
    assert plain.status_code == kernel.status_code
    assert plain.content == kernel.content
    assert "serverInfo" in plain.text or "error" in plain.json()


@pytest.mark.parametrize("meta", [
    {**ENVELOPE, "io.modelcontextprotocol/clientInfo": {"name": "mcp"}},  # no version: the surface refuses it
    {**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": []},
    {**ENVELOPE, "io.modelcontextprotocol/logLevel": "loud"},
    {**ENVELOPE, "progressToken": 1.5},
    {**ENVELOPE, "progressToken": {"a": 1}},
])
async def test_an_envelope_the_surface_refuses_is_the_kernels_error(gw: tuple[str, Any], passes: _Passes,
                                                                    meta: dict[str, Any]) -> None:
    """An envelope the version's surface refuses is refused as the kernel refuses it, every time (the verdict is
    kept, the refusal is the kernel's)."""
    url, _ = gw
    headers, body = _stateless({"name": "getForecast", "arguments": FORECAST_ARGS, "_meta": meta})
    async with httpx.AsyncClient(timeout=10) as client:
        for _ in range(2):
            passes.taken()
            answer = await client.post(f"{url}/mcp/weather", headers=headers, json=body)
            assert passes.taken() == (1, 0)
            assert "error" in answer.json(), answer.text


RESULTS = [
    {"content": [], "isError": False, "resultType": "complete"},  # the text and structured content set aside
    {"content": [], "isError": True, "resultType": "complete"},
    {"content": [{"type": "text", "text": "hi"}], "structuredContent": {"a": [1, None]}, "isError": False,
     "resultType": "complete"},
    {"content": [{"type": "text", "text": "x"}], "isError": True, "resultType": "complete", "_meta": {"k": 1}},
]
"""Results of a tool call the door's handler gives, each dumped as the kernel's check dumps it."""


@pytest.mark.parametrize("version", sorted(HANDSHAKE_PROTOCOL_VERSIONS))
@pytest.mark.parametrize("result", RESULTS)
def test_a_result_is_dumped_as_the_kernels_check_dumps_it(version: str, result: dict[str, Any]) -> None:
    plain = PlainCalls(None, lambda ctx: None, None)  # type: ignore[arg-type]
    expected = methods.serialize_server_result("tools/call", version, result)
    assert plain.wire(version, dict(result)) == expected
    assert plain.wire(version, dict(result)) == expected  # (the second time from what was kept)
    first = plain.wire(version, dict(result))
    first["content"].append({"type": "text", "text": "put back by the door"})
    assert plain.wire(version, dict(result)) == expected  # what was kept is not the door's to change


class _Aside(NamedTuple):
    aside: object


async def _kernel_answer(version: str, params: dict[str, Any], result: dict[str, Any], *, rule: bool,
                         ran: list[str] | None = None) -> Any:
    """What the SDK's kernel (`ServerRunner.on_request`) answers for `params` when the handler returns `result`,
    with the plain rule as the server's middleware or without it (`ran`: who answered, the kernel's handler or the
    rule)."""
    ran = ran if ran is not None else []

    async def handler(ctx: Any, typed: Any) -> dict[str, Any]:
        ran.append("kernel")
        return dict(result)

    async def answer(ctx: Any, facts: Any, name: str, arguments: Any) -> dict[str, Any]:
        ran.append("rule")
        return dict(result)

    server: Server[Any] = Server("t", version="1", on_call_tool=handler)
    server.middleware = [PlainCalls(server, lambda ctx: _Aside(object()), answer)] if rule else []
    connection = Connection.from_envelope(version, {"name": "c", "version": "1"}, {})
    exchange = JSONExchange(TransportContext(kind="jsonrpc", can_send_request=False), 1,
                            ServerMessageMetadata(request_context=None))
    try:
        return await ServerRunner(server, connection, {}).on_request(exchange, "tools/call", params)
    except MCPError as error:
        return error.error


@pytest.mark.parametrize("version", sorted({*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS}))
@pytest.mark.parametrize("result", [
    *RESULTS,
    {"content": [], "isError": False, "_meta": {"io.modelcontextprotocol/serverInfo": None}},
    {"content": [], "isError": False, "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "mine"}}},
    {"content": [], "isError": False, "_meta": "not an object"},
    {"resultType": "x-claimed", "anything": 1},  # an extension's claimed shape (2026-07-28)
    {"content": "not a list", "isError": False},  # invalid: the kernel's INTERNAL_ERROR
])
async def test_a_plain_answer_is_the_kernels_in_every_version(version: str, result: dict[str, Any]) -> None:
    """The kernel with the plain rule as its middleware answers a plain call as the kernel alone answers it, in
    every protocol version and for every shape of result (as JSON text: key order too)."""
    params: dict[str, Any] = {"name": "t", "arguments": {"a": 1}}
    if version in MODERN_PROTOCOL_VERSIONS:
        params["_meta"] = {**ENVELOPE, "io.modelcontextprotocol/protocolVersion": version}
    kernel = await _kernel_answer(version, params, result, rule=False)
    for _ in range(2):  # (the second time from what the rule kept)
        ran: list[str] = []
        plain = await _kernel_answer(version, params, result, rule=True, ran=ran)
        assert ran == ["rule"]
        if isinstance(kernel, dict):
            assert json.dumps(plain) == json.dumps(kernel)
        else:
            assert plain == kernel


def test_an_invalid_result_is_the_kernels_internal_error() -> None:
    plain = PlainCalls(None, lambda ctx: None, None)  # type: ignore[arg-type]
    with pytest.raises(MCPError) as raised:
        plain.wire("2025-06-18", {"content": "not a list", "isError": False})
    assert raised.value.error.code == INTERNAL_ERROR


@pytest.mark.parametrize(("params", "plain"), [
    ({"name": "t", "arguments": {"a": [1]}}, True),
    ({"name": "t"}, True),
    ({"name": "t", "arguments": None}, True),
    ({"name": "t", "arguments": []}, False),
    ({"name": "t", "arguments": "{}"}, False),
    ({"name": None}, False),
    ({"arguments": {}}, False),
    ({"name": "t", "_meta": {}}, False),
    ({"name": "t", "other": 1}, False),
    (None, False),
    ([], False),
])
def test_plain_params_are_what_every_surface_accepts(params: Any, plain: bool) -> None:
    assert plain_params(params) is plain
    if plain:  # and the SDK's own checks agree, in every handshake version
        for version in HANDSHAKE_PROTOCOL_VERSIONS:
            methods.validate_client_request("tools/call", version, params)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_messages_facts_are_made_once_and_are_what_its_request_says(
        gw: tuple[str, Any], monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """A request the door answers in its own task carries its message's facts (a session's decided when it opened,
    with the request's token and aside; a stateless request's made from what the endpoint read), and they are
    what the request's scope alone says."""
    url, _ = gw
    seen: list[tuple[Any, Any]] = []
    rule = PlainCalls.__call__

    async def watched(self: PlainCalls, ctx: Any, call_next: Any) -> Any:
        scope = ctx.request.scope
        if ctx.method not in ("tools/call", "tools/list"):  # (the handshake goes through the SDK's transport)
            return await rule(self, ctx, call_next)
        alone = dataclasses.replace(ctx, request=Request({k: v for k, v in scope.items() if k != FACTS_SCOPE_KEY}))
        seen.append((scope.get(FACTS_SCOPE_KEY), facts_from_request(alone)))
        return await rule(self, ctx, call_next)

    monkeypatch.setattr(PlainCalls, "__call__", watched)
    async with Client(f"{url}/mcp/weather", mode=mode) as client:
        await client.call_tool("getForecast", FORECAST_ARGS)
        await client.call_tool("getForecast", {"latitude": "north"})
        await client.list_tools()
    assert len(seen) == 4  # two calls, two listings (the client lists the tools once to check a result)
    for carried, alone in seen:
        assert carried is not None and carried.aside is not None
        assert (carried.session is not None) is (mode == "legacy")
        assert carried == alone


async def test_a_long_envelope_is_the_kernels_and_never_kept(gw: tuple[str, Any], passes: _Passes) -> None:
    """An envelope longer than what the rule keeps verdicts for is judged by the kernel every time (what is kept is
    bounded whatever the body limit lets through), and answered as before."""
    url, _ = gw
    headers, body = _stateless({"name": "getForecast", "arguments": FORECAST_ARGS,
                                "_meta": {**ENVELOPE, "x-note": "n" * 5000}})
    async with httpx.AsyncClient(timeout=10) as client:
        for _ in range(2):
            passes.taken()
            answer = (await client.post(f"{url}/mcp/weather", headers=headers, json=body)).json()
            assert passes.taken() == (1, 1)
            assert answer["result"]["structuredContent"] == FORECAST


def test_the_envelopes_kept_are_bounded() -> None:
    plain = PlainCalls(None, lambda ctx: None, None)  # type: ignore[arg-type]
    for number in range(1000):
        meta = {**ENVELOPE, "io.modelcontextprotocol/clientInfo": {"name": f"c{number}", "version": "1"}}
        assert plain.plain({"name": "t", "_meta": meta}, "2026-07-28")
    assert plain.plain({"name": "t", "_meta": {**ENVELOPE, "x": "y" * 3000}}, "2026-07-28") is False
    assert len(plain._envelopes) <= 257
