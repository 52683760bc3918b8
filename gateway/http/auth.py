"""Credential injection per `apis.<name>.auth`: bearer, basic, api_key (header/query/cookie), OAuth2
client credentials (token fetched, cached until shortly before it expires, refreshed under a lock), and the
per-user kinds: `token_exchange` (the caller's access token exchanged for the api's, `gateway.identity.exchange`)
and `user_oauth` (the user's own connection, `gateway.identity.connections`). The caller's own token is never sent.

Credentials are only ever attached to requests for the api's own origin (see `gateway.http.client`), and
the names they occupy are reserved: the model's arguments can never set or override them.
"""

from __future__ import annotations

import asyncio
import base64
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..catalog import Tool
from ..config.credentials import AuthConfig, ClientCredentialsAuth, TokenExchangeAuth
from ..errors import ApiSetupError, UserRequired
from ..identity.connections import Connections
from ..identity.exchange import ExchangeSettings, TokenExchanger, required_scopes
from ..identity.keys import DEFAULT_TIMEOUT, usable_for
from ..kernel.caller import Caller, current_caller
from ..kernel.redaction import Redactor

_DEFAULT_TOKEN_LIFETIME = 300.0


@dataclass(slots=True)
class Credentials:
    """What the auth layer adds to one request."""

    headers: dict[str, str] = field(default_factory=dict)
    query: list[tuple[str, str]] = field(default_factory=list)
    cookies: list[tuple[str, str]] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)
    """Per-user tokens in these credentials: scrubbed from what this call answers (the redactor learns only the
    manifest's and the gateway's own tokens, not one per user and call)."""


PER_USER = ("token_exchange", "user_oauth")


def reserved_names(auth: list[AuthConfig]) -> set[tuple[str, str]]:
    """(location, lower-case name) pairs the credentials occupy; arguments may not set these."""
    names: set[tuple[str, str]] = set()
    for config in auth:
        if config.type in ("bearer", "basic", "oauth2_client_credentials", *PER_USER):
            names.add(("header", "authorization"))
        elif config.type == "api_key" and config.name:
            names.add((config.location or "header", config.name.lower()))
    return names


@dataclass(slots=True)
class _Token:
    value: str
    expires_at: float


