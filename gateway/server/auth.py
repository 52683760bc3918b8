"""Callers: client keys, per-client agents, per-request rate limits.

With `clients` in agents.yaml, every door but `/healthz`, `/readyz` and `/openapi.json` needs
`Authorization: Bearer <key>` (401 otherwise). Keys are kept only as SHA-256 digests and compared with
`hmac.compare_digest` against every entry (no early exit), so neither memory nor timing gives a key
away. Without `clients` anyone on the network could spend the providers' and APIs' credentials, so a
non-loopback bind is refused unless explicitly allowed (`check_bind`, and again per request from the socket
the server accepted on).

Two parts, because who the caller is can be known before routing and which agent it asks for only after:

- `AuthMiddleware` (outside the router) authenticates the request and leaves an `Access` in the scope.
- `AgentGate` (a route's own middleware) admits the *routed* agent: `scope["path_params"]["agent"]` as the
  router matched it, so a URL prefix (an ASGI `root_path` behind a proxy) changes nothing. A door whose agent
  is in the body (chat and responses: `model`) calls `admit_agent(scope, name)` once it has parsed it.
  Admitting charges the client's and the agent's rate-limit buckets (429 with `Retry-After`), refuses another
  client's agent (403) and binds the caller (client, agent) for the audit log. Lists of agents are filtered by
  `allowed_agents`.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from starlette.types import ASGIApp, Receive, Scope, Send

from ..asgi import StatusWatch
from ..config.model import ClientConfig
from ..errors import (
    AuthServerUnavailable,
    IdentityError,
    NoClient,
    RateLimited,
    TokenExpired,
    TokenRejected,
    TooManyWrongKeys,
)
from ..identity.asking import RETRY_AFTER
from ..identity.connections import CALLBACK_PATH
from ..identity.resource import METADATA_PATH, ResourceServer, challenge, metadata_url
from ..kernel.caller import UserToken, bind_caller
from ..safety.ratelimit import RateLimiter
from ..safety.rights import Rights
from ..safety.wrong_keys import WrongKeys
from .api_errors import APIError

logger = logging.getLogger("gateway.auth")

PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", CALLBACK_PATH})
"""Open to everyone: health, the gateway's own OpenAPI document, and where a provider sends a user back after they
connected an account (the one-time `state` it carries is the proof)."""
CHAT_PATHS = frozenset({"/v1/chat/completions", "/v1/responses"})
"""The doors that run an agent named by the body's `model` (each admits it with `admit_agent`)."""
RIGHTS = "gateway.rights"
"""The scope key where the auth layer (or the console's gate) leaves the caller's `Rights`."""
AGENT = "gateway.agent"
"""The scope key where the door leaves the agent it admitted (`admit_agent`, `AgentGate`, the direct-call door): the
chat door's failed-chat row and the MCP door read it there rather than working it out again."""
CONSOLE_PREFIX = "/console"
"""The browser console signs its users in with a session cookie of its own (gateway.server.console)."""


@dataclass(slots=True, frozen=True)
class Client:
    name: str
    agents: frozenset[str]
    """`*` means every agent."""
    admin: bool = False
    """`clients.<name>.admin: true`: every agent, the whole audit log, every approval."""
    approver: bool = False
    """`clients.<name>.approver: true`: decides the pending calls of its agents."""

    def may_use(self, agent: str) -> bool:
        return self.admin or "*" in self.agents or agent in self.agents

    def visible_agents(self) -> set[str] | None:
        return None if self.admin or "*" in self.agents else set(self.agents)

    @property
    def rights(self) -> Rights:
        """What this client may do with the work of others (`gateway.safety.rights`)."""
        visible = self.visible_agents()
        return Rights(client=self.name, agents=None if visible is None else frozenset(visible), admin=self.admin,
                      approver=self.approver)


