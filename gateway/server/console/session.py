"""Who is looking at the console: sign-in with a client key, a signed session cookie, CSRF tokens.

With `clients` in agents.yaml the sign-in page takes a client key; the answer sets an HttpOnly,
SameSite=Strict cookie `name.expiry.session.signature`, signed with the SHA-256 digest of that client's key
(`session`: a random id of this sign-in). Any instance serving the same agents.yaml accepts the cookie, and
changing or removing the key ends every session signed with it. Signing out ends the session on the server too:
its id is recorded in the store (`Store.end_session`) until it would have expired, and every instance sharing the
store refuses the cookie from then on, so a copy of it (a shared machine, a proxy's log) is worth nothing after
sign-out. With `gateway.auth` the page also takes a user's access token: the cookie is then `t.<token>`, checked
like a bearer on every request (the session ends when the token expires), and the viewer is that user (their client
by claims, their subject: the console shows their connections); a refused token there is a wrong key of its address,
as on the doors (an expired one is not). Its session is the token's SHA-256: signing out records it as a key's is,
so a copy of the cookie, or the token signed in again, opens the console no more (`SignedOut`); the token itself
still works on the API's doors until it expires, as the provider issued it (the gateway does not revoke it there).
The CSRF token is derived from the same secret (or the token) and session, sent in each page and required (header
`X-CSRF-Token`) on every state-changing request.
Without `clients` (a loopback gateway) the console is open, as the API is; CSRF tokens then come from a per-process
secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from ...errors import IdentityError, TokenExpired, TokenRejected
from ...identity.resource import ResourceServer
from ...safety.rights import Rights
from ...safety.wrong_keys import WrongKeys
from ...store import Store
from ..auth import ClientKeys, client_address

COOKIE = "gateway_console"
TOKEN_PREFIX = "t."
"""A cookie holding a user's access token (a key's session cookie starts with the client's name in base64url,
which never contains a dot)."""
SESSION_SECONDS = 8 * 3600
CSRF_HEADER = "x-csrf-token"


@dataclass(slots=True, frozen=True)
class Viewer:
    """The person at the console: a signed-in client, or anyone on loopback when there are no clients."""

    name: str | None
    """The client's name; None on an open console (no `clients`)."""
    admin: bool
    agents: frozenset[str] | None
    """The agents this viewer may see; None: every agent."""
    csrf: str
    subject: str | None = None
    """The signed-in user, when the viewer signed in with an access token."""
    approver: bool = False
    """May decide the pending calls of its agents (`clients.<name>.approver`; admins and an open console do too)."""
    session: str | None = None
    """This sign-in's id (None on an open console), and when it expires (epoch seconds)."""
    expires: float = 0.0

    @property
    def rights(self) -> Rights:
        """What the viewer may do with the work of others: as its client on the API's doors."""
        if self.name is None:
            return Rights.OPEN
        return Rights(client=self.name, agents=self.agents, admin=self.admin, approver=self.approver,
                      subject=self.subject)

    @property
    def decides(self) -> bool:
        return self.rights.decides

    def may_see(self, agent: str) -> bool:
        return self.agents is None or agent in self.agents

    def visible(self, agents: Iterable[str]) -> list[str]:
        return [a for a in agents if self.may_see(a)]

    @property
    def agent_set(self) -> set[str] | None:
        """As the safety layer's `allowed_agents` (None: all)."""
        return None if self.agents is None else set(self.agents)


class SignedOut(Exception):
    """An access token signed out of the console is offered to sign in again."""


