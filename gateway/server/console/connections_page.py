"""The console's page of a signed-in user's own connections to apis (`auth: {type: user_oauth}`): what is connected,
connecting another (the provider's sign-in, then back to the gateway), and disconnecting.

Every connect link, wherever it was handed out, opens `/connect` here: the console knows who the browser is signed in
as. The gate sends a browser that is not signed in to the sign-in page, back here after it; a browser signed in as
the link's owner (the same user, the same client) gets the nonce cookie (`..connect_cookie`) and goes on to the
provider; any other signed-in user is refused and the link is spent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ...errors import ApiSetupError, ForeignConnectLink
from ..connect_cookie import set_nonce_cookie
from .rendering import json_error, viewer_of

if TYPE_CHECKING:
    from .rendering import Console


def routes(console: Console) -> list[Route]:
    safety = console.safety

    async def connections_page(request: Request) -> Response:
        viewer = viewer_of(request)
        connections = safety.connections
        if viewer.subject is None or connections is None:
            return console.render(request, "error.html", status_code=403, title="Connections",
                                  message="Connections are a signed-in user's own: sign in with your access token.")
        connected = await connections.list(viewer.subject)
        names = {c["api"] for c in connected}
        return console.render(request, "connections.html", connected=connected, section="connections",
                              available=[api for api in sorted(connections.apis) if api not in names],
                              title="Connections")

    async def connect(request: Request) -> Response:
        viewer = viewer_of(request)
        api = request.path_params["api"]
        connections = safety.connections
        if viewer.subject is None or connections is None or api not in connections.apis:
            return json_error(404, f"No api {api!r} to connect here.")
        try:
            link = await connections.begin(api, viewer.subject, viewer.name)
        except ApiSetupError as exc:
            return json_error(503, str(exc), code="configuration_error")
        return JSONResponse({"next": link})

    async def start(request: Request) -> Response:
        """A connect link, opened: it goes on to the provider only in its owner's browser."""
        viewer = viewer_of(request)
        state = request.query_params.get("state", "")
        connections = safety.connections

        def refused(status: int, message: str) -> Response:
            return console.render(request, "error.html", status_code=status, title="Connect", message=message)

        if connections is None or not state:
            return refused(400, "This connect link is incomplete; ask for a new one.")
        if viewer.subject is None:  # a client key (or an open console) is no user: the link stays usable
            return refused(403, "A connect link connects a user's own account: sign out, sign in with your access "
                                "token as the user who asked for the link, and open it again.")
        try:
            authorization = await connections.authorize(state, viewer.subject, viewer.name)
        except ForeignConnectLink as exc:
            return refused(403, f"Not connected: {exc}.")
        except ApiSetupError as exc:
            return refused(400, f"Not connected: {exc}.")
        answer = RedirectResponse(authorization.url, status_code=303)
        set_nonce_cookie(answer, state, authorization)
        return answer

    async def disconnect(request: Request) -> Response:
        viewer = viewer_of(request)
        connections = safety.connections
        if viewer.subject is None or connections is None:
            return json_error(403, "Sign in with your access token first.")
        await connections.disconnect(viewer.subject, request.path_params["api"])
        return JSONResponse({"next": request.scope.get("root_path", "") + "/connections"})

    return [
        Route("/connections", connections_page, methods=["GET"]),
        Route("/connect", start, methods=["GET"]),
        Route("/connections/{api}/connect", connect, methods=["POST"]),
        Route("/connections/{api}/disconnect", disconnect, methods=["POST"]),
    ]
