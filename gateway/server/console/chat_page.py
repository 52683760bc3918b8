"""The console's chat: pick an agent, talk to it, watch each step stream in (the chat door's own run)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..chat import chat_stream
from ..routes import read_json, state_of
from .catalog_pages import visible_agent
from .rendering import json_error, viewer_of

if TYPE_CHECKING:
    from .rendering import Console


def routes(console: Console) -> list[Route]:
    async def chat_page(request: Request) -> Response:
        generation = state_of(request).current
        agents = viewer_of(request).visible(generation.runtime.manifest.agents)
        chosen = request.query_params.get("agent")
        return console.render(request, "chat.html", agents=agents,
                              chosen=chosen if chosen in agents else (agents[0] if agents else None), title="Chat")

    async def chat(request: Request) -> Response:
        state = state_of(request)
        agent = visible_agent(request, state.current)
        body = await read_json(request)
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not messages:
            return json_error(400, "Send {\"messages\": [...]}: the conversation so far.", param="messages")
        refused = await console.charge(viewer_of(request), agent)
        if refused is not None:
            return refused
        return await chat_stream(state, agent, messages, client=viewer_of(request).name)

    return [
        Route("/chat", console.page(chat_page), methods=["GET"]),
        Route("/chat/{agent}", chat, methods=["POST"]),
    ]
