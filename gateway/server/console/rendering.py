"""What every console page shares: the `Console` (templates, the safety layer, sessions), rendering a page, the
viewer of a request, the JSON error shape, and the request charge of a run or a chat."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.templating import Jinja2Templates

from ...errors import RateLimited, StoreUnavailable
from ..api_errors import APIError
from .session import Sessions, Viewer

if TYPE_CHECKING:
    from ..supervision import Safety

logger = logging.getLogger("gateway.server.console")
HERE = Path(__file__).parent
VIEWER = "gateway.console.viewer"
"""The scope key where the gate leaves the `Viewer`."""
Page = Callable[[Request], Awaitable[Response]]


def viewer_of(request: Request) -> Viewer:
    return request.scope[VIEWER]  # type: ignore[no-any-return]


class Console:
    def __init__(self, safety: Safety) -> None:
        """The browser console on the safety layer's store, approvals and audit log.

        Parameters:
            safety: the gateway's safety layer (client keys, approvals, audit).
        """
        self.safety = safety
        self.sessions = Sessions(lambda: safety.keys, safety.store, lambda: safety.identity,
                                 wrong_keys=safety.wrong_keys)
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.filters["pretty"] = _pretty

    def render(self, request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
        viewer = request.scope.get(VIEWER)
        base = request.scope.get("root_path", "")
        return self.templates.TemplateResponse(
            request, template, {"viewer": viewer, "base": base, "open": self.sessions.open, **context},
            status_code=status_code)

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


STORE_DOWN_RETRY_SECONDS = 5
"""The `Retry-After` of the console's page when the store is down."""


def store_down_page(console: Console, request: Request, exc: StoreUnavailable) -> Response:
    """The console's 503 page when the store (or Redis) does not answer: which part, the driver's reason, what to
    do. Rendered without a viewer: who is signed in is itself kept in the store."""
    logger.error("GET %s: %s", request.scope["path"], exc)
    redis = str(exc).startswith("Redis")
    request.scope.pop(VIEWER, None)
    query = request.scope.get("query_string", b"").decode("latin-1")
    again = request.scope["path"]  # the whole path, the console's mount and any root path in it (the gate's view)
    answer = console.render(request, "unavailable.html", status_code=503, title="Store unavailable",
                            part="Redis" if redis else "The gateway's store",
                            part_lower="Redis" if redis else "the store",
                            setting="gateway.redis" if redis else "gateway.store", message=str(exc),
                            again=again + (f"?{query}" if query else ""))
    answer.headers["Retry-After"] = str(STORE_DOWN_RETRY_SECONDS)
    return answer


def json_error(status: int, message: str, code: str | None = None, *, param: str | None = None,
               **extra: Any) -> JSONResponse:
    """The OpenAI-shaped error every door answers with (`extra` beside `error`)."""
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return JSONResponse({"error": error, **extra}, status_code=status)


def _pretty(value: Any) -> str:
    import json

    return json.dumps(value, indent=2, ensure_ascii=False, default=str)
