"""The access log of `gateway serve`, as a plain ASGI middleware: uvicorn's line, written after the answer left.

uvicorn writes its access line while the response is still being sent, so making the record, formatting it and
writing it to a terminal or pipe lie on the path of every answer. `AccessLog` logs the same message with the
same five arguments (so uvicorn's `AccessFormatter` renders it, colours included) to the logger
`gateway.access`, on the event loop's next turn after the app is done. `gateway serve`'s logging configuration
(`gateway.server.run.log_config`) gives that logger uvicorn's access handler and leaves uvicorn's own access
logger without one (uvicorn then skips its line). Lines keep their order.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import quote

from starlette.types import ASGIApp, Receive, Scope, Send

from ..asgi import StatusWatch

ACCESS_FORMAT = '%s - "%s %s HTTP/%s" %d'
"""uvicorn's access message and its five arguments: client address, method, path with query, HTTP version, status."""


class AccessLog:
    def __init__(self, app: ASGIApp, logger: logging.Logger | None = None) -> None:
        """Parameters: app: the ASGI app; logger: where lines go (`gateway.access` by default)."""
        self.app = app
        self.logger = logger or logging.getLogger("gateway.access")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.logger.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        watch = StatusWatch(send)
        try:
            await self.app(scope, receive, watch)
        finally:
            asyncio.get_running_loop().call_soon(self._log, scope, watch.status)

    def _log(self, scope: Scope, status: int) -> None:
        client = scope.get("client")
        address = f"{client[0]}:{client[1]}" if client else "-"
        path = quote(scope["path"])
        if scope.get("query_string"):
            path += "?" + scope["query_string"].decode("ascii", "replace")
        self.logger.info(ACCESS_FORMAT, address, scope["method"], path, scope.get("http_version", "1.1"), status)
