"""Checking a caller's bearer token: a JWT access token of the configured issuer for this gateway.

A JWT is checked with PyJWT against the issuer's keys (`gateway.identity.keys`): signature (asymmetric algorithms
only), issuer, audience (RFC 8707: the gateway's resource identifier must be among `aud`), expiry and not-before,
with `leeway` seconds of clock skew; a token that passed is kept (by its SHA-256) until it expires, so a client's
next requests with it cost a hash, or until the keys are fetched again (the key that signed it may be withdrawn). A
token that is no JWT is introspected (RFC 7662) when `introspection` is configured, else refused; an introspection
answer is kept until the token expires, at most `INTROSPECTION_TTL`.

Reasons given back (`TokenRejected`) are for the caller and the log; none quotes the token.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from ..errors import TokenExpired, TokenRejected
from .keys import SIGNING_ALGORITHMS, IssuerKeys, fetch_json

if TYPE_CHECKING:  # PyJWT (and cryptography under it) is imported when a first token is checked, not at start-up
    import jwt

INTROSPECTION_TTL = 60.0
"""Seconds an introspection answer is trusted (a revoked opaque token stops working within this)."""
INTROSPECTION_CACHE = 10_000
CHECKED_CACHE = 10_000
"""JWTs already checked, kept until they expire: a client sends the same token with every request, and checking
its signature again each time is the whole cost of a token over a key."""


@dataclass(slots=True, frozen=True)
class VerifiedToken:
    """A checked access token: who it speaks for and what it says."""

    subject: str
    claims: Mapping[str, Any] = field(repr=False)
    expires_at: float | None = None
    """Epoch seconds (`exp`)."""

    @property
    def scopes(self) -> frozenset[str]:
        scope = self.claims.get("scope")
        if isinstance(scope, str):
            return frozenset(scope.split())
        if isinstance(scope, list):  # some servers write `scp` / `scope` as a list
            return frozenset(str(s) for s in scope)
        scp = self.claims.get("scp")
        return frozenset(str(s) for s in scp) if isinstance(scp, list) else frozenset()


@dataclass(slots=True, frozen=True)
class Introspection:
    """RFC 7662 introspection for opaque tokens: the endpoint and the gateway's client credentials there."""

    url: str | None
    """None: the issuer's `introspection_endpoint` from its metadata."""
    client_id: str
    client_secret: str = field(repr=False)


