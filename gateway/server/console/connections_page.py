"""The console's page of a signed-in user's own connections to apis (`auth: {type: user_oauth}`): what is connected,
connecting another (the provider's sign-in, then back to the gateway), and disconnecting."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...errors import ApiSetupError
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

    async def disconnect(request: Request) -> Response:
        viewer = viewer_of(request)
        connections = safety.connections
        if viewer.subject is None or connections is None:
            return json_error(403, "Sign in with your access token first.")
        await connections.disconnect(viewer.subject, request.path_params["api"])
        return JSONResponse({"next": request.scope.get("root_path", "") + "/connections"})

    return [
        Route("/connections", connections_page, methods=["GET"]),
        Route("/connections/{api}/connect", connect, methods=["POST"]),
        Route("/connections/{api}/disconnect", disconnect, methods=["POST"]),
    ]