class Sessions:
    def __init__(self, keys: Callable[[], ClientKeys], store: Store,
                 identity: Callable[[], ResourceServer | None] = lambda: None, *,
                 wrong_keys: WrongKeys | None = None) -> None:
        """Sign viewers in, recognise them again, and sign them out.

        Parameters:
            keys: the current manifest's client keys (a callable, so a reload of agents.yaml applies at once).
            store: where signed-out sessions are recorded (shared by every instance on it).
            identity: the current `gateway.auth` resource server (None: keys only).
            wrong_keys: counts a cookie's refused token against the sender's address (None: not counted).
        """
        self._keys = keys
        self._store = store
        self._identity = identity
        self._wrong_keys = wrong_keys
        self._open_secret = secrets.token_bytes(32)

    @property
    def open(self) -> bool:
        """No `clients` in agents.yaml: the console needs no sign-in."""
        return not self._keys() and self._identity() is None

    async def sign_in(self, key: str) -> str | None:
        """The cookie value for a valid client key or access token; None for neither; SignedOut for a token
        signed out of the console before."""
        keys = self._keys()
        client = keys.identify(key) if keys else None
        if client is None:
            viewer = await self._token_viewer(key)
            if viewer is not None and viewer.session is not None and await self._store.session_ended(viewer.session):
                raise SignedOut("That access token was signed out of the console; sign in with a new one.")
            return f"{TOKEN_PREFIX}{key}" if viewer is not None else None
        found = keys.session_secret(client.name)
        if found is None:
            return None
        expiry = int(time.time()) + SESSION_SECONDS
        name = base64.urlsafe_b64encode(client.name.encode()).decode().rstrip("=")
        session = secrets.token_urlsafe(16)  # no '.' in it
        return f"{name}.{expiry}.{session}.{_sign(found[1], 'session', client.name, expiry, session)}"

    async def current(self, request: Request) -> Viewer | None:
        """Who sent `request`; None when a sign-in is needed (no cookie, a bad or expired one, a removed key, a
        session signed out)."""
        viewer = await self.viewer(request)
        if viewer is not None and viewer.session is not None and await self._store.session_ended(viewer.session):
            return None
        return viewer

    async def sign_out(self, viewer: Viewer) -> None:
        """End `viewer`'s session on the server: its cookie is refused from now on, wherever it comes from."""
        if viewer.session is not None:
            await self._store.end_session(viewer.session, viewer.expires)

    async def viewer(self, request: Request) -> Viewer | None:
        """Who the cookie of `request` names, without asking the store whether it was signed out (`current` does);
        None when a sign-in is needed (no cookie, a bad or expired one, a removed key, a token no longer valid)."""
        keys = self._keys()
        if self.open:
            return Viewer(name=None, admin=True, agents=None, csrf=_sign(self._open_secret, "csrf", "", 0),
                          approver=True)
        cookie = request.cookies.get(COOKIE, "")
        if cookie.startswith(TOKEN_PREFIX):
            return await self._cookie_token_viewer(cookie[len(TOKEN_PREFIX):], client_address(request.scope))
        try:
            encoded, expiry_text, session, signature = cookie.split(".")
            name = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
            expiry = int(expiry_text)
        except ValueError:  # a missing or mangled cookie (binascii.Error and UnicodeDecodeError are ValueErrors)
            return None
        found = keys.session_secret(name)
        if found is None or expiry < time.time():
            return None
        client, secret = found
        if not hmac.compare_digest(signature, _sign(secret, "session", name, expiry, session)):
            return None
        return Viewer(name=client.name, admin=client.admin,
                      agents=None if client.visible_agents() is None else frozenset(client.agents),
                      csrf=_sign(secret, "csrf", name, expiry, session), approver=client.approver,
                      session=session, expires=float(expiry))

    async def _cookie_token_viewer(self, token: str, address: str | None) -> Viewer | None:
        """The viewer of a cookie's token. The cookie is a bearer like `Authorization` on the doors, so a refused
        token is counted against its address the same way, and an address out of guesses is refused
        (TooManyWrongKeys) before its token is looked at (redteam45: refusals here were not counted, so the cookie
        took unlimited guesses, each one checked: with introspection, each one a request to the provider). An
        expired token is no guess: a user's open pages keep sending it until they sign in again."""
        guard = self._wrong_keys
        if guard is not None:
            guard.check(address)
        try:
            return await self._token_viewer(token, rejections=True)
        except TokenRejected as exc:
            if guard is not None and not isinstance(exc, TokenExpired):
                await guard.failed(address)
            return None

    async def _token_viewer(self, token: str, *, rejections: bool = False) -> Viewer | None:
        """`rejections`: raise TokenRejected rather than answer None for a token the issuer's checks refuse."""
        identity = self._identity()
        if identity is None or not token:
            return None
        try:
            name, verified = await identity.authenticate(token)
        except TokenRejected:
            if rejections:
                raise
            return None
        except IdentityError:  # not a valid token of a client here, or the keys cannot be had now: sign in again
            return None
        client = self._keys().named(name)
        if client is None:
            return None
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        expires = verified.expires_at if verified.expires_at is not None else time.time() + SESSION_SECONDS
        return Viewer(name=client.name, admin=client.admin,
                      agents=None if client.visible_agents() is None else frozenset(client.agents),
                      csrf=_sign(digest, "csrf", client.name, 0), subject=verified.subject, approver=client.approver,
                      session=f"{TOKEN_PREFIX}{digest.hex()}", expires=expires)

    @staticmethod
    def set_cookie(response: Response, value: str, *, secure: bool, path: str) -> None:
        """`path`: the console's own path (the cookie goes to no other door)."""
        response.set_cookie(COOKIE, value, max_age=SESSION_SECONDS, path=path, httponly=True,
                            samesite="strict", secure=secure)

    @staticmethod
    def clear_cookie(response: Response, *, path: str) -> None:
        response.delete_cookie(COOKIE, path=path, httponly=True, samesite="strict")


def csrf_ok(request: Request, viewer: Viewer) -> bool:
    return hmac.compare_digest(request.headers.get(CSRF_HEADER, ""), viewer.csrf)


def _sign(secret: bytes, purpose: str, name: str, expiry: int, session: str = "") -> str:
    message = f"{purpose}|{name}|{expiry}|{session}".encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()