class TokenVerifier:
    """Checks bearer tokens for one issuer and audience.

    Args:
        keys: the issuer's metadata and keys.
        audience: this gateway's resource identifier (a token's `aud` must name it).
        leeway: seconds of clock skew allowed on `exp` and `nbf`.
        introspection: how to check opaque tokens (None: they are refused).
    """

    def __init__(self, keys: IssuerKeys, audience: str, *, leeway: float = 30.0,
                 introspection: Introspection | None = None) -> None:
        self.keys = keys
        self.audience = audience
        self.leeway = leeway
        self.introspection = introspection
        self._introspected: OrderedDict[bytes, tuple[float, VerifiedToken]] = OrderedDict()
        self._checked: OrderedDict[bytes, VerifiedToken] = OrderedDict()
        self._generation = keys.generation

    @property
    def issuer(self) -> str:
        return self.keys.issuer

    async def verify(self, token: str) -> VerifiedToken:
        """The checked token; TokenRejected (why) or AuthServerUnavailable (the keys cannot be had)."""
        if token.count(".") == 2:
            self.keys.renew_if_old()
            if self._generation != self.keys.generation:  # new keys: a key checked with before may be withdrawn
                self._checked.clear()
                self._generation = self.keys.generation
            digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
            checked = self._checked.get(digest)
            if checked is not None and (checked.expires_at or 0) + self.leeway > time.time():
                return checked
            verified = await self._verify_jwt(token)
            self._checked[digest] = verified
            while len(self._checked) > CHECKED_CACHE:
                self._checked.popitem(last=False)
            return verified
        if self.introspection is not None:
            return await self._introspect(token)
        # Reached when the bearer matched no client key either: a caller on a retired (rotated) key reads that, not
        # only that its key "is not a JWT".
        raise TokenRejected("The credential is neither a client key of this gateway nor a JWT access token (and no "
                            "introspection is configured).")

    async def _verify_jwt(self, token: str) -> VerifiedToken:
        import jwt

        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            raise TokenRejected("The token is not a well-formed JWT.") from None
        issuer = await self.keys.expected_issuer()
        # The issuer first: a token of another issuer must not make the gateway fetch keys.
        if unverified.get("iss") != issuer:
            raise TokenRejected("The token was issued by another issuer.")
        algorithm = header.get("alg")
        if algorithm not in SIGNING_ALGORITHMS:
            raise TokenRejected(f"The token's algorithm {str(algorithm)[:20]!r} is not accepted.")
        kid = header.get("kid")
        candidates = await self.keys.keys_for(kid if isinstance(kid, str) else None, algorithm)
        if not candidates:
            raise TokenRejected("The token is signed with a key the issuer does not publish.")
        failure: jwt.PyJWTError | None = None
        for key in candidates:
            try:
                claims = jwt.decode(token, key=key, algorithms=[algorithm], audience=self.audience, issuer=issuer,
                                    leeway=self.leeway, options={"require": ["exp", "iss", "aud", "sub"]})
            except jwt.InvalidSignatureError as error:
                failure = error
                continue
            except jwt.ExpiredSignatureError as error:  # PyJWT checks the signature before the claims
                raise TokenExpired(_reason(error)) from None
            except jwt.PyJWTError as error:
                raise TokenRejected(_reason(error)) from None
            return VerifiedToken(subject=str(claims["sub"]), claims=claims, expires_at=float(claims["exp"]))
        raise TokenRejected(_reason(failure or jwt.InvalidSignatureError()))

    async def _introspect(self, token: str) -> VerifiedToken:
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        now = time.time()
        cached = self._introspected.get(digest)
        if cached is not None and cached[0] > now:
            return cached[1]
        assert self.introspection is not None
        url = self.introspection.url or (await self.keys.metadata()).introspection_endpoint
        if url is None:
            raise TokenRejected("The token is not a JWT, and the issuer names no introspection endpoint.")
        status, body = await fetch_json(self.keys.http, "POST", url, "introspection", timeout=self.keys.timeout,
                                        data={"token": token, "token_type_hint": "access_token"},
                                        auth=httpx.BasicAuth(self.introspection.client_id,
                                                             self.introspection.client_secret))
        if status != 200 or not isinstance(body, dict):
            raise TokenRejected(f"The token could not be introspected (HTTP {status}).")
        if body.get("active") is not True:
            raise TokenRejected("The token is not active.")
        issuer = await self.keys.expected_issuer()
        if body.get("iss") not in (None, issuer):
            raise TokenRejected("The token was issued by another issuer.")
        audiences = body.get("aud")
        if self.audience not in (audiences if isinstance(audiences, list) else [audiences]):
            raise TokenRejected("The token was issued for another audience.")
        exp = body.get("exp")
        if isinstance(exp, (int, float)) and exp + self.leeway < now:
            raise TokenExpired("The token has expired.")
        subject = body.get("sub")
        if not isinstance(subject, str) or not subject:
            raise TokenRejected("The token names no subject.")
        verified = VerifiedToken(subject=subject, claims=body,
                                 expires_at=float(exp) if isinstance(exp, (int, float)) else None)
        until = min(now + INTROSPECTION_TTL, verified.expires_at or now + INTROSPECTION_TTL)
        self._introspected[digest] = (until, verified)
        while len(self._introspected) > INTROSPECTION_CACHE:
            self._introspected.popitem(last=False)
        return verified


def _reason(error: jwt.PyJWTError) -> str:
    import jwt

    if isinstance(error, jwt.ExpiredSignatureError):
        return "The token has expired."
    if isinstance(error, jwt.ImmatureSignatureError):
        return "The token is not valid yet (nbf)."
    if isinstance(error, jwt.InvalidAudienceError):
        return "The token was issued for another audience."
    if isinstance(error, jwt.InvalidIssuerError):
        return "The token was issued by another issuer."
    if isinstance(error, jwt.InvalidSignatureError):
        return "The token's signature does not verify."
    if isinstance(error, jwt.MissingRequiredClaimError):
        return f"The token has no {error.claim!r} claim."
    return "The token is not valid."
