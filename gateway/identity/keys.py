"""The issuer's metadata (OpenID Connect discovery, else RFC 8414) and its signing keys, cached.

Keys are fetched once and kept `max_age` seconds (`gateway.auth.keys_max_age`): a set held longer is fetched again
in the background at its next use (tokens are checked with the held keys meanwhile, and still are if that fetch
fails), so a key the issuer withdrew stops working within that time. A token signed by a key the set does not hold
makes one refetch (the issuer
rotated its keys), at most once per `refresh_interval` (after a failed fetch, per `asking.RETRY_AFTER`), whether
that fetch worked or not, so that tokens with made-up `kid`s cannot make the gateway hammer the issuer (while the
issuer's last answer was a failure, such a token is 503, not 401: whether its key exists cannot be known). The
callers that need the server share one fetch (`gateway.identity.asking`): those that waited share the answer, a
failure is told at once to the callers of the next seconds, and a fetch slower than its callers' wait goes on for
the next callers. Each caller waits at most `timeout` seconds (`gateway.auth_server_timeout`). PyJWT parses the
keys (`PyJWK`); the fetching is ours, on the gateway's async HTTP client, because PyJWT's own `PyJWKClient` fetches
with blocking urllib."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from ..config.settings import DEFAULT_AUTH_SERVER_TIMEOUT, DEFAULT_KEYS_MAX_AGE
from ..errors import AuthServerUnavailable
from .asking import BOUND_SETTING, Asking, not_in_time

if TYPE_CHECKING:  # PyJWT (and cryptography under it) is imported when a key set is first read, not at start-up
    import jwt

logger = logging.getLogger("gateway.identity")

DEFAULT_TIMEOUT = DEFAULT_AUTH_SERVER_TIMEOUT
SIGNING_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512",
                                "EdDSA", "Ed25519"})
"""Asymmetric algorithms only: an `HS256` token would be checked with a public key as its secret, and `none`
is no signature at all."""


@dataclass(slots=True, frozen=True)
class IssuerMetadata:
    """What the gateway uses of an authorization server's metadata."""

    issuer: str
    jwks_uri: str | None = None
    token_endpoint: str | None = None
    authorization_endpoint: str | None = None
    introspection_endpoint: str | None = None


EXPIRY_MARGIN = 30.0
"""Seconds before its expiry at which a token the gateway holds is renewed (half its life for short-lived ones)."""


def usable_for(expires_in: float) -> float:
    """How long a token that `expires_in` seconds may be used before it is renewed."""
    return max(expires_in - min(EXPIRY_MARGIN, expires_in / 2), 0.0)


async def fetch_json(http: httpx.AsyncClient, method: str, url: str, what: str, *, timeout: float,
                     setting: str = "gateway.auth_server_timeout", **kwargs: Any) -> tuple[int, Any]:
    """(status, parsed JSON or None) of one request to an authorization server, waiting at most `timeout` seconds
    for each step (connecting, sending, each read; `setting` names where that figure comes from);
    AuthServerUnavailable when it cannot be reached, does not answer in time, answers 5xx, or answers something
    that is not JSON with a 2xx."""
    where = where_asked(what, url)
    try:
        response = await http.request(method, url, timeout=httpx.Timeout(timeout), **kwargs)
    except httpx.TimeoutException:
        raise not_in_time(timeout, where, setting) from None
    except httpx.ConnectError:
        raise AuthServerUnavailable(f"the authorization server is unreachable: no connection ({where})") from None
    except httpx.HTTPError as error:
        raise AuthServerUnavailable(f"the authorization server is unreachable ({where}: "
                                    f"{type(error).__name__})") from None
    if response.status_code >= 500:
        raise AuthServerUnavailable(f"the authorization server failed ({where}: HTTP {response.status_code})")
    try:
        body = response.json()
    except (ValueError, UnicodeDecodeError):
        if 200 <= response.status_code < 300:
            raise AuthServerUnavailable(f"the authorization server's {where} is not JSON") from None
        body = None
    return response.status_code, body


def where_asked(what: str, url: str) -> str:
    """`what` was asked of the server at `url`'s origin (the path may hold a tenant's name: not in messages)."""
    return f"{what} at {_origin(url)}"