class ClientKeys:
    def __init__(self, clients: Mapping[str, ClientConfig] | Iterable[ClientConfig]) -> None:
        """The clients of one manifest, keys hashed at once (the plain keys are not kept here)."""
        configs = clients.values() if isinstance(clients, Mapping) else clients
        configs = list(configs)
        # A rotation's former keys (`previous_key`) come after every current one: they are no session's secret.
        self._entries = [(_digest(c.key), client_of(c), False) for c in configs if c.key] + \
            [(_digest(c.previous_key), client_of(c), True) for c in configs if c.previous_key]
        self._by_name = {c.name: client_of(c) for c in configs}
        self._has_clients = bool(configs)
        self._previous_said: dict[str, float] = {}

    def __bool__(self) -> bool:
        """Whether callers must say who they are (any client, of a key or of token claims)."""
        return self._has_clients

    def identify(self, key: str) -> Client | None:
        digest = _digest(key)
        found = None
        for candidate, client, previous in self._entries:
            if hmac.compare_digest(digest, candidate) and found is None:
                found = client
                if previous and time.monotonic() - self._previous_said.get(client.name, -60.0) >= 60.0:
                    self._previous_said[client.name] = time.monotonic()  # the operator waits for these to stop
                    logger.info("client %r still sends its previous_key (once a minute at most)", client.name)
        return found

    def named(self, name: str) -> Client | None:
        """The client of that name (a token's, found by its claims)."""
        return self._by_name.get(name)

    def session_secret(self, name: str) -> tuple[Client, bytes] | None:
        """The client named `name` and its key's digest, which signs its console sessions (so a session ends
        when its key is changed or removed, and any gateway instance with the same agents.yaml accepts it)."""
        for digest, client, previous in self._entries:
            if client.name == name and not previous:
                return client, digest
        return None


def client_of(config: ClientConfig) -> Client:
    return Client(name=config.name, agents=frozenset(config.agents), admin=config.admin, approver=config.approver)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


@functools.lru_cache(maxsize=256)
def _is_public_ip(host: str) -> bool:
    """The socket the request came in on is a non-loopback IP (not a test client's made-up host name).

    Cached: asked on every request with the server's own address, which never changes."""
    try:
        return not ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def agent_forbidden(agent: str, allowed: Iterable[str]) -> APIError:
    """403 for a key that may not use `agent`, naming the agents it may use: a mistyped agent name then reads as a
    typo, not as a permission the key lacks (the key's own agents are no other client's secret)."""
    mine = ", ".join(sorted(allowed)) or "none"
    return APIError(403, f"This key may not use agent {agent!r}; its agents are: {mine}.", code="agent_forbidden")


class Access:
    """What the auth layer learned of a request, for the gates after routing: its client and the limiter."""

    __slots__ = ("client", "limiter", "checks_nothing")

    def __init__(self, client: Client | None, limiter: RateLimiter | None) -> None:
        self.client = client
        self.limiter = limiter
        self.checks_nothing = client is None and limiter is None
        """No client to hold to its agents and nothing to charge: `admit` would do nothing."""

    async def admit(self, agent: str | None) -> None:
        """Charge the request and check the client may use `agent` (None: a door of no agent); APIError if not."""
        client = self.client
        if client is not None and agent is not None and not client.may_use(agent):
            raise agent_forbidden(agent, client.agents)
        if self.limiter is not None:
            try:
                await self.limiter.check_request(client.name if client else None, agent)
            except RateLimited as exc:
                raise APIError(429, str(exc), headers={"Retry-After": exc.retry_after_header}) from None


