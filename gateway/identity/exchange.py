"""RFC 8693 token exchange: the caller's access token traded for one issued to the same user for one api.

`apis.<name>.auth: {type: token_exchange, token_url, client_id, client_secret, resource | audience, scope?}`.
For each call the gateway asks the token endpoint, as its own client, for an access token for the api, with the
caller's token as `subject_token`; the answer is kept until shortly before it expires, per caller token and
scope (one exchange per user and scope set, whatever the number of calls). The scope asked for is `scope` plus
the scopes the operation's OpenAPI `security` names (`required_scopes`).

A refusal for scope (`invalid_scope`) is `InsufficientScope` naming what is missing; a refusal of the caller's
token (`invalid_grant`) is `UserRequired`; an unreachable or failing server is `AuthServerUnavailable`. In every
case nothing is sent to the api. The caller's own token never goes to the api.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..errors import ApiSetupError, InsufficientScope, UserRequired
from .keys import DEFAULT_TIMEOUT, fetch_json, usable_for

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
DEFAULT_LIFETIME = 60.0
"""When the answer has no `expires_in`."""
CACHE_SIZE = 10_000


@dataclass(slots=True, frozen=True)
class ExchangeSettings:
    """One api's token exchange (the fields of `apis.<name>.auth` of `type: token_exchange`)."""

    api: str
    token_url: str
    client_id: str
    client_secret: str = field(repr=False)
    resource: str | None = None
    audience: str | None = None
    scope: str | None = None


def required_scopes(security: Sequence[Mapping[str, Sequence[str]]], schemes: Mapping[str, Any]) -> list[str]:
    """The OAuth scopes an operation's `security` asks for: those of its first alternative that names an oauth2
    or openIdConnect scheme (an alternative is one way to be let in; the gateway takes the first it can meet)."""
    for alternative in security:
        oauth = [name for name in alternative
                 if isinstance(schemes.get(name), Mapping) and schemes[name].get("type") in ("oauth2", "openIdConnect")]
        if oauth:
            return sorted({scope for name in oauth for scope in alternative[name]})
    return []


class TokenExchanger:
    """Exchanges caller tokens for one api's tokens, and keeps them until they expire.

    Args:
        settings: the api's exchange settings.
        http: the client the token requests go out on.
        timeout: seconds an exchange waits for the server's answer (`gateway.auth_server_timeout`).
    """

    def __init__(self, settings: ExchangeSettings, http: httpx.AsyncClient, *,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        self.settings = settings
        self.http = http
        self.timeout = timeout
        self._cache: OrderedDict[tuple[bytes, str], tuple[float, str]] = OrderedDict()
        self._inflight: dict[tuple[bytes, str], asyncio.Future[str]] = {}

    def scope_for(self, required: Sequence[str]) -> str:
        configured = (self.settings.scope or "").split()
        return " ".join(dict.fromkeys([*configured, *required]))

    async def token(self, subject_token: str, required: Sequence[str] = ()) -> str:
        """An access token for the api, issued to the subject of `subject_token`, with `required` scopes."""
        scope = self.scope_for(required)
        key = (hashlib.sha256(subject_token.encode("utf-8", "surrogatepass")).digest(), scope)
        cached = self._cache.get(key)
        if cached is not None and cached[0] > time.monotonic():
            self._cache.move_to_end(key)
            return cached[1]
        pending = self._inflight.get(key)
        if pending is not None:  # the same user's parallel calls share one exchange
            return await asyncio.shield(pending)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            value, lifetime = await self._exchange(subject_token, scope)
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # retrieved: no "never retrieved" warning when nobody else waited
            raise
        finally:
            del self._inflight[key]
        future.set_result(value)
        self._cache[key] = (time.monotonic() + lifetime, value)
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return value

    def forget(self, subject_token: str) -> None:
        """Drop the cached tokens of one caller token (the api answered 401 to one of them)."""
        digest = hashlib.sha256(subject_token.encode("utf-8", "surrogatepass")).digest()
        for key in [k for k in self._cache if k[0] == digest]:
            del self._cache[key]

    async def _exchange(self, subject_token: str, scope: str) -> tuple[str, float]:
        s = self.settings
        form = {"grant_type": GRANT_TYPE, "subject_token": subject_token, "subject_token_type": ACCESS_TOKEN_TYPE,
                "requested_token_type": ACCESS_TOKEN_TYPE}
        if s.resource:
            form["resource"] = s.resource
        if s.audience:
            form["audience"] = s.audience
        if scope:
            form["scope"] = scope
        status, body = await fetch_json(self.http, "POST", s.token_url, "token exchange", data=form,
                                        timeout=self.timeout, auth=httpx.BasicAuth(s.client_id, s.client_secret),
                                        headers={"Accept": "application/json"})
        if status == 200 and isinstance(body, dict) and isinstance(body.get("access_token"), str):
            return body["access_token"], _lifetime(body.get("expires_in"))
        error = body.get("error") if isinstance(body, dict) else None
        description = body.get("error_description") if isinstance(body, dict) else None
        said = f": {str(description)[:300]}" if description else ""
        if error == "invalid_scope":
            named = body.get("scope") if isinstance(body, dict) else None
            missing = str(named).split() if named else scope.split()
            raise InsufficientScope(
                f"the authorization server would not give this user the scope(s) {' '.join(missing)} for "
                f"{s.api}{said}; nothing was sent", missing)
        if error in ("invalid_grant", "invalid_token", "access_denied", "unauthorized_client") and status != 401:
            raise UserRequired(f"the authorization server refused to exchange the caller's token for {s.api} "
                               f"({error}{said}); nothing was sent")
        raise ApiSetupError(f"apis.{s.api}.auth: the token exchange at {s.token_url} answered HTTP {status}"
                            f"{f' ({error})' if error else ''}{said}")


def _lifetime(expires_in: Any) -> float:
    try:
        seconds = float(expires_in) if expires_in is not None else DEFAULT_LIFETIME
    except (TypeError, ValueError):
        seconds = DEFAULT_LIFETIME
    return usable_for(seconds)  # exchanged anew a little before it expires
