"""The console's door: its routes under `/console`, the sign-in gate in front of them, and page rendering.

`Console(safety).mount()` is one Starlette `Mount`; the safety layer adds it to the gateway's routes, so the
console shares the store, the approval manager, the audit log and the call pipeline of every other door.
Every request passes `ConsoleGate` first: it finds the viewer (`session.Sessions`), sends a browser that
must sign in to the sign-in page, refuses a state-changing request without the page's CSRF token, and binds
the viewer as the caller, so the audit log names who ran a tool or decided an approval.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route, Router
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Receive, Scope, Send

from ...kernel.caller import bind_caller
from ...safety.ratelimit import RateLimited
from ..errors import APIError
from .session import Sessions, Viewer, csrf_ok

if TYPE_CHECKING:
    from ..supervision import Safety

HERE = Path(__file__).parent
VIEWER = "gateway.console.viewer"
"""The scope key where the gate leaves the `Viewer`."""
Page = Callable[[Request], Awaitable[Response]]
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def viewer_of(request: Request) -> Viewer:
    return request.scope[VIEWER]  # type: ignore[no-any-return]


class ConsoleGate:
    def __init__(self, app: ASGIApp, sessions: Sessions) -> None:
        """Sign-in, CSRF and the caller's binding for every console request.

        Parameters:
            app: the console's router.
            sessions: recognises signed-in viewers.
        """
        self.app = app
        self.sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        root = scope.get("root_path", "")
        path = scope["path"][len(root):] if scope["path"].startswith(root) else scope["path"]
        viewer = await self.sessions.viewer(request)
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
        # The agent a page acts for, bound for the whole request (a chat streams after its endpoint returned),
        # so audit rows and per-agent limits name it as on the API's doors.
        scope["gateway.subject"] = viewer.subject
        with bind_caller(client=viewer.name, agent=_agent_in(path), started=time.perf_counter(), notes={},
                         subject=viewer.subject):
            await self.app(scope, receive, send)


class Console:
    def __init__(self, safety: Safety) -> None:
        """The browser console on the safety layer's store, approvals and audit log.

        Parameters:
            safety: the gateway's safety layer (client keys, approvals, audit).
        """
        self.safety = safety
        self.sessions = Sessions(lambda: safety.keys, lambda: safety.identity)
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.filters["pretty"] = _pretty

    def render(self, request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
        viewer = request.scope.get(VIEWER)
        base = request.scope.get("root_path", "")
        return self.templates.TemplateResponse(
            request, template, {"viewer": viewer, "base": base, "open": self.sessions.open, **context},
            status_code=status_code)

    def mount(self) -> Mount:
        from . import catalog_pages, chat_page, connections_page, oversight, signin, tryout

        routes = [
            Route("/", _home, methods=["GET"]),
            *signin.routes(self),
            *catalog_pages.routes(self),
            *tryout.routes(self),
            *chat_page.routes(self),
            *oversight.routes(self),
            *connections_page.routes(self),
            Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
        ]
        return Mount("/console", app=ConsoleGate(Router(routes), self.sessions))

    async def charge(self, viewer: Viewer, agent: str) -> Response | None:
        """Charge a run or a chat to the viewer's and the agent's request buckets, as the API's doors are
        charged; the 429 to answer when one is empty."""
        try:
            await self.safety.limiter.check_request(viewer.name, agent)
        except RateLimited as exc:
            answer = json_error(429, str(exc), code="rate_limited")
            answer.headers["Retry-After"] = exc.retry_after_header
            return answer
        return None

    def page(self, handler: Page) -> Page:
        """A page handler whose refusals (an unknown agent, another key's agent) are an HTML page, not JSON."""

        async def rendered(request: Request) -> Response:
            try:
                return await handler(request)
            except APIError as error:
                return self.render(request, "error.html", status_code=error.status, message=str(error.message),
                                   title="Not here")

        return rendered


def _agent_in(path: str) -> str | None:
    parts = [p for p in path.split("/") if p]  # ASGI paths arrive decoded
    if len(parts) >= 2 and parts[0] in ("agents", "chat"):
        return parts[1]
    return None


async def _home(request: Request) -> Response:
    return RedirectResponse(f"{request.scope.get('root_path', '')}/agents", status_code=303)


def json_error(status: int, message: str, code: str | None = None, *, param: str | None = None,
               **extra: Any) -> JSONResponse:
    """The OpenAI-shaped error every door answers with (`extra` beside `error`)."""
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return JSONResponse({"error": error, **extra}, status_code=status)


def _pretty(value: Any) -> str:
    import json

    return json.dumps(value, indent=2, ensure_ascii=False, default=str)