def route_path(scope: Scope) -> str:
    """The request's path below the app's `root_path` (as Starlette's router reads it)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root):] or "/" if root and path.startswith(root) else path


_PUBLIC, _CONSOLE, _CHAT, _DOOR = "public", "console", "chat", "door"
_MAX_KINDS = 1024


class AuthMiddleware:
    def __init__(self, app: ASGIApp, keys: Callable[[], ClientKeys], *, limiter: Callable[[], RateLimiter | None]
                 | None = None, allow_public: bool = False, public_paths: Iterable[str] = PUBLIC_PATHS,
                 on_chat_error: Callable[[str | None, int], Awaitable[None]] | None = None,
                 identity: Callable[[], ResourceServer | None] | None = None,
                 wrong_keys: WrongKeys | None = None) -> None:
        """Authenticate every HTTP request; the routes' `AgentGate`s authorize and rate-limit it.

        Parameters:
            app: the gateway's ASGI app.
            keys: the current manifest's `ClientKeys` (a callable, so a hot reload of agents.yaml applies).
            limiter: the current rate limiter; None or a callable returning None: no request limits.
            allow_public: serve non-loopback sockets even without clients.
            public_paths: paths open to everyone (health, the gateway's own OpenAPI document).
            on_chat_error: awaited with (agent, status) when a chat request is answered with an error
                (the audit log's row for chats that never reached the end of a run).
            identity: the current `gateway.auth` resource server (None: static keys only): a bearer that is no
                client key is checked as an access token and mapped to a client by its claims.
            wrong_keys: counts wrong keys (and rejected tokens) per client address and refuses an address that sent
                too many (None: nothing is counted).
        """
        self.app = app
        self.keys = keys
        self.limiter = limiter or (lambda: None)
        self.allow_public = allow_public
        self.public_paths = frozenset(public_paths)
        self.on_chat_error = on_chat_error
        self.identity = identity or (lambda: None)
        self.wrong_keys = wrong_keys
        self._kinds: dict[str, str] = {}
        self._anonymous: tuple[RateLimiter | None, object, dict[str, Any]] | None = None
        """(the limiter, its limits, the scope entries of an anonymous request under them)."""

    def _kind_of(self, path: str) -> str:
        """Which rules a request path falls under (public, the console, a chat door, any other door), remembered
        for the paths seen most: every request asks."""
        if path in self.public_paths or path == METADATA_PATH or path.startswith(METADATA_PATH + "/"):
            kind = _PUBLIC
        elif path == CONSOLE_PREFIX or path.startswith(CONSOLE_PREFIX + "/"):
            kind = _CONSOLE
        elif path.rstrip("/") in CHAT_PATHS:
            kind = _CHAT
        else:
            kind = _DOOR
        if len(self._kinds) < _MAX_KINDS:  # foreign paths cannot grow it without bound
            self._kinds[path] = kind
        return kind

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path = route_path(scope)
        kind = self._kinds.get(path)
        if kind is None:
            kind = self._kind_of(path)
        if kind is _PUBLIC:
            await self.app(scope, receive, send)
            return
        if kind is _CONSOLE:
            try:
                if not self.keys() and self.identity() is None:
                    self._refuse_public_without_keys(scope)
            except APIError as exc:
                await _respond(scope, receive, send, exc)
                return
            await self.app(scope, receive, send)
            return
        keys = self.keys()
        identity = self.identity()
        client: Client | None = None
        token: UserToken | None = None
        try:
            if keys or identity is not None:
                client, token = await self._guarded_authenticate(scope, keys, identity)
            else:  # nobody to tell apart: only the check of a public socket, without a coroutine of its own
                self._refuse_public_without_keys(scope)
        except APIError as exc:
            await _respond(scope, receive, send, exc)
            return
        if client is None:  # what the auth layer leaves of an anonymous request is the same every time
            scope.update(self._anonymous_entries())
        else:
            scope["gateway.client"] = client.name
            scope["gateway.subject"] = token.subject if token else None
            scope["gateway.token"] = token  # the MCP door binds it per message (a 2025 session outlives its request)
            scope["gateway.agents"] = client.visible_agents()
            scope["gateway.access"] = self._access(client)
            scope[RIGHTS] = client.rights if token is None else client.rights.as_user(token.subject)
        notes: dict[str, Any] = {}
        with bind_caller(client=client.name if client else None, started=time.perf_counter(), notes=notes,
                         subject=token.subject if token else None, token=token):
            if self.on_chat_error is not None and kind is _CHAT:
                watch = StatusWatch(send)
                await self.app(scope, receive, watch)
                if watch.status >= 400 and not scope.get("gateway.refused"):
                    agent = scope.get(AGENT)
                    try:
                        await self.on_chat_error(agent if isinstance(agent, str) else None, watch.status)
                    except Exception as exc:  # noqa: BLE001 - the answer has left: raising would break the connection
                        logger.error("the failed chat's audit row was not written: %s", exc)
            else:
                await self.app(scope, receive, send)

    def _access(self, client: Client | None) -> Access:
        # Without client or agent limits configured, nothing is charged per request: no limiter to ask.
        limiter = self.limiter()
        return Access(client, limiter if limiter is not None and limiter.limits_requests else None)

    def _anonymous_entries(self) -> dict[str, Any]:
        """The scope entries of a request without a client (no keys and no sign-in configured): no client, user,
        token or agent list, open rights, and one `Access`, the same while the limiter and its limits are."""
        limiter = self.limiter()
        anonymous = self._anonymous
        if anonymous is not None and anonymous[0] is limiter and (limiter is None or anonymous[1] is limiter.limits):
            return anonymous[2]
        entries: dict[str, Any] = {"gateway.client": None, "gateway.subject": None, "gateway.token": None,
                                   "gateway.agents": None, "gateway.access": self._access(None), RIGHTS: Rights.OPEN}
        self._anonymous = (limiter, None if limiter is None else limiter.limits, entries)
        return entries

    def _refuse_public_without_keys(self, scope: Scope) -> None:
        """403 for a request on a non-loopback socket of a gateway with no client keys (unless allowed)."""
        server = scope.get("server")
        if not self.allow_public and server and _is_public_ip(str(server[0])):
            raise APIError(403, "This gateway has no client keys and is reachable beyond loopback; the operator "
                                "must add `clients` to agents.yaml (or start it with --allow-public).",
                           code="public_without_keys")

    async def _guarded_authenticate(self, scope: Scope, keys: ClientKeys,
                                    identity: ResourceServer | None) -> tuple[Client | None, UserToken | None]:
        """`_authenticate`, with wrong keys (and rejected tokens) counted per client address and a guessing address
        refused (429) before its key is looked at."""
        guard = self.wrong_keys if keys and _bearer(scope) is not None else None
        if guard is None:
            return await self._authenticate(scope, keys, identity)
        address = client_address(scope)
        try:
            guard.check(address)
            try:
                return await self._authenticate(scope, keys, identity)
            except APIError as exc:
                if exc.status == 401 and not isinstance(exc, ExpiredTokenAnswer):
                    await guard.failed(address)
                raise
        except TooManyWrongKeys as exc:
            raise too_many_wrong_keys(exc) from None

    async def _authenticate(self, scope: Scope, keys: ClientKeys,
                            identity: ResourceServer | None) -> tuple[Client | None, UserToken | None]:
        """The request's client (and user) by its key or token, when there are keys or sign-in to tell callers
        apart; APIError when it has neither."""
        key = _bearer(scope)
        client = keys.identify(key) if key else None
        if client is not None:
            return client, None
        if key and identity is not None:
            return await self._token_client(scope, keys, identity, key)
        # the address too: with --no-access-log this line is all the log says of a caller guessing keys
        logger.info("refused a request from %s to %s: %s", client_address(scope) or "-", scope["path"],
                    "bad key" if key else "no key")
        if identity is not None:
            raise APIError(401, "A valid access token (or client key) is required: send `Authorization: Bearer "
                                "<token>`; the metadata named in WWW-Authenticate says where to sign in.",
                           code="invalid_token", headers={"WWW-Authenticate": challenge(_metadata_of(scope))})
        raise APIError(401, "A valid key is required: send `Authorization: Bearer <key>`." if not key
                       else "The key is not valid.", headers={"WWW-Authenticate": "Bearer"})

    async def _token_client(self, scope: Scope, keys: ClientKeys, identity: ResourceServer,
                            token: str) -> tuple[Client, UserToken]:
        try:
            name, verified = await identity.authenticate(token)
        except TokenRejected as exc:
            logger.info("refused a token from %s for %s: %s", client_address(scope) or "-", scope["path"], exc)
            answer = ExpiredTokenAnswer if isinstance(exc, TokenExpired) else APIError
            raise answer(401, str(exc), code="invalid_token", headers={
                "WWW-Authenticate": challenge(_metadata_of(scope), "invalid_token", str(exc))}) from None
        except NoClient as exc:
            raise APIError(403, str(exc), code="no_client") from None
        except AuthServerUnavailable as exc:
            logger.warning("cannot check a token: %s", exc)
            # Retry-After: what is left of the failure's remembered window (when the provider is asked again).
            after = exc.retry_after if exc.retry_after is not None else RETRY_AFTER
            raise APIError(503, f"The token cannot be checked now: {exc}.", code="auth_unavailable",
                           headers={"Retry-After": str(max(1, math.ceil(after)))}) from None
        except IdentityError as exc:  # pragma: no cover - every kind is named above
            raise APIError(exc.status, str(exc)) from None
        client = keys.named(name)
        if client is None:  # pragma: no cover - the rules are built from the same clients
            raise APIError(403, "The token's client is gone.", code="no_client")
        return client, UserToken(value=token, subject=verified.subject, expires_at=verified.expires_at)


def _metadata_of(scope: Scope) -> str:
    """The protected-resource metadata URL for this request: per MCP agent, else the gateway's."""
    scheme = scope.get("scheme", "http")
    host = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"), None)
    if host is None:
        server = scope.get("server") or ("127.0.0.1", 80)
        host = f"{server[0]}:{server[1]}"
    base = f"{scheme}://{host}{scope.get('root_path', '')}"
    path = route_path(scope)
    # The path arrives decoded and is the requester's text: escaped, it stays inside the URL and the header's
    # quoted string (redteam45: `/mcp/x", resource_metadata="https://evil...` named a second metadata, the
    # attacker's, in a link on the gateway's own domain; a line break made the header invalid, the answer lost).
    return metadata_url(base, quote(path, safe="/") if path.startswith("/mcp/") else "")


async def admit_agent(scope: Scope, agent: str | None) -> None:
    """Admit a request for `agent` (charged, checked, remembered for the audit); APIError when refused.

    For doors whose agent is not in the path (chat's `model`); routed doors have `AgentGate` do it."""
    access = scope.get("gateway.access")
    if isinstance(access, Access):
        try:
            await access.admit(agent)
        except APIError:
            scope["gateway.refused"] = True  # refused at the door: no chat ran, so no chat row either
            raise
    if agent is not None:
        scope[AGENT] = agent


def path_agent(scope: Scope) -> str | None:
    """The agent the router matched: the `agent` path parameter."""
    agent = scope.get("path_params", {}).get("agent")
    return agent if isinstance(agent, str) else None


class AgentGate:
    """A route's middleware: admits the agent the router matched (`path_params["agent"]`, or none)."""

    def __init__(self, app: ASGIApp, agent_of: Callable[[Scope], str | None] = path_agent) -> None:
        """Parameters: app: the route's app; agent_of: the request's agent after routing (the MCP door also
        takes it from `?agent=`)."""
        self.app = app
        self.agent_of = agent_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        agent = self.agent_of(scope)
        access = scope.get("gateway.access")
        if isinstance(access, Access) and access.checks_nothing:  # `admit_agent` without its coroutine
            if agent is not None:
                scope[AGENT] = agent
        else:
            try:
                await admit_agent(scope, agent)
            except APIError as exc:
                await _respond(scope, receive, send, exc)
                return
        if agent is None:
            await self.app(scope, receive, send)
            return
        with bind_caller(agent=agent):
            await self.app(scope, receive, send)


def client_address(scope: Scope) -> str | None:
    """The address the request came from (uvicorn's `--proxy-headers` puts the forwarded one there)."""
    client = scope.get("client")
    return str(client[0]) if client else None


class ExpiredTokenAnswer(APIError):
    """The 401 for a genuine token past its expiry: its client refreshes it and tries again, which is no guessing
    (it is not counted against the address as a wrong key)."""


def too_many_wrong_keys(exc: TooManyWrongKeys) -> APIError:
    return APIError(429, f"{exc} Keys sent from here are not looked at meanwhile.", code="too_many_wrong_keys",
                    headers={"Retry-After": exc.retry_after_header})


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            header: str = value.decode("latin-1")
            scheme, _, token = header.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return None
    return None


async def _respond(scope: Scope, receive: Receive, send: Send, error: APIError) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    await error.response()(scope, receive, send)


def rights_of(scope: Mapping[str, Any]) -> Rights:
    """The request's `Rights`; none at all for a request the auth layer did not see."""
    rights = scope.get(RIGHTS)
    return rights if isinstance(rights, Rights) else Rights.NOBODY


def allowed_agents(scope: Mapping[str, Any]) -> set[str] | None:
    """The agents the request's client may use (None: all, i.e. no clients configured or `*`)."""
    agents = scope.get("gateway.agents")
    return agents if isinstance(agents, set) else None
