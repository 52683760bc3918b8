"""The executor: one tool call becomes the exact REST request its spec describes, and a `ToolResult`.

validate (jsonschema, nothing sent on failure) -> build (gateway.http.request) -> credentials
(gateway.http.auth) -> send (gateway.http.client: pooled, retries, redirect policy, one deadline)
-> read and shape (gateway.http.reading), secrets redacted. A bad call is a result, never an exception.
The executor is the last stage of the call pipeline (`gateway.execution.pipeline`), which validates the
arguments before any other stage (`refuse_arguments`) and tells the executor so (`validated=True`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import anyio.to_thread
import httpx
import orjson

from ..catalog import Catalog, Server, Tool, foreign_origin
from ..config.model import SECRET_HEADER, ApiConfig, Manifest
from ..config.settings import DEFAULT_AUTH_SERVER_TIMEOUT
from ..errors import AuthServerUnavailable, NotConnected, RequestBuildError, UserCredentialError
from ..http.auth import Authenticator, Credentials
from ..http.budget import RetryBudget
from ..http.client import (
    Attempts,
    CredentialsFactory,
    DeadlineExceeded,
    HttpxWire,
    RedirectRefused,
    TooManyRedirects,
    Wire,
    new_client,
    send,
)
from ..http.library import IDEMPOTENT, ClientOptions
from ..http.reading import hard_cap, read_capped, shape
from ..http.request import RequestPlan, request_plan
from ..http.resolving import PinnedClients
from ..http.wire import ReqwestWire
from ..identity.connections import Connections
from ..kernel import tracing
from ..kernel.redaction import MARKER, Redactor
from ..messages import ToolResult
from .arguments import input_schema, run_off_the_loop, validate_arguments
from .fastschema import is_valid, judge_of

__all__ = ["DEFAULT_MAX_RESULT_BYTES", "Executor", "validate_arguments"]

logger = logging.getLogger("gateway.execution")

DEFAULT_MAX_RESULT_BYTES = 64_000

SHAPE_ON_LOOP_BYTES = 64 * 1024
"""An answer larger than this is parsed, redacted and cut in a worker thread (redteam46: an upstream's 4 MB answer of
500,000 small objects took 0.75-0.83 s of the event loop to shape, each call, at load 13)."""
_TOKEN_MAX_BODY = 1024 * 1024  # an OAuth token answer is a few hundred bytes


class _Api:
    """Per-api state: pooled wire, credentials, concurrency limit."""

    def __init__(self, config: ApiConfig, transport: httpx.AsyncBaseTransport | None, redactor: Redactor, *,
                 limit_concurrency: bool = True, schemes: dict[str, Any] | None = None,
                 connections: Connections | None = None,
                 auth_server_timeout: float = DEFAULT_AUTH_SERVER_TIMEOUT,
                 servers: tuple[Server, ...] = ()) -> None:
        self.config = config
        self.servers = servers
        """The spec's top-level servers: the first one's origin is the api's when no base_url is set."""
        self._bare_config = config.model_copy(update={"headers": {}})
        """The api without its configured headers: for an operation on another origin (`foreign`)."""
        self._foreign: dict[str, bool] = {}
        self._options: ClientOptions | None = None
        """The connection settings of `foreign_wire` (set when the api presents a client certificate)."""
        self._foreign_wire: ReqwestWire | None = None
        pooled = max(config.max_concurrency or 20, 1)
        self.wire: Wire
        options = ClientOptions(max_connections=pooled, ca_file=config.ca_file,
                                client_cert=config.client_cert, client_key=config.client_key,
                                reuse_connections=config.reuse_connections)
        if transport is None:
            # The calls go out on pyreqwest directly (gateway.http.wire); the httpx client, on pyreqwest too,
            # is for OAuth token requests only.
            # A spec's servers (no base_url) are resolved and checked by the gateway: none may be link-local.
            self.wire = ReqwestWire(options, pins=None if config.base_url else PinnedClients(options))
            if config.client_cert and not config.base_url:
                # A client certificate is a credential: an operation on another origin (`foreign`) goes on a wire
                # that presents none (built on its first call: most apis have no such operation).
                self._options = replace(options, client_cert=None, client_key=None)
            self.client = new_client(options=options, max_body=_TOKEN_MAX_BODY)
        else:
            self.client = new_client(transport)
            self.wire = HttpxWire(self.client)
        self.auth = Authenticator(config.name, config.auth, redactor, self.client, schemes=schemes,
                                  connections=connections, auth_server_timeout=auth_server_timeout)
        # Static headers may carry credentials too (`X-Api-Key: ${KEY}`): redact those whose name says so.
        redactor.add(*(v for k, v in config.headers.items() if SECRET_HEADER.search(k)))
        self.reserved = self.auth.reserved
        self.limit = asyncio.Semaphore(config.max_concurrency) if config.max_concurrency and limit_concurrency \
            else None
        self.retry_budget = RetryBudget()
        # Whether every wait of a call ends by its deadline without a timer of the executor's: the library's
        # timeout covers the wait for a connection, the exchange and the body, retries sleep only within the
        # deadline, static credentials never wait (an OAuth token request might, and httpx times each read).
        self.self_timed = isinstance(self.wire, ReqwestWire) and not self.auth.has_tokens
        self._reserved_args: dict[str, frozenset[str]] = {}
        self._argument_schemas: dict[str, Any] = {}
        self._request_plans: dict[str, RequestPlan] = {}

    def request_plan(self, tool: Tool) -> RequestPlan:
        """The tool's request as far as this api's configuration and credentials fix it (`RequestPlan`), worked
        out on its first call (a setup error is raised again on the next: never remembered)."""
        plan = self._request_plans.get(tool.name)
        if plan is None or plan.tool is not tool:
            config = self._bare_config if self.foreign(tool) else self.config
            plan = self._request_plans[tool.name] = request_plan(tool, config, self.reserved)
        return plan

    def foreign(self, tool: Tool) -> bool:
        """Whether the tool's own server is another origin than the api's, so it goes without the api's credentials
        and headers (`gateway.catalog.foreign_origin`): never with a base_url, which replaces every server."""
        found = self._foreign.get(tool.name)
        if found is None:
            found = self._foreign[tool.name] = bool(
                not self.config.base_url and tool.servers
                and foreign_origin(tool.servers[0], self.servers, self.config.trusted_origins))
        return found

    def foreign_wire(self) -> Wire:
        """The wire of an operation on another origin: the api's own unless it presents a client certificate."""
        if self._options is None:
            return self.wire
        if self._foreign_wire is None:
            self._foreign_wire = ReqwestWire(self._options, pins=PinnedClients(self._options))
        return self._foreign_wire

    async def aclose(self) -> None:
        await self.client.aclose()
        for wire in (self.wire, self._foreign_wire):
            if isinstance(wire, ReqwestWire):
                await wire.aclose()

    def reserved_args(self, tool: Tool) -> frozenset[str]:
        """The tool's arguments that the credentials fill (a model may leave them out)."""
        # By name: an executor serves one catalog, whose tool names are unique (no identity-keyed cache).
        names = self._reserved_args.get(tool.name)
        if names is None:
            names = self._reserved_args[tool.name] = frozenset(
                a.name for a in tool.arguments if (a.location, a.wire_name.lower()) in self.reserved)
        return names

    def argument_schema(self, tool: Tool) -> Any:
        """The schema the tool's arguments are judged by: its exact input schema less the required names the
        credentials fill (the same object on every call, so its compiled judge is found at once)."""
        schema = self._argument_schemas.get(tool.name)
        if schema is None:
            schema = self._argument_schemas[tool.name] = input_schema(tool, self.reserved_args(tool))
        return schema