def _origin(url: str) -> str:
    parsed = httpx.URL(url)
    return f"{parsed.scheme}://{parsed.netloc.decode('ascii')}"


def discovery_urls(issuer: str) -> list[str]:
    """OpenID Connect discovery first, then RFC 8414 (whose well-known part goes before the issuer's path)."""
    base = issuer.rstrip("/")
    parsed = httpx.URL(base)
    origin = f"{parsed.scheme}://{parsed.netloc.decode('ascii')}"
    path = parsed.path.rstrip("/")
    return [f"{base}/.well-known/openid-configuration", f"{origin}/.well-known/oauth-authorization-server{path}"]


async def discover(http: httpx.AsyncClient, issuer: str, *, timeout: float = DEFAULT_TIMEOUT,
                   setting: str = "gateway.auth_server_timeout") -> IssuerMetadata:
    """The issuer's metadata; its `issuer` must be the configured one (a trailing slash aside)."""
    for url in discovery_urls(issuer):
        status, body = await fetch_json(http, "GET", url, "discovery", timeout=timeout, setting=setting)
        if status == 200 and isinstance(body, dict):
            found = str(body.get("issuer") or "")
            if found.rstrip("/") != issuer.rstrip("/"):
                raise AuthServerUnavailable(f"the discovery document at {url} names issuer {found!r}, "
                                            f"not {issuer!r}")

            def text(key: str, document: dict[str, Any] = body) -> str | None:
                value = document.get(key)
                return value if isinstance(value, str) and value else None

            return IssuerMetadata(issuer=found, jwks_uri=text("jwks_uri"), token_endpoint=text("token_endpoint"),
                                  authorization_endpoint=text("authorization_endpoint"),
                                  introspection_endpoint=text("introspection_endpoint"))
    raise AuthServerUnavailable(f"the authorization server {issuer} publishes no metadata "
                                "(neither OpenID Connect discovery nor RFC 8414)")