class Authenticator:
    """Turns an api's auth configuration into credentials for each request.

    Args:
        api: the api's name (for error messages).
        auth: its credentials, all applied at once.
        redactor: learns every fetched access token.
        client: used for OAuth2 token requests.
        schemes: the spec's security schemes (which scopes an operation's `security` asks for).
        connections: users' own connections (`user_oauth`).
        auth_server_timeout: seconds a token exchange waits for its server (`gateway.auth_server_timeout`).
    """

    def __init__(self, api: str, auth: list[AuthConfig], redactor: Redactor, client: httpx.AsyncClient, *,
                 schemes: dict[str, Any] | None = None, connections: Connections | None = None,
                 auth_server_timeout: float = DEFAULT_TIMEOUT) -> None:
        self.api = api
        self.auth = list(auth)
        self._redactor = redactor
        self._client = client
        self._schemes = schemes or {}
        self._connections = connections
        self._auth_server_timeout = auth_server_timeout
        self._tokens: dict[int, _Token] = {}
        self._static: Credentials | None = None
        """The credentials of an api without tokens to fetch (none per user either), built on the first call and
        read-only thereafter: the same for every call and caller."""
        self._lock = asyncio.Lock()
        self._exchangers: dict[int, TokenExchanger] = {}
        for config in self.auth:
            if config.type == "basic":
                redactor.add_basic(config.username, config.password)

    @property
    def reserved(self) -> set[tuple[str, str]]:
        return reserved_names(self.auth)

    @property
    def static(self) -> Credentials | None:
        """The credentials every call of this api carries, once the first call built them (`credentials`); None
        while they are not built yet, or when they are fetched or made per user and call."""
        return self._static

    async def credentials(self, tool: Tool | None = None) -> Credentials:
        """What one request of `tool` carries; per-user kinds raise a `UserCredentialError` (nothing is sent)."""
        static = self._static
        if static is not None:
            return static
        creds = Credentials()
        for index, config in enumerate(self.auth):
            if config.type == "bearer":
                creds.headers["Authorization"] = f"Bearer {self._require(config.token, 'token')}"
            elif config.type == "basic":
                pair = f"{config.username or ''}:{config.password or ''}".encode()
                creds.headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
            elif config.type == "api_key":
                name = self._require(config.name, "name")
                value = self._require(config.value, "value")
                if config.location == "query":
                    creds.query.append((name, value))
                elif config.location == "cookie":
                    creds.cookies.append((name, value))
                else:
                    creds.headers[name] = value
            elif config.type == "oauth2_client_credentials":
                creds.headers["Authorization"] = f"Bearer {await self._token(index, config)}"
            elif config.type in PER_USER:
                token = await (self._exchanged(index, config, tool) if isinstance(config, TokenExchangeAuth)
                               else self._connected())
                creds.headers["Authorization"] = f"Bearer {token}"
                creds.secrets.append(token)
        if not self.has_tokens:  # nothing fetched at run time, nothing per user: the same on every call
            self._static = creds
        return creds

    @property
    def has_tokens(self) -> bool:
        return any(config.type in ("oauth2_client_credentials", *PER_USER) for config in self.auth)

    def invalidate(self) -> None:
        """Forget cached tokens (after the upstream answered 401): the gateway's, and the caller's exchanged ones."""
        self._tokens.clear()
        token = current_caller().token
        if token is not None:
            for exchanger in self._exchangers.values():
                exchanger.forget(token.value)

    def _user(self, how: str, *, token: bool) -> Caller:
        """The signed-in user this call is for (with their access token when `token`); UserRequired if none."""
        caller = current_caller()
        if caller.subject is None or (token and caller.token is None):
            who = f"client {caller.client!r}" if caller.client else "this caller"
            raise UserRequired(f"{self.api} is called as the signed-in user ({how}), but {who} "
                               + ("signed in with a key, not a user's access token" if caller.subject is None else
                                  "holds no access token of that user (a call resumed by someone else)")
                               + "; nothing was sent")
        return caller

    async def _connected(self) -> str:
        caller = self._user("the user's own connection", token=False)
        if self._connections is None:
            raise ApiSetupError(f"apis.{self.api}.auth: user_oauth needs the gateway's store (gateway serve)")
        assert caller.subject is not None
        return await self._connections.access_token(self.api, caller.subject, caller.client)

    async def _exchanged(self, index: int, config: TokenExchangeAuth, tool: Tool | None) -> str:
        caller = self._user("token exchange", token=True)
        assert caller.token is not None
        exchanger = self._exchangers.get(index)
        if exchanger is None:
            settings = ExchangeSettings(api=self.api, token_url=self._require(config.token_url, "token_url"),
                                        client_id=self._require(config.client_id, "client_id"),
                                        client_secret=self._require(config.client_secret, "client_secret"),
                                        resource=config.resource, audience=config.audience, scope=config.scope)
            exchanger = self._exchangers[index] = TokenExchanger(settings, self._client,
                                                                 timeout=self._auth_server_timeout)
        scopes = required_scopes(tool.security, self._schemes) if tool is not None else []
        return await exchanger.token(caller.token.value, scopes)

    def _require(self, value: str | None, key: str) -> str:
        if not value:
            raise ApiSetupError(f"apis.{self.api}.auth: `{key}` is missing")
        return value

    async def _token(self, index: int, config: ClientCredentialsAuth) -> str:
        token = self._tokens.get(index)
        if token is not None and token.expires_at > time.monotonic():
            return token.value
        async with self._lock:
            # Another call may have refreshed it while this one waited.
            token = self._tokens.get(index)
            if token is not None and token.expires_at > time.monotonic():
                return token.value
            token = await self._fetch_token(config)
            self._tokens[index] = token
            return token.value

    async def _fetch_token(self, config: ClientCredentialsAuth) -> _Token:
        url = self._require(config.token_url, "token_url")
        client_id = self._require(config.client_id, "client_id")
        secret = self._require(config.client_secret, "client_secret")
        data = {"grant_type": "client_credentials"}
        if config.scopes:
            data["scope"] = " ".join(config.scopes)
        try:
            response = await self._client.post(url, data=data, auth=(client_id, secret),
                                                headers={"Accept": "application/json"})
        except httpx.HTTPError as error:
            raise ApiSetupError(f"apis.{self.api}.auth: token request to {url} failed: {error}") from None
        try:
            payload = response.json() if response.status_code == 200 else None
        except ValueError:
            payload = None
        if not isinstance(payload, dict) or not isinstance(payload.get("access_token"), str):
            excerpt = self._redactor.text(response.text[:200])
            raise ApiSetupError(
                f"apis.{self.api}.auth: the token endpoint answered HTTP {response.status_code}: {excerpt}"
            )
        value = payload["access_token"]
        self._redactor.add(value)
        try:
            seconds = float(payload["expires_in"]) if payload.get("expires_in") is not None else _DEFAULT_TOKEN_LIFETIME
        except (TypeError, ValueError):
            seconds = _DEFAULT_TOKEN_LIFETIME
        return _Token(value=value, expires_at=time.monotonic() + usable_for(seconds))
