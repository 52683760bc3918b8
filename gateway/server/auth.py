"""Callers: client keys, per-client agents, per-request rate limits, as one plain ASGI middleware.

With `clients` in agents.yaml, every door but `/healthz` and `/openapi.json` needs
`Authorization: Bearer <key>` (401 otherwise). Keys are kept only as SHA-256 digests and compared with
`hmac.compare_digest` against every entry (no early exit), so neither memory nor timing gives a key
away. A client may use only its `agents` (403 otherwise): the agent is read from the path
(`/agents/{agent}/...`, `/mcp/{agent}`) or, for `POST /v1/chat/completions` and `/v1/responses`, from the
body's `model`; `GET /v1/models` and `GET /agents` are filtered to the client's agents; `/approvals` and `/audit`
filter by `scope["gateway.agents"]`. Without `clients` anyone on the network could spend the
providers' and APIs' credentials, so a non-loopback bind is refused unless explicitly allowed
(`check_bind`, and again per request from the socket the server accepted on).

The middleware also charges each request to its client's and agent's rate-limit buckets (429 with
`Retry-After`) and binds the caller (client, agent) for the audit log.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config.model import ClientConfig
from ..errors import ConfigError
from ..safety.audit import bind_caller
from ..safety.ratelimit import RateLimited, RateLimiter
from .errors import APIError
from .mcp.routing import agent_in_query

logger = logging.getLogger("gateway.auth")

PUBLIC_PATHS = frozenset({"/healthz", "/openapi.json"})
MAX_INSPECTED_BODY = 16 * 1024 * 1024
"""A chat body larger than this is refused here (413): its agent can't be checked without reading it."""
CHAT_PATHS = frozenset({"/v1/chat/completions", "/v1/responses"})
"""The doors that run an agent named by the body's `model`."""
_FILTERED_LISTS = {"/v1/models": "id", "/agents": "name"}


@dataclass(slots=True, frozen=True)
class Client:
    name: str
    agents: frozenset[str]
    """`*` means every agent."""

    def may_use(self, agent: str) -> bool:
        return "*" in self.agents or agent in self.agents

    def visible_agents(self) -> set[str] | None:
        return None if "*" in self.agents else set(self.agents)


class ClientKeys:
    def __init__(self, clients: Mapping[str, ClientConfig] | Iterable[ClientConfig]) -> None:
        """The clients of one manifest, keys hashed at once (the plain keys are not kept here)."""
        configs = clients.values() if isinstance(clients, Mapping) else clients
        self._entries = [(_digest(c.key), Client(name=c.name, agents=frozenset(c.agents))) for c in configs]

    def __bool__(self) -> bool:
        return bool(self._entries)

    def identify(self, key: str) -> Client | None:
        digest = _digest(key)
        found = None
        for candidate, client in self._entries:
            if hmac.compare_digest(digest, candidate) and found is None:
                found = client
        return found


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@functools.lru_cache(maxsize=256)
def _is_public_ip(host: str) -> bool:
    """The socket the request came in on is a non-loopback IP (not a test client's made-up host name).

    Cached: asked on every request with the server's own address, which never changes."""
    try:
        return not ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, clients: Mapping[str, ClientConfig], *, allow_public: bool = False) -> None:
    """Refuse to serve a non-loopback host without client keys (unless the operator said so)."""
    if clients or allow_public or is_loopback(host):
        return
    raise ConfigError(
        f"refusing to listen on {host}: agents.yaml has no `clients`, so anyone who can reach this address could "
        "use every agent and its credentials. Add `clients: {name: {key: ${KEY}, agents: [...]}}` to agents.yaml, "
        "bind to 127.0.0.1, or pass --allow-public if something in front of the gateway authenticates callers."
    )