class IssuerKeys:
    """The issuer's metadata and signing keys, fetched when first needed.

    Args:
        http: the client the fetches go out on.
        issuer: the configured issuer.
        jwks_uri: the key set's URL when discovery should not be asked for it.
        refresh_interval: seconds between two refetches caused by unknown keys.
        timeout: seconds each request to the issuer waits for its answer.
        max_age: seconds a fetched key set is used before it is fetched again.
    """

    def __init__(self, http: httpx.AsyncClient, issuer: str, *, jwks_uri: str | None = None,
                 refresh_interval: float = 5.0, timeout: float = DEFAULT_TIMEOUT,
                 max_age: float = DEFAULT_KEYS_MAX_AGE) -> None:
        self.http = http
        self.issuer = issuer
        self._jwks_uri = jwks_uri
        self.refresh_interval = refresh_interval
        self.timeout = timeout
        self.max_age = max_age
        self.generation = 0
        """How many key sets were fetched: a token checked with an older one is checked again."""
        self._fetched_at = float("-inf")
        self._metadata: IssuerMetadata | None = None
        self._keys: list[_Key] | None = None
        self._last_refresh = float("-inf")
        self._discovering: Asking[IssuerMetadata] = Asking()
        self._fetching: Asking[list[_Key]] = Asking()

    async def metadata(self) -> IssuerMetadata:
        if self._metadata is None:
            self._metadata = await self._discovering.ask(self._discover, wait=self.timeout,
                                                         where=where_asked("discovery", self.issuer))
        return self._metadata

    async def _discover(self, bound: float) -> IssuerMetadata:
        self._metadata = await discover(self.http, self.issuer, timeout=bound, setting=BOUND_SETTING)
        return self._metadata

    async def expected_issuer(self) -> str:
        """The issuer as the server spells it (what `iss` must say)."""
        if self._jwks_uri is not None and self._metadata is None:
            return self.issuer
        return (await self.metadata()).issuer

    async def keys_for(self, kid: str | None, algorithm: str) -> list[jwt.PyJWK]:
        """The keys that may have signed a token with this `kid` and `alg` (refetched once if none is known)."""
        keys = self._keys if self._keys is not None else await self._refresh(None, counted=False)
        found = _matching(keys, kid, algorithm)
        if found:
            return found
        since = time.monotonic() - self._last_refresh
        failed = self._fetching.last_failure
        # After a failure, asked again sooner: the server is found again within seconds of its return, and one that
        # is down still gets one request every few seconds however many callers need it.
        wait = self.refresh_interval if failed is None else min(self.refresh_interval, self._fetching.retry_after)
        if since < wait:
            if failed is not None:  # the last refetch failed: the key may well be the issuer's
                raise AuthServerUnavailable(f"{failed}; the token's key is not among those fetched before, and the "
                                            f"key set is asked again in {wait - since:.1f} s",
                                            retry_after=wait - since)
            return found
        return _matching(await self._refresh(keys, counted=True), kid, algorithm)

    async def _refresh(self, seen: list[_Key] | None, *, counted: bool) -> list[_Key]:
        """Fetch the key set, unless another caller did since `seen` was read (or failed: then its failure)."""
        uri = self._jwks_uri or (await self.metadata()).jwks_uri
        if uri is None:
            raise AuthServerUnavailable(f"the authorization server {self.issuer} names no jwks_uri")
        if self._keys is not None and self._keys is not seen:  # another caller's fetch answered meanwhile
            return self._keys
        return await self._fetching.ask(self._fetcher(uri, counted), wait=self.timeout,
                                        where=where_asked("key set", uri))

    def renew_if_old(self) -> None:
        """Start fetching a key set held past `max_age` again, for nobody to wait on: once it answers, a key the
        issuer withdrew checks no token."""
        uri = self._jwks_uri or (self._metadata.jwks_uri if self._metadata is not None else None)
        if self._keys is not None and uri is not None and time.monotonic() - self._fetched_at >= self.max_age:
            self._fetching.start(self._fetcher(uri, False), wait=self.timeout, where=where_asked("key set", uri))

    def _fetcher(self, uri: str, counted: bool) -> Callable[[float], Awaitable[list[_Key]]]:
        async def fetch(bound: float) -> list[_Key]:
            try:
                self._keys = await self._fetch(uri, bound)
            finally:  # counted once it ended, answered or not: unknown kids ask once per interval (a
                if counted:  # caller arriving meanwhile waits for this answer instead of a 401)
                    self._last_refresh = time.monotonic()
            self._fetched_at, self.generation = time.monotonic(), self.generation + 1
            return self._keys

        return fetch

    async def _fetch(self, uri: str, bound: float) -> list[_Key]:
        status, body = await fetch_json(self.http, "GET", uri, "key set", timeout=bound, setting=BOUND_SETTING)
        if status != 200 or not isinstance(body, dict) or not isinstance(body.get("keys"), list):
            raise AuthServerUnavailable(f"the authorization server's key set at {_origin(uri)} answered HTTP {status}"
                                        + ("" if status != 200 else " without a list of `keys`"))
        import jwt

        keys: list[_Key] = []
        for entry in body["keys"]:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK(entry)
            except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError, json.JSONDecodeError):
                continue  # a key type PyJWT cannot use: no token of ours is checked with it
            alg = entry.get("alg")
            keys.append(_Key(key, alg if isinstance(alg, str) else None))
        logger.info("fetched %d signing key(s) of %s", len(keys), self.issuer)
        return keys


@dataclass(slots=True, frozen=True)
class _Key:
    jwk: jwt.PyJWK
    alg: str | None
    """The key's own `alg`, when its JWK names one (then only that algorithm may use it)."""


def _matching(keys: list[_Key], kid: str | None, algorithm: str) -> list[jwt.PyJWK]:
    return [key.jwk for key in keys if (kid is None or key.jwk.key_id == kid) and _fits(key, algorithm)]


def _fits(key: _Key, algorithm: str) -> bool:
    """A key that names its `alg` fits that one; one that does not fits its type's (RSA: RS*, PS*; EC: ES*)."""
    if key.alg is not None:
        return key.alg == algorithm
    kty = key.jwk.key_type
    return (kty == "RSA" and algorithm[:2] in ("RS", "PS")) or (kty == "EC" and algorithm.startswith("ES")) or (
        kty == "OKP" and algorithm in ("EdDSA", "Ed25519"))
