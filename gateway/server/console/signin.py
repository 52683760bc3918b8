"""Signing in to the console with a client key, and out again."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ...errors import TooManyWrongKeys
from ..auth import client_address, too_many_wrong_keys
from ..routes import read_json
from .rendering import json_error, viewer_of
from .session import Sessions, SignedOut

if TYPE_CHECKING:
    from .rendering import Console


def routes(console: Console) -> list[Route]:
    async def signin_page(request: Request) -> Response:
        base = request.scope.get("root_path", "")
        if console.sessions.open:
            return RedirectResponse(f"{base}/agents", status_code=303)
        target = _safe_next(request.query_params.get("next"))
        # on the way to a connect link's start page: say whose sign-in it needs
        return console.render(request, "signin.html", next=target, connecting=target.startswith("/connect?"))

    async def signin(request: Request) -> Response:
        body = await read_json(request)
        key = body.get("key") if isinstance(body, dict) else None
        if not isinstance(key, str) or not key.strip():
            return json_error(400, "Enter a client key.", param="key")
        guard, address = console.safety.wrong_keys, client_address(request.scope)
        try:
            guard.check(address)  # a guessing address is refused before its key is looked at
            try:
                cookie = await console.sessions.sign_in(key.strip())
            except SignedOut as exc:  # a genuine token, no guess: not counted against the address
                return json_error(401, str(exc), code="signed_out")
            if cookie is None:
                await guard.failed(address)
                return json_error(401, "That key (or access token) is not valid.", code="invalid_key")
        except TooManyWrongKeys as exc:
            return too_many_wrong_keys(exc).response()
        base = request.scope.get("root_path", "")
        answer = JSONResponse({"next": base + _safe_next(body.get("next"))})
        Sessions.set_cookie(answer, cookie, secure=request.url.scheme == "https", path=base or "/")
        return answer

    async def signout(request: Request) -> Response:
        await console.sessions.sign_out(viewer_of(request))  # the cookie is refused from now on, not just forgotten
        answer = JSONResponse({"next": request.scope.get("root_path", "") + "/signin"})
        Sessions.clear_cookie(answer, path=request.scope.get("root_path", "") or "/")
        return answer

    return [
        Route("/signin", signin_page, methods=["GET"]),
        Route("/signin", signin, methods=["POST"]),
        Route("/signout", signout, methods=["POST"]),
    ]


def _safe_next(target: object) -> str:
    """A path inside the console to go to after signing in (never another site)."""
    if isinstance(target, str) and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/agents"