class AuthMiddleware:
    def __init__(self, app: ASGIApp, keys: Callable[[], ClientKeys], *, limiter: Callable[[], RateLimiter | None]
                 | None = None, allow_public: bool = False, public_paths: Iterable[str] = PUBLIC_PATHS,
                 on_chat_error: Callable[[str | None, int], Awaitable[None]] | None = None) -> None:
        """Authenticate, authorize and rate-limit every HTTP request.

        Parameters:
            app: the gateway's ASGI app.
            keys: the current manifest's `ClientKeys` (a callable, so a hot reload of agents.yaml applies).
            limiter: the current rate limiter; None or a callable returning None: no request limits.
            allow_public: serve non-loopback sockets even without clients.
            public_paths: paths open to everyone (health, the gateway's own OpenAPI document).
            on_chat_error: awaited with (agent, status) when a chat request is answered with an error
                (the audit log's row for chats that never reached the end of a run).
        """
        self.app = app
        self.keys = keys
        self.limiter = limiter or (lambda: None)
        self.allow_public = allow_public
        self.public_paths = frozenset(public_paths)
        self.on_chat_error = on_chat_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] in self.public_paths:
            await self.app(scope, receive, send)
            return
        try:
            keys = self.keys()
            client = self._authenticate(scope, keys)
            agent, receive = await self._target_agent(scope, receive)
            if client is not None and agent is not None and not client.may_use(agent):
                raise APIError(403, f"This key may not use agent {agent!r}.", code="agent_forbidden")
            limiter = self.limiter()
            if limiter is not None:
                await limiter.check_request(client.name if client else None, agent)
        except RateLimited as exc:
            limited = APIError(429, str(exc), headers={"Retry-After": exc.retry_after_header})
            await _respond(scope, receive, send, limited)
            return
        except APIError as exc:
            await _respond(scope, receive, send, exc)
            return
        scope["gateway.client"] = client.name if client else None
        scope["gateway.agents"] = client.visible_agents() if client else None
        notes: dict[str, Any] = {}
        with bind_caller(client=client.name if client else None, agent=agent, started=time.perf_counter(),
                         notes=notes):
            list_key = _FILTERED_LISTS.get(scope["path"].rstrip("/") or "/")
            if client is not None and list_key and scope.get("method") == "GET":
                await self.app(scope, receive, _filtering_send(send, client, list_key))
            elif self.on_chat_error is not None and scope["path"].rstrip("/") in CHAT_PATHS:
                status = 0

                async def watching_send(message: Message) -> None:
                    nonlocal status
                    if message["type"] == "http.response.start":
                        status = message["status"]
                    await send(message)

                await self.app(scope, receive, watching_send)
                if status >= 400:
                    await self.on_chat_error(agent, status)
            else:
                await self.app(scope, receive, send)

    def _authenticate(self, scope: Scope, keys: ClientKeys) -> Client | None:
        if not keys:
            server = scope.get("server")
            if not self.allow_public and server and _is_public_ip(str(server[0])):
                raise APIError(403, "This gateway has no client keys and is reachable beyond loopback; the operator "
                                    "must add `clients` to agents.yaml (or start it with --allow-public).",
                               code="public_without_keys")
            return None
        key = _bearer(scope)
        client = keys.identify(key) if key else None
        if client is None:
            logger.info("refused a request to %s: %s", scope["path"], "bad key" if key else "no key")
            raise APIError(401, "A valid key is required: send `Authorization: Bearer <key>`." if not key
                           else "The key is not valid.", headers={"WWW-Authenticate": "Bearer"})
        return client

    async def _target_agent(self, scope: Scope, receive: Receive) -> tuple[str | None, Receive]:
        parts = [p for p in scope["path"].split("/") if p]
        if len(parts) >= 2 and parts[0] in ("agents", "mcp"):
            return parts[1], receive
        if parts == ["mcp"]:  # the MCP Inspector's path: the agent comes as `?agent=`
            return agent_in_query(scope), receive
        if scope["path"].rstrip("/") in CHAT_PATHS and scope.get("method") == "POST":
            body, replay = await _read_body(receive)
            return _model_of(body), replay
        return None, receive


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return None
    return None


async def _read_body(receive: Receive) -> tuple[bytes, Receive]:
    """Read the whole request body and give back a `receive` that replays it to the app."""
    chunks: list[bytes] = []
    size = 0
    final: Message | None = None
    while True:
        message = await receive()
        if message["type"] != "http.request":
            final = message  # a disconnect before the body ended: pass it on
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_INSPECTED_BODY:
            raise APIError(413, f"The request body is larger than {MAX_INSPECTED_BODY} bytes.")
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            if final is not None:
                return final
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


def _model_of(body: bytes) -> str | None:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None  # the chat route answers 400 for the same bytes
    model = data.get("model") if isinstance(data, dict) else None
    return model if isinstance(model, str) else None


def _filtering_send(send: Send, client: Client, key: str) -> Send:
    """Drop from a `{"data": [...]}` answer the agents this client may not use."""
    start: Message | None = None
    chunks: list[bytes] = []

    async def filtering(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            start = message
            return
        if message["type"] != "http.response.body" or start is None:
            await send(message)
            return
        chunks.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        body = b"".join(chunks)
        if start["status"] == 200:
            body = _filter_list(body, client, key)
        headers = [(n, v) for n, v in start.get("headers", []) if n.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    return filtering


def _filter_list(body: bytes, client: Client, key: str) -> bytes:
    try:
        data = json.loads(body)
    except ValueError:
        return body
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data["data"] = [item for item in data["data"] if isinstance(item, dict) and client.may_use(str(item.get(key)))]
        return json.dumps(data, separators=(",", ":")).encode()
    return body


async def _respond(scope: Scope, receive: Receive, send: Send, error: APIError) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    await error.response()(scope, receive, send)


def allowed_agents(scope: Mapping[str, Any]) -> set[str] | None:
    """The agents the request's client may use (None: all, i.e. no clients configured or `*`)."""
    agents = scope.get("gateway.agents")
    return agents if isinstance(agents, set) else None