class _Route:
    """What of a tool's call its executor decides once: its api, its request plan and whether its server is another
    origin than the api's (`_Api.foreign`), found on its first call, not looked up in three places on every call."""

    __slots__ = ("api", "foreign", "plan", "tool")

    def __init__(self, tool: Tool, api: _Api) -> None:
        self.tool = tool
        self.api = api
        self.plan = api.request_plan(tool)  # a setup error is raised here, and the route not kept
        self.foreign = api.foreign(tool)


class Executor:
    """Executes tool calls for one manifest and catalog.

    Args:
        manifest: gives each api's base_url, auth, headers, timeout and the secrets to redact.
        catalog: the compiled tools.
        transport: an httpx transport for every api's client (tests, in-process upstreams).
        redactor: scrubs secrets from what the calls answer; it learns the manifest's secrets here and tokens
            fetched at run time (share one with the pipeline's redaction and audit stages).
        limit_concurrency: hold each api to its `max_concurrency`; False when the pipeline's guard stage does
            (`gateway.safety.breaker.GuardApi`), so no call waits on two semaphores for one limit.
        connections: users' own connections, for apis with `auth: {type: user_oauth}`.
    """

    def __init__(
        self, manifest: Manifest, catalog: Catalog, *, transport: httpx.AsyncBaseTransport | None = None,
        redactor: Redactor | None = None, limit_concurrency: bool = True,
        connections: Connections | None = None,
    ) -> None:
        self.connections = connections
        self.manifest = manifest
        self.catalog = catalog
        self.redactor = redactor if redactor is not None else Redactor()
        self.redactor.add(*manifest.secrets())
        self._transport = transport
        self._apis: dict[str, _Api] = {}
        self._routes: dict[str, _Route] = {}
        self.limits_concurrency = limit_concurrency

    def _api(self, name: str) -> _Api:
        api = self._apis.get(name)
        if api is None:
            config = self.manifest.api(name)
            spec = self.catalog.apis.get(name)
            api = self._apis[name] = _Api(config, self._transport, self.redactor,
                                          limit_concurrency=self.limits_concurrency,
                                          schemes=spec.security_schemes if spec is not None else None,
                                          connections=self.connections,
                                          auth_server_timeout=self.manifest.gateway.auth_server_timeout,
                                          servers=spec.servers if spec is not None else ())
        return api

    def _route(self, tool: Tool) -> _Route:
        # By name: an executor serves one catalog, whose tool names are unique (the tool is kept to tell a reload's).
        route = self._routes.get(tool.name)
        if route is None or route.tool is not tool:
            route = self._routes[tool.name] = _Route(tool, self._api(tool.api))
        return route

    async def aclose(self) -> None:
        self._routes = {}
        apis, self._apis = list(self._apis.values()), {}
        for api in apis:
            await api.aclose()

    async def __aenter__(self) -> Executor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def execute(
        self,
        tool: Tool,
        arguments: dict[str, Any] | None,
        *,
        timeout: float | None = None,
        max_result_bytes: int | None = None,
        validated: bool = False,
    ) -> ToolResult:
        """Run one call; every failure is a `ToolResult` with an `error_type` and a message for the model.

        `validated`: the caller checked the arguments with `refuse_arguments` already (the call pipeline does).
        """
        started = time.monotonic()
        seconds = 0.0
        try:
            if arguments is None:
                arguments = {}
            refusal = None if validated else self.refuse_arguments(tool, arguments)
            if refusal is not None:
                result = refusal
            else:
                route = self._route(tool)
                api, plan = route.api, route.plan
                if _heavy(arguments):  # its encoding is the caller's to size: off the event loop
                    prepared = await anyio.to_thread.run_sync(plan.build, arguments)
                else:
                    prepared = plan.build(arguments)
                seconds = timeout if timeout is not None else api.config.timeout
                limit = max_result_bytes if max_result_bytes is not None else DEFAULT_MAX_RESULT_BYTES
                deadline = time.monotonic() + seconds
                if api.self_timed and api.limit is None and not tracing.enabled():
                    # The usual: no executor limit, no span, and no second timer (a timer per call is
                    # measurable): the send ends by the deadline on its own (`_Api.self_timed`).
                    result = await self._send(tool, route, prepared, deadline, limit)
                else:
                    result = await self._timed_send(tool, route, prepared, seconds, deadline, limit)
        except (TimeoutError, DeadlineExceeded, httpx.TimeoutException):
            result = ToolResult.failure("timeout", f"{tool.name}: no complete answer within {seconds:g} s")
        except RedirectRefused as error:
            where = self.redactor.text(error.location)
            result = ToolResult.failure(
                "transport_error", f"{tool.name}: the API redirected to another host ({where}); not followed"
            )
        except TooManyRedirects:
            result = ToolResult.failure("transport_error", f"{tool.name}: too many redirects")
        except RequestBuildError as error:
            result = ToolResult.failure(error.error_type, self.redactor.text(str(error)))  # type: ignore[arg-type]
        except UserCredentialError as error:  # no per-user credential for this call: nothing was sent
            link = {"connect_url": error.connect_url} if isinstance(error, NotConnected) else None
            result = ToolResult.failure(error.error_type, f"{tool.name}: {error}", body=link)  # type: ignore[arg-type]
        except AuthServerUnavailable as error:
            result = ToolResult.failure("auth_unavailable", f"{tool.name}: {error}; nothing was sent")
        except httpx.HTTPError as error:
            detail = self.redactor.text(f"{type(error).__name__}: {error}" if str(error) else type(error).__name__)
            result = ToolResult.failure("transport_error", f"{tool.name}: the request failed ({detail})")
        except Exception as error:  # the contract: a bad call never raises
            message = self.redactor.text(f"the gateway failed to run {tool.name}: {type(error).__name__}: {error}")
            # The message is redacted; the traceback (which may quote a URL) only at debug level.
            logger.error("%s", message)
            logger.debug("traceback of the failure above", exc_info=True)
            result = ToolResult.failure("transport_error", message)
        result.duration_ms = (time.monotonic() - started) * 1000
        return result

    def arguments_hold(self, tool: Tool, arguments: Any) -> bool:
        """The judge's quick "valid" (False: ask `argument_problems`, which words what is wrong)."""
        return isinstance(arguments, dict) and is_valid(self._api(tool.api).argument_schema(tool), arguments)

    def argument_judge(self, tool: Tool) -> Callable[[Any], bool] | None:
        """The compiled judge `arguments_hold` asks for the tool (None: none; then only the wording decides)."""
        return judge_of(self._api(tool.api).argument_schema(tool))

    def argument_problems(self, tool: Tool, arguments: Any) -> list[str]:
        """Every problem with `arguments` for the tool's exact input schema, worded for the model (secrets
        redacted); empty when they are valid. The gateway's one rule for arguments (the pipeline's validation, a
        hook's rewritten arguments, the console's try-out): those the api's credentials fill (a header the auth
        sets) may be left out."""
        problems = validate_arguments(tool, arguments, optional=self._api(tool.api).reserved_args(tool))
        return [self.redactor.text(p) for p in problems] if problems else problems

    async def check_arguments(self, tool: Tool, arguments: Any) -> list[str]:
        """`argument_problems`, with the judge's "valid" on the event loop and any wording in a worker thread (a
        large or deeply wrong value must not hold up the other callers)."""
        if self.arguments_hold(tool, arguments):
            return []
        return await run_off_the_loop(lambda: self.argument_problems(tool, arguments))

    def refuse_arguments(self, tool: Tool, arguments: Any) -> ToolResult | None:
        """The `invalid_arguments` result for arguments that break the tool's exact input schema; None when valid
        (`argument_problems`)."""
        problems = self.argument_problems(tool, arguments)
        if not problems:
            return None
        text = "\n".join(f"- {p}" for p in problems)
        return ToolResult.failure("invalid_arguments", f"Invalid arguments for {tool.name}; nothing was sent:\n{text}")

    async def _timed_send(self, tool: Tool, route: _Route, prepared: Any, seconds: float, deadline: float,
                          limit: int) -> ToolResult:
        """The send with what the usual one goes without: the executor's concurrency limit, a span, a timer."""
        api = route.api
        if api.self_timed and (api.limit is None or not api.limit.locked()):
            # A free slot is taken without waiting, and the rest ends by the deadline on its own.
            return await self._limited_send(tool, route, prepared, deadline, limit)
        async with asyncio.timeout(seconds):
            return await self._limited_send(tool, route, prepared, deadline, limit)

    async def _limited_send(self, tool: Tool, route: _Route, prepared: Any, deadline: float, limit: int) -> ToolResult:
        api = route.api
        if tracing.enabled():
            return await self._traced_send(tool, route, prepared, deadline, limit)
        if api.limit is None:
            return await self._send(tool, route, prepared, deadline, limit)
        async with api.limit:
            return await self._send(tool, route, prepared, deadline, limit)

    async def _traced_send(self, tool: Tool, route: _Route, prepared: Any, deadline: float, limit: int) -> ToolResult:
        """The request as a client span, its `traceparent` on the wire (one the model sent is replaced)."""
        api = route.api
        carrier: dict[str, str] = {}
        with tracing.upstream_span(prepared.method, prepared.href, carrier) as span:
            prepared.headers = [(k, v) for k, v in prepared.headers if k.lower() not in carrier]
            prepared.headers.extend(carrier.items())
            if api.limit is None:
                result = await self._send(tool, route, prepared, deadline, limit)
            else:
                async with api.limit:
                    result = await self._send(tool, route, prepared, deadline, limit)
            tracing.record_status(span, result.status)
            return result

    async def _send(self, tool: Tool, route: _Route, prepared: Any, deadline: float, limit: int) -> ToolResult:
        api, foreign = route.api, route.foreign
        attempts = Attempts()
        used: list[str] = []
        # Static credentials (built on the api's first call) go as they are: nothing asks for them per attempt.
        source: Credentials | CredentialsFactory | None = api.auth.static
        wire = api.wire
        if foreign:  # another origin than the api's: none of its credentials go there, nor its certificate
            source, wire = _NO_CREDENTIALS, api.foreign_wire()
        elif source is None:
            source = _asking(api, tool, used)
        response = await send(wire, prepared, source, deadline=deadline, attempts=attempts,
                              budget=api.retry_budget)
        if response.status_code == 401 and api.auth.has_tokens and not foreign:
            # A rejected token: forget it; an idempotent call may try once more with a fresh one.
            api.auth.invalidate()
            if prepared.method in IDEMPOTENT:
                await response.aclose()
                attempts.resent.append("HTTP 401, its token renewed")
                response = await send(api.wire, prepared, source, deadline=deadline, attempts=attempts,
                                      budget=api.retry_budget)
        if attempts.resent:  # "why did the api get this call twice?": one audit row, so the log and the span say
            tracing.record_resends(len(attempts.resent))
            logger.info("%s (api %s): %s sent %d times, again after %s", tool.name, tool.api, prepared.method,
                        len(attempts.resent) + 1, ", ".join(attempts.resent))
        try:
            read = await read_capped(response, hard_cap(limit))
        finally:
            await response.aclose()
        status = response.status_code
        ok = 200 <= status < 300
        epoch = self.redactor.epoch  # read first: a secret learned meanwhile makes the redaction stage look again
        shown = limit if ok else min(limit, 8000)
        content_type = response.headers.get("content-type")
        if len(read.data) <= SHAPE_ON_LOOP_BYTES:  # the usual answer: no thread's hop
            shaped = shape(read, content_type, shown, self.redactor)
        else:  # its parse, redaction and cut are the upstream's to size (up to `hard_cap`): off the event loop
            shaped = await anyio.to_thread.run_sync(shape, read, content_type, shown, self.redactor)
        result = ToolResult(
            ok=ok,
            status=status,
            media_type=shaped.media_type,
            body=shaped.body,
            truncated=shaped.truncated,
            bytes=len(read.data),
            redacted_under=epoch,
            body_json=shaped.json,
        )
        if shaped.read_whole:  # cut for the result only: the output check judges the whole (`ToolResult.whole`)
            result.whole, result.whole_read = shaped.whole, True
        if not ok:
            result.error_type = "upstream_error"
            # An upstream may echo the credential in its reason phrase (`401 Unauthorized (Bearer <token>)`).
            reason = self.redactor.text(response.reason_phrase or "")
            excerpt = shaped.excerpt[:500]
            result.error = f"HTTP {status}{' ' + reason if reason else ''} from {tool.method} {tool.path}" + (
                f": {excerpt}" if excerpt else ""
            )
            if status in (401, 403) and foreign:
                result.error += (f" (sent without the api's credentials: the server of {tool.method} {tool.path} is "
                                 f"another origin than the api's; apis.{tool.api}.trusted_origins lets them go there)")
        if used:  # a user's token the upstream echoed back goes no further than the call
            result.body = _scrub(result.body, used)
            result.body_json = None
            result.error = _scrub(result.error, used)
        return result


