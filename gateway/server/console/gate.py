"""The console's door: its routes under `/console` and the sign-in gate in front of them.

`mount_console(safety)` is one Starlette `Mount`; `create_app` adds it to the gateway's routes when the safety layer
is on, so the console shares the store, the approval manager, the audit log and the call pipeline of every other
door. Every request passes `ConsoleGate` first: it finds the viewer (`session.Sessions`), sends a browser that
must sign in to the sign-in page, refuses a state-changing request without the page's CSRF token, and binds
the viewer as the caller, so the audit log names who ran a tool or decided an approval.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route, Router
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...errors import StoreUnavailable, TooManyWrongKeys
from ...kernel.caller import bind_caller
from ..api_errors import APIError
from ..auth import RIGHTS, too_many_wrong_keys
from . import catalog_pages, chat_page, connections_page, oversight_pages, signin, tryout
from .rendering import HERE, VIEWER, Console, store_down_page
from .session import Sessions, csrf_ok

if TYPE_CHECKING:
    from ..supervision import Safety

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                           "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
"""Only the console's own files run, load and are posted to, and no page of it may be framed: a decoy page framing
the approvals inbox got one click to approve a pending write (issue #27)."""
GUARD_HEADERS = ((b"content-security-policy", CONTENT_SECURITY_POLICY.encode()), (b"x-frame-options", b"DENY"),
                 (b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"same-origin"),
                 (b"cache-control", b"no-store"))
"""`no-store`: a page shows one viewer's rows, and a browser kept it: after sign-out, Back showed the next person at
the machine the audit log and approvals of the one who left (redteam45)."""
_GUARDED = frozenset(name for name, _ in GUARD_HEADERS)


def mount_console(safety: Safety) -> Mount:
    """The console under `/console`, every page behind the gate, on the safety layer's store, approvals and audit
    log."""
    console = Console(safety)
    routes = [
        Route("/", _home, methods=["GET"]),
        *signin.routes(console),
        *catalog_pages.routes(console),
        *tryout.routes(console),
        *chat_page.routes(console),
        *oversight_pages.routes(console),
        *connections_page.routes(console),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    return Mount("/console", app=ConsoleGate(Router(routes), console))


class ConsoleGate:
    def __init__(self, app: ASGIApp, console: Console) -> None:
        """Sign-in, CSRF and the caller's binding for every console request, and a page of its own when the store
        is down.

        Parameters:
            app: the console's router.
            console: renders pages; its sessions recognise signed-in viewers.
        """
        self.app = app
        self.console = console
        self.sessions: Sessions = console.sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False
        guarded = _guarded(send)

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await guarded(message)

        try:
            await self._gate(scope, receive, watched)
        except StoreUnavailable as exc:
            # A page a browser navigated to gets a page saying what is down and what to do (the API's doors keep
            # their JSON 503, and so do the console's own JSON requests, whose script shows the message).
            if started or scope["method"] != "GET":
                raise
            await store_down_page(self.console, Request(scope, receive), exc)(scope, receive, guarded)

    async def _gate(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        root = scope.get("root_path", "")
        path = scope["path"][len(root):] if scope["path"].startswith(root) else scope["path"]
        # The console's own files need nobody; every other path asks the store whether the session was signed out.
        static = path.startswith("/static/")
        try:
            viewer = await (self.sessions.viewer(request) if static else self.sessions.current(request))
        except TooManyWrongKeys as exc:  # the cookie's token from an address out of guesses: not looked at
            await too_many_wrong_keys(exc).response()(scope, receive, send)
            return
        if path == "/signin" or path.startswith("/static/"):
            scope[VIEWER] = viewer
            await self.app(scope, receive, send)
            return
        if viewer is None:
            response: Response
            if scope["method"] in STATE_CHANGING:
                response = APIError(401, "Sign in to the console first.", code="console_signin").response()
            else:
                target = path + (f"?{scope['query_string'].decode('latin-1')}" if scope.get("query_string") else "")
                response = RedirectResponse(f"{root}/signin?next={quote(target)}", status_code=303)
            await response(scope, receive, send)
            return
        if scope["method"] in STATE_CHANGING and not csrf_ok(request, viewer):
            refused = APIError(403, "The console's CSRF token is missing or wrong; reload the page.",
                               code="csrf_failed")
            await refused.response()(scope, receive, send)
            return
        scope[VIEWER] = viewer
        scope["gateway.client"] = viewer.name
        scope["gateway.agents"] = viewer.agent_set
        scope[RIGHTS] = viewer.rights  # the console decides and reads as its signed-in client
        # The agent a page acts for, bound for the whole request (a chat streams after its endpoint returned),
        # so audit rows and per-agent limits name it as on the API's doors.
        scope["gateway.subject"] = viewer.subject
        with bind_caller(client=viewer.name, agent=_agent_in(path), started=time.perf_counter(), notes={},
                         subject=viewer.subject):
            await self.app(scope, receive, send)


def _guarded(send: Send) -> Send:
    """`send` with the console's guard headers on every answer (pages, JSON, static files, redirects, refusals)."""

    async def guarded(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in _GUARDED]
            message = {**message, "headers": [*headers, *GUARD_HEADERS]}
        await send(message)

    return guarded


def _agent_in(path: str) -> str | None:
    parts = [p for p in path.split("/") if p]  # ASGI paths arrive decoded
    if len(parts) >= 2 and parts[0] in ("agents", "chat"):
        return parts[1]
    return None


async def _home(request: Request) -> Response:
    return RedirectResponse(f"{request.scope.get('root_path', '')}/agents", status_code=303)
