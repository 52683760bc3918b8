"""The cookie that binds a connect link to its owner's browser (`gateway.identity.connections`).

The console's start page sets it, in the browser signed in as the link's owner, just before sending that browser to
the api's provider; `GET /connections/callback` reads it back and clears it. It is SameSite=Lax because it must come
back on the provider's top-level redirect (the console's own cookie is Strict and would not), HttpOnly, scoped to
the callback's path, and lives no longer than the link. One cookie per link, so two links opened at once in one
browser (two tabs, two apis) do not undo each other.
"""

from __future__ import annotations

import hashlib
import time
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from ..identity.connections import Authorization

PREFIX = "gateway_connect_"


def cookie_name(state: str) -> str:
    # named by a digest of the state rather than the state itself: the cookie jar need not hold a second copy of it
    return PREFIX + hashlib.sha256(state.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def set_nonce_cookie(response: Response, state: str, authorization: Authorization) -> None:
    callback = urlsplit(authorization.callback)
    lifetime = max(1, int(authorization.expires - time.time()))
    response.set_cookie(cookie_name(state), authorization.nonce, max_age=lifetime, path=callback.path or "/",
                        httponly=True, samesite="lax", secure=callback.scheme == "https")


def nonce_of(request: Request, state: str) -> str | None:
    return request.cookies.get(cookie_name(state)) or None


def clear_nonce_cookie(response: Response, request: Request, state: str) -> None:
    """Forget the link's nonce in this browser, whatever the callback answered (the state is spent by then)."""
    response.delete_cookie(cookie_name(state), path=request.url.path, httponly=True, samesite="lax",
                           secure=request.url.scheme == "https")