_NO_CREDENTIALS = Credentials()

BUILD_ON_LOOP_BYTES = 64 * 1024
"""Arguments larger than this (as JSON) are made into a request in a worker thread: percent-encoding is Python's,
value by value (redteam47: one direct call with a 2 MB array of one-letter strings as a query parameter held the
event loop 0.4-0.6 s, and one of 300,000 `é` 1.3 s; a model's arguments may be 16 MiB)."""


def _heavy(arguments: dict[str, Any]) -> bool:
    """Whether `arguments` are more than `BUILD_ON_LOOP_BYTES` as JSON (orjson measures them in C: a small call's
    arguments in about a microsecond, and a Python walk of them cost more instructions than the dump)."""
    try:
        return len(orjson.dumps(arguments)) > BUILD_ON_LOOP_BYTES
    except TypeError:  # a value JSON has no form for (a fixed argument's YAML date): the thread decides
        return True


def _asking(api: _Api, tool: Tool, used: list[str]) -> CredentialsFactory:
    """Credentials asked of the api's auth before each attempt, their per-user tokens noted in `used`. A function of
    its own, not a closure in `_send`: the variables a closure shares become cells, made on every call of `_send`,
    static credentials or not."""

    async def credentials() -> Credentials:
        creds = await api.auth.credentials(tool)
        used.extend(creds.secrets)
        return creds

    return credentials


def _scrub(value: Any, secrets: list[str]) -> Any:
    """`value` with a call's own per-user tokens replaced by the redaction marker.

    Not a `Redactor`: one is built per call here, and a Redactor compiles a pattern of every form of its secrets,
    which for a JWT costs more than the call. A token is URL-safe text, so its plain form is the one an upstream
    echoes; a substring test over the value's JSON decides whether anything needs replacing at all."""
    if value is None:
        return None
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, MARKER)
        return value
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = None
    if text is not None and not any(secret in text for secret in secrets):
        return value
    if isinstance(value, dict):
        return {_scrub(k, secrets): _scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, secrets) for v in value]
    return value
