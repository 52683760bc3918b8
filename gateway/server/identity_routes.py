"""The identity routes: protected-resource metadata and each signed-in user's own connections to apis.

* `GET /.well-known/oauth-protected-resource` (and per MCP agent below it): RFC 9728, where to sign in.
* `GET /connections`, `POST /connections/{api}`, `DELETE /connections/{api}`: the caller's own connections
  (`auth: {type: user_oauth}` apis); only a signed-in user has any, a client key gets 403 `user_required`.
* `GET /connections/callback`: where an api's provider sends the user back with the code; it connects the account
  only in the browser the console's start page bound the link to (`connect_cookie`), and clears that binding.

The state (the resource server, the connections) is the safety layer's (`gateway.server.supervision.Safety`),
rebuilt there on reloads; these handlers read it on every request.
"""

from __future__ import annotations

import html
import time
from typing import Protocol

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ..errors import ApiSetupError, ForeignConnectLink, IdentityError
from ..identity.connections import CALLBACK_PATH, Connections
from ..identity.resource import METADATA_PATH, ResourceServer
from ..store import Store
from .api_errors import APIError
from .connect_cookie import clear_nonce_cookie, nonce_of


class Safety(Protocol):
    """What these routes read of the safety layer (`gateway.server.supervision.Safety`), on every request."""

    store: Store
    identity: ResourceServer | None

    @property
    def connections(self) -> Connections | None: ...


def identity_routes(safety: Safety) -> list[BaseRoute]:
    """The routes above, on `safety`'s resource server and connections."""
    routes = _IdentityRoutes(safety)
    return [
        Route(METADATA_PATH, routes.resource_metadata, methods=["GET"]),
        Route(METADATA_PATH + "/{path:path}", routes.resource_metadata, methods=["GET"]),
        Route(CALLBACK_PATH, routes.connected, methods=["GET"]),
        Route("/connections", routes.list_connections, methods=["GET"]),
        Route("/connections/{api}", routes.connect, methods=["POST"]),
        Route("/connections/{api}", routes.disconnect, methods=["DELETE"]),
    ]


class _IdentityRoutes:
    def __init__(self, safety: Safety) -> None:
        self.safety = safety

    def _user(self, request: Request) -> tuple[Connections, str]:
        subject = request.scope.get("gateway.subject")
        connections = self.safety.connections
        if not isinstance(subject, str) or connections is None:
            raise APIError(403, "Connections are a signed-in user's own: call with the user's access token, not a "
                                "client key.", code="user_required")
        return connections, subject

    async def list_connections(self, request: Request) -> Response:
        connections, subject = self._user(request)
        return JSONResponse({"data": await connections.list(subject),
                             "available": sorted(connections.apis)})

    async def connect(self, request: Request) -> Response:
        connections, subject = self._user(request)
        api = request.path_params["api"]
        if api not in connections.apis:
            raise APIError(404, f"No api {api!r} takes users' own connections (auth: {{type: user_oauth}}).")
        client = request.scope.get("gateway.client")
        try:
            link = await connections.begin(api, subject, client if isinstance(client, str) else None)
        except ApiSetupError as exc:
            raise APIError(503, str(exc), code="configuration_error") from None
        return JSONResponse({"connect_url": link})

    async def disconnect(self, request: Request) -> Response:
        connections, subject = self._user(request)
        if not await connections.disconnect(subject, request.path_params["api"]):
            raise APIError(404, "No such connection.")
        return Response(status_code=204)

    async def connected(self, request: Request) -> Response:
        """Where the api's provider sends the user back: the code becomes their connection, if this browser is the
        one the link's owner started from."""
        params = request.query_params
        state, code = params.get("state"), params.get("code")
        connections = self.safety.connections
        if connections is None or not state or not (code or params.get("error")):
            return _page(400, "This is where a provider sends you back after connecting an account; the link "
                              "you followed is incomplete.")
        answer = await self._finish(connections, request, state, code)
        clear_nonce_cookie(answer, request, state)
        return answer

    async def _finish(self, connections: Connections, request: Request, state: str, code: str | None) -> Response:
        if not code:
            await self.safety.store.take_pending_connection(state, time.time())  # the user declined: link spent
            return _page(400, f"The provider did not connect your account: {request.query_params.get('error')}.")
        try:
            record = await connections.finish(state, code, nonce_of(request, state))
        except ForeignConnectLink as exc:
            return _page(403, f"Not connected: {exc}.")
        except ApiSetupError as exc:
            return _page(400, f"Not connected: {exc}.")
        except IdentityError as exc:
            return _page(503, f"Not connected: {exc}.")
        return _page(200, f"Your account is connected to {record.api}. You can close this window and try again.")

    async def resource_metadata(self, request: Request) -> Response:
        """RFC 9728: the authorization server to sign in at for this gateway (and for each MCP agent: the same)."""
        identity = self.safety.identity
        if identity is None:
            raise APIError(404, "This gateway takes no OAuth access tokens (agents.yaml has no gateway.auth).")
        return JSONResponse(identity.protected_resource_metadata())


def _page(status: int, text: str) -> Response:
    body = f"<!doctype html><title>gateway</title><p>{html.escape(text)}</p>"
    return HTMLResponse(body, status_code=status)
