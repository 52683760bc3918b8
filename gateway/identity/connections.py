"""Each user's own connection to an api: `apis.<name>.auth: {type: user_oauth}`.

A user connects once. The link the gateway hands out (a tool error, `POST /connections/<api>`, an MCP URL
elicitation, the console) is its own start page, `/console/connect?state=...`, not the provider's: holding the link
proves nothing about who follows it (a user may forward it, and the MCP specification warns that a URL is no proof
of identity). The start page (`gateway.server.console.connections_page`) lets through only a browser signed in to the
console as the user and client the link was made for; there `authorize` binds the `state` kept in the store to a
fresh nonce (its SHA-256 kept with the state, the nonce in a cookie of that browser only) and the browser goes on to
the api's authorization endpoint with PKCE (S256). The provider sends it back to `GET /connections/callback`, where
`finish` takes the state (once, expired or not) and exchanges the code only when the browser's nonce matches. The
tokens are kept in the store encrypted with Fernet (`GATEWAY_CONNECTIONS_KEY`: one key, or several separated by
commas, the first encrypting: a rotation), so every instance on the same PostgreSQL sees the connection. An access
token that expires is refreshed with the refresh token, once for all of a user's calls that need it
(`gateway.identity.asking`: they share its answer or its failure rather than each waiting for the provider in turn,
and a refresh slower than their wait still stores the provider's new tokens, whose refresh token may be the only one
that still works); a refresh token the provider refuses ends the connection (every call that waited for it, and the
next, says how to connect again). If another instance refreshed first (rotated refresh tokens), its stored result
is used.

Endpoints and client come from the spec's `authorizationCode` flow or the configuration; `redirect_uri` is the
gateway's callback as registered at the provider, and the start page is on the same origin (the nonce cookie must
come back to the callback).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import httpx

from ..errors import ApiSetupError, ForeignConnectLink, NotConnected
from ..store.base import ConnectionRecord, PendingConnection, Store
from .asking import BOUND_SETTING, Asking
from .keys import DEFAULT_TIMEOUT, fetch_json, usable_for, where_asked
from .sealing import KEY_VARIABLE, MAKE_A_KEY

if TYPE_CHECKING:  # cryptography is imported when a key is read, not at every start-up
    from cryptography.fernet import MultiFernet

CALLBACK_PATH = "/connections/callback"
START_PATH = "/console/connect"
"""The start page every connect link points to (the console's: it knows who the browser is signed in as)."""
PENDING_SECONDS = 600.0
"""How long a connect link works."""


@dataclass(slots=True, frozen=True)
class UserOAuthSettings:
    """One api's `user_oauth`: where its users sign in, and as which client the gateway asks."""

    api: str
    authorization_url: str
    token_url: str
    client_id: str
    redirect_uri: str
    client_secret: str | None = field(default=None, repr=False)
    scopes: tuple[str, ...] = ()
    resource: str | None = None
    """An RFC 8707 resource indicator to ask the token for (some providers need one)."""

    @property
    def start_url(self) -> str:
        """The gateway's start page on the callback's origin (and under its path prefix, if it has one), so the
        nonce cookie the start page sets is one the callback receives."""
        parts = urlsplit(self.redirect_uri)
        prefix = parts.path[:-len(CALLBACK_PATH)] if parts.path.endswith(CALLBACK_PATH) else ""
        return urlunsplit((parts.scheme, parts.netloc, prefix + START_PATH, "", ""))


@dataclass(slots=True, frozen=True)
class Authorization:
    """What the start page hands the owner's browser: where to sign in at the provider, and the nonce to keep."""

    url: str
    """The provider's authorization endpoint with this state and its PKCE challenge."""
    nonce: str = field(repr=False)
    """For the browser's cookie only; the store keeps its SHA-256."""
    expires: float
    """When the link stops working (epoch seconds): the cookie need not outlive it."""
    callback: str
    """The `redirect_uri` the provider sends the browser back to: the cookie's origin and path."""


class Connections:
    """Users' connections to the `user_oauth` apis of the current agents.yaml.

    Args:
        store: where connections and pending authorizations live (shared by instances on PostgreSQL).
        http: the client token requests go out on.
        cipher: encrypts the stored tokens (None: `GATEWAY_CONNECTIONS_KEY` is unset; connecting is refused).
        timeout: seconds a token request waits for the provider's answer (`gateway.auth_server_timeout`).
    """

    def __init__(self, store: Store, http: httpx.AsyncClient, cipher: MultiFernet | None, *,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        self.store = store
        self.http = http
        self.cipher = cipher
        self.timeout = timeout
        self.apis: dict[str, UserOAuthSettings] = {}
        self._refreshing: weakref.WeakValueDictionary[tuple[str, str], Asking[str]] = weakref.WeakValueDictionary()
        """Per user and api, while some call of theirs needs a refresh (a user's failure is not another's)."""

    def configure(self, apis: Mapping[str, UserOAuthSettings]) -> None:
        self.apis = dict(apis)

    def _settings(self, api: str) -> UserOAuthSettings:
        settings = self.apis.get(api)
        if settings is None:
            raise ApiSetupError(f"apis.{api}.auth: no user_oauth configured")
        return settings

    def _cipher(self) -> MultiFernet:
        if self.cipher is None:
            raise ApiSetupError(f"users' connections need {KEY_VARIABLE} (a Fernet key) in the gateway's "
                                f"environment: their tokens are stored encrypted ({MAKE_A_KEY}; the same on every "
                                "instance)")
        return self.cipher

    # -- connecting ---------------------------------------------------------------------------------
    async def begin(self, api: str, subject: str, client: str | None) -> str:
        """A link to the start page that connects `subject`'s account to `api` (valid `PENDING_SECONDS`, once, and
        only in a browser signed in as `subject` of `client`)."""
        settings = self._settings(api)
        self._cipher()
        state = secrets.token_urlsafe(24)
        now = time.time()
        await self.store.add_pending_connection(PendingConnection(
            state=state, subject=subject, api=api, verifier=secrets.token_urlsafe(48), client=client, created=now,
            expires=now + PENDING_SECONDS))
        return f"{settings.start_url}?{urlencode({'state': state})}"

    async def authorize(self, state: str, subject: str, client: str | None) -> Authorization:
        """The start page, in a browser signed in as `subject` of `client`: bind `state` to a fresh nonce for this
        browser and say where to sign in at the provider. Opening the link again re-binds it (the newest browser
        of its owner wins). ForeignConnectLink when the link was made for someone else: it is spent, so a link that
        reached another user's hands is worth nothing to anyone; ApiSetupError when it expired or was used."""
        pending = await self.store.take_pending_connection(state, time.time())  # put back below, bound
        if pending is None:
            raise ApiSetupError("this connect link has expired or was used already; ask for a new one")
        if (pending.subject, pending.client) != (subject, client):
            raise ForeignConnectLink("this connect link was made for another user; it no longer works (whoever "
                                     "asked for it can ask for a new one), and nothing was connected")
        settings = self._settings(pending.api)
        nonce = secrets.token_urlsafe(32)
        pending.browser = _digest(nonce)
        await self.store.add_pending_connection(pending)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(pending.verifier.encode()).digest()).rstrip(b"=").decode()
        query = {"response_type": "code", "client_id": settings.client_id, "redirect_uri": settings.redirect_uri,
                 "state": state, "code_challenge": challenge, "code_challenge_method": "S256"}
        if settings.scopes:
            query["scope"] = " ".join(settings.scopes)
        if settings.resource:
            query["resource"] = settings.resource
        separator = "&" if "?" in settings.authorization_url else "?"
        return Authorization(url=settings.authorization_url + separator + urlencode(query), nonce=nonce,
                             expires=pending.expires, callback=settings.redirect_uri)

    async def finish(self, state: str, code: str, nonce: str | None) -> ConnectionRecord:
        """The provider sent a browser back: if it holds the nonce the start page gave the link's owner, exchange
        the code and keep the tokens. The state is spent either way. ForeignConnectLink for another browser (the
        code is not even exchanged); ApiSetupError with a reason for the rest."""
        pending = await self.store.take_pending_connection(state, time.time())
        if pending is None:
            raise ApiSetupError("this connect link has expired or was used already; ask for a new one")
        if pending.browser is None or nonce is None or not hmac.compare_digest(_digest(nonce), pending.browser):
            raise ForeignConnectLink("this sign-in did not start in the browser of the user who asked for the link "
                                     "(open the link itself, signed in to the gateway's console as that user); "
                                     "nothing was connected")
        settings = self._settings(pending.api)
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": settings.redirect_uri,
                "code_verifier": pending.verifier}
        if settings.resource:
            form["resource"] = settings.resource
        tokens = await self._token_request(settings, form, "code exchange")
        if tokens is None:
            raise ApiSetupError(f"{settings.api}: the provider refused the authorization code")
        now = time.time()
        record = ConnectionRecord(subject=pending.subject, api=pending.api, secret=self._seal(tokens),
                                  scopes=str(tokens.get("scope") or " ".join(settings.scopes)), created=now,
                                  updated=now)
        await self.store.save_connection(record)
        return record

    # -- using --------------------------------------------------------------------------------------
    async def access_token(self, api: str, subject: str, client: str | None) -> str:
        """`subject`'s current access token for `api`, refreshed when it expired; NotConnected with a link."""
        record = await self.store.get_connection(subject, api)
        tokens = self._open(record) if record is not None else None
        if tokens is not None and _fresh(tokens):
            return str(tokens["access_token"])
        asking = self._refreshing.get((subject, api))
        if asking is None:
            asking = self._refreshing[(subject, api)] = Asking(retry_after=0.0, beside=False)
        settings = self._settings(api)
        try:
            return await asking.ask(lambda bound: self._renewed(api, subject, bound), wait=self.timeout,
                                    where=where_asked("token refresh", settings.token_url))
        except _Missing:
            raise await self._not_connected(api, subject, client) from None
        except _Ended:  # told to every call that waited for the refresh, each with a link of its own
            raise await self._not_connected(api, subject, client, ended=True) from None

    async def _renewed(self, api: str, subject: str, bound: float) -> str:
        """The user's access token, refreshed unless another call or instance did; the provider's answer is kept
        even when the calls that asked stopped waiting for it (`bound`: how long it may take)."""
        record = await self.store.get_connection(subject, api)
        tokens = self._open(record) if record is not None else None
        if record is None or tokens is None:
            raise _Missing
        if _fresh(tokens):
            return str(tokens["access_token"])
        settings = self._settings(record.api)
        refresh = tokens.get("refresh_token")
        renewed = None
        if isinstance(refresh, str):
            form = {"grant_type": "refresh_token", "refresh_token": refresh}
            if settings.resource:
                form["resource"] = settings.resource
            renewed = await self._token_request(settings, form, "token refresh", timeout=bound, setting=BOUND_SETTING)
        if renewed is None:
            latest = await self.store.get_connection(record.subject, record.api)
            if latest is not None and latest.updated != record.updated:  # another instance refreshed first
                fresh = self._open(latest)
                if fresh is not None and _fresh(fresh):
                    return str(fresh["access_token"])
            await self.store.delete_connection(record.subject, record.api)
            raise _Ended
        renewed.setdefault("refresh_token", refresh)  # a provider that does not rotate keeps the old one
        record.secret = self._seal(renewed)
        record.updated = time.time()
        await self.store.save_connection(record)
        return str(renewed["access_token"])

    async def _not_connected(self, api: str, subject: str, client: str | None, *, ended: bool = False) -> NotConnected:
        link = await self.begin(api, subject, client)
        why = "the connection to your account ended (the provider refused to renew it)" if ended else \
            "you have not connected your account yet"
        return NotConnected(f"{api} acts with your own account, and {why}: open {link} to connect it (in a "
                            "browser signed in to the gateway's console as you), then try again; nothing was sent",
                            link)

    async def list(self, subject: str) -> list[dict[str, Any]]:
        return [{"api": r.api, "scopes": r.scopes.split(), "connected": _iso(r.created), "refreshed": _iso(r.updated)}
                for r in await self.store.list_connections(subject) if r.api in self.apis]

    async def disconnect(self, subject: str, api: str) -> bool:
        return await self.store.delete_connection(subject, api)

    # -- the provider and the sealed tokens ---------------------------------------------------------
    async def _token_request(self, settings: UserOAuthSettings, form: dict[str, str], what: str, *,
                             timeout: float | None = None,
                             setting: str = "gateway.auth_server_timeout") -> dict[str, Any] | None:
        """The token response; None when the provider refused (`invalid_grant`: the code or refresh token is no
        good); AuthServerUnavailable when it cannot be reached; ApiSetupError for anything else."""
        auth = None
        if settings.client_secret:
            auth = httpx.BasicAuth(settings.client_id, settings.client_secret)
        else:
            form = {**form, "client_id": settings.client_id}
        status, body = await fetch_json(self.http, "POST", settings.token_url, what, data=form, auth=auth,
                                        timeout=timeout or self.timeout, setting=setting,
                                        headers={"Accept": "application/json"})
        if status == 200 and isinstance(body, dict) and isinstance(body.get("access_token"), str):
            expires_in = body.get("expires_in")
            if isinstance(expires_in, (int, float)):  # renewed a little early; short-lived tokens at half-life
                body["refresh_at"] = time.time() + usable_for(expires_in)
            return body
        error = body.get("error") if isinstance(body, dict) else None
        if error == "invalid_grant":
            return None
        raise ApiSetupError(f"apis.{settings.api}.auth: the {what} at {settings.token_url} answered HTTP {status}"
                            f"{f' ({error})' if error else ''}")

    def _seal(self, tokens: Mapping[str, Any]) -> str:
        kept = {key: tokens.get(key) for key in ("access_token", "refresh_token", "refresh_at", "token_type")}
        return self._cipher().encrypt(json.dumps(kept).encode()).decode("ascii")

    def _open(self, record: ConnectionRecord) -> dict[str, Any] | None:
        """The record's tokens; None when no key in `GATEWAY_CONNECTIONS_KEY` opens them (the key changed)."""
        from cryptography.fernet import InvalidToken

        try:
            opened: dict[str, Any] = json.loads(self._cipher().decrypt(record.secret.encode("ascii")))
        except (InvalidToken, ValueError):
            return None
        return opened


class _Missing(Exception):
    """The user has no connection to the api (or none the key opens)."""


class _Ended(Exception):
    """The provider refused the refresh token: the connection was removed."""


def _digest(nonce: str) -> str:
    return hashlib.sha256(nonce.encode("utf-8", "surrogatepass")).hexdigest()


def _fresh(tokens: Mapping[str, Any]) -> bool:
    refresh_at = tokens.get("refresh_at")
    return not isinstance(refresh_at, (int, float)) or refresh_at > time.time()  # no expiry said: used as is


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
