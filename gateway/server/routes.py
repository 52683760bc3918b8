"""The plain doors: models, agents, each agent's tools, health (direct tool calls: `direct_call`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

import anyio.to_thread
import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..assembly import GatewayState, Generation
from ..catalog import AgentTool
from ..config.model import AgentConfig
from ..dialects import FORMATS, json_tool, render_tools
from ..errors import StoreUnavailable
from ..jsondepth import MAX_DEPTH, too_deep
from ..jsonwire import holds_lone_surrogate
from ..runtime import refusal_lines
from ..store.answer_within import GRACE
from ..toolsets import Toolset
from .api_errors import APIError
from .auth import allowed_agents


def state_of(request: Request) -> GatewayState:
    return request.app.state.gateway  # type: ignore[no-any-return]


def agent_of(generation: Generation, name: str, *, code: str = "unknown_agent",
             param: str | None = None) -> AgentConfig:
    """The agent of a request; 404 naming the known agents when agents.yaml has none of that name."""
    agent = generation.agent(name)
    if agent is None:
        agents = generation.runtime.manifest.agents
        known = ", ".join(sorted(agents)) or "none"
        # A client's `model` set to the LLM's id (as it was before the gateway) rather than an agent's name.
        runs_on = sorted(a for a, config in agents.items() if name in (config.model, config.model.split("/", 1)[-1]))
        hint = (f" `model` names an agent, not the model it runs on ({name!r} is the model of {', '.join(runs_on)})."
                if runs_on else "")
        raise APIError(404, f"Unknown agent {name!r}; the agents are: {known}.{hint}", code=code, param=param)
    return agent


def toolset_of(generation: Generation, agent: str) -> Toolset:
    """The tools of a request's agent; 404 when agents.yaml has no such agent."""
    agent_of(generation, agent)
    return generation.toolset(agent)


async def read_json(request: Request, *, default: Any = None) -> Any:
    """The request body as JSON; 400 with the parser's reason when it is not."""
    return parse_json_body(await request.body(), default=default)


_TOO_DEEP = (f"The request body nests arrays and objects more than {MAX_DEPTH} levels deep, which the gateway does "
             "not read.")


def _python_parse(body: bytes) -> Any:
    """What orjson refused, read by the standard library, which words what neither takes."""
    try:
        return json.loads(body)
    except RecursionError:
        raise APIError(400, _TOO_DEEP) from None
    except ValueError as exc:  # UnicodeDecodeError is a ValueError
        raise APIError(400, f"The request body is not valid JSON: {str(exc)[:200]}") from None


def parse_json_body(body: bytes, *, default: Any = None, text_status: int = 400) -> Any:
    """A request body as JSON (`default` for an empty one, if given); 400 with the parser's reason.

    A string holding a lone surrogate (`"\\ud800"`: valid JSON, but no text) is refused with `text_status`
    before anything runs: it could be neither sent upstream nor written to the audit log nor answered."""
    if not body or body.isspace():  # not `strip()`: a copy of the body made to be tested
        if default is not None:
            return default
        raise APIError(400, "The request body is empty; send a JSON object.")
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        value = _python_parse(body)  # json.loads takes what orjson refuses (NaN, integers past 64 bits)
    else:
        if too_deep(value, body):
            raise APIError(400, _TOO_DEEP)
        return value
    if too_deep(value, body):
        raise APIError(400, _TOO_DEEP)
    if holds_lone_surrogate(value):
        raise APIError(text_status, "The request body holds a lone surrogate (an unpaired \\ud800-\\udfff "
                                    "escape), which is not text; send valid Unicode.",
                       code="invalid_arguments" if text_status == 422 else "invalid_text")
    return value


def agent_tool_dict(agent_tool: AgentTool) -> dict[str, Any]:
    """The `format=json` item: the catalog fields plus what the agent's view adds."""
    return {
        **json_tool(agent_tool),
        "approval": agent_tool.approval,
        "needs_approval": agent_tool.needs_approval,
        "delegate": agent_tool.delegate,
        "fixed_args": sorted(agent_tool.fixed_args),
    }


def render_agent_tools(generation: Generation, agent: str, format: str, strict: bool = False) -> list[dict[str, Any]]:
    """An agent's tools in one dialect, rendered once per generation."""

    def build() -> list[dict[str, Any]]:
        tools = list(toolset_of(generation, agent))
        if format == "json":
            return [agent_tool_dict(t) for t in tools]
        return render_tools(tools, format, strict=strict)

    return generation.memo(("tools", agent, format, strict), build)  # type: ignore[no-any-return]


_REFUSED = ("the last edit of agents.yaml or specs/ was refused; an admin sees why on the console's Health page "
            "(`gateway serve` logs it)")
_TAKEN = "the last reload took tools away from agents; an admin sees which on the console's Health page"


async def healthz(request: Request) -> Response:
    """200 while serving; `status: degraded` with the reason when the last reload was refused (the previous
    configuration keeps serving, but the files on disk are not what runs); `reload_warnings` when the last
    reload took tools away from agents that had them.

    No key is asked here (a balancer probes it), so with `clients` the reason and the warnings are not told: they
    quote the refused files (an api's base URL with its password, any value a field refused) and name every
    tenant's agents and tools. An admin reads them on the console's Health page; `gateway serve` logs them."""
    state = state_of(request)
    runtime = state.current.runtime
    guarded = bool(runtime.manifest.clients)
    body: dict[str, Any] = {
        "status": "ok",
        "agents": len(runtime.manifest.agents),
        "tools": len(runtime.catalog),
        "diagnostics": len(runtime.diagnostics),
        "reloads": state.reloads,
    }
    error = state.holder.last_error
    if error is not None:
        body["status"] = "degraded"
        body["reload_error"] = _REFUSED if guarded else "\n".join(refusal_lines(error)[:6])[:2000]
    if state.holder.warnings:  # the last reload took tools away from agents: served, but worth a look
        body["reload_warnings"] = [_TAKEN] if guarded else [str(warning) for warning in state.holder.warnings[:20]]
    return JSONResponse(body)


def _model(agent: AgentConfig) -> dict[str, Any]:
    return {"id": agent.name, "object": "model", "created": 0, "owned_by": "gateway", "description": agent.description}


def visible_agents(request: Request, agents: Iterable[str]) -> list[str]:
    """`agents` the request's client may use (all without `clients` or with `*`)."""
    allowed = allowed_agents(request.scope)
    return [name for name in agents if allowed is None or name in allowed]


async def list_models(request: Request) -> Response:
    manifest = state_of(request).current.runtime.manifest
    names = visible_agents(request, manifest.agents)
    return JSONResponse({"object": "list", "data": [_model(manifest.agents[name]) for name in names]})


async def get_model(request: Request) -> Response:
    generation = state_of(request).current
    name = request.path_params["model"]
    visible = allowed_agents(request.scope)  # set by the auth layer: the caller's agents (None: all)
    if visible is not None and name not in visible:  # another client's agent: as unknown as a missing one
        raise APIError(404, f"Unknown model {name!r}; GET /v1/models lists yours.", code="model_not_found")
    return JSONResponse(_model(agent_of(generation, name, code="model_not_found")))


async def list_agents(request: Request) -> Response:
    generation = state_of(request).current
    data = []
    agents = generation.runtime.manifest.agents
    for name in visible_agents(request, agents):
        agent = agents[name]
        toolset = toolset_of(generation, name)
        data.append({
            "name": name,
            "description": agent.description,
            "model": agent.model,
            "approval": agent.policy.approval,
            "delegates": list(agent.delegates),
            "tools": toolset.names,
        })
    return JSONResponse({"data": data})


async def list_tools(request: Request) -> Response:
    generation = state_of(request).current
    agent = request.path_params["agent"]
    format = query_value(request, "format") or "json"
    if format not in FORMATS:
        raise APIError(400, f"Unknown format {format!r}; use one of: {', '.join(FORMATS)}.", param="format")
    strict = query_flag(request, "strict")
    known = known_agent(generation, agent)
    # As large as the specs make it (a 10 MB spec of 20,000 operations sharing one schema lists 577 MB, and written
    # whole it held /healthz 15 s; GitHub's 8.6 MB, 1 s): rendered in a worker thread and written a few tools at a
    # time, each piece in a worker thread too (Starlette's StreamingResponse), so no other request waits for it
    # (one json.dumps holds the GIL, in whatever thread, until it ends) and the text is never all in memory.
    return StreamingResponse(_tools_json(generation, known, agent, format, strict), media_type="application/json")


_PIECE_BYTES = 256 * 1024


def _tools_json(generation: Generation, known: str, agent: str, format: str, strict: bool) -> Iterator[bytes]:
    """`{"agent", "format", "data"}` as JSONResponse writes it, in pieces of about `_PIECE_BYTES`."""
    piece = _json({"agent": agent, "format": format})[:-1] + ',"data":['
    for index, tool in enumerate(render_agent_tools(generation, known, format, strict)):
        piece += ("," if index else "") + _json(tool)
        if len(piece) >= _PIECE_BYTES:
            yield piece.encode()
            piece = ""
    yield (piece + "]}").encode()


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))


async def search_tools(request: Request) -> Response:
    """`GET /agents/{agent}/tools/search?q=&limit=`: the agent's tools that best match, best first, and beside them
    `match` (`weak`: nothing found is close to the request; `close`) where the search can tell
    (`gateway.offer.closeness`)."""
    from ..offer.toolsearch import find

    generation = state_of(request).current
    agent = known_agent(generation, request.path_params["agent"])
    query = request.query_params.get("q", "").strip()
    if not query:
        raise APIError(400, "Say what to search for: ?q=close an issue", param="q")
    raw_limit = request.query_params.get("limit", "10")
    if not (raw_limit.isascii() and raw_limit.isdigit() and len(raw_limit) <= 3 and 1 <= int(raw_limit) <= 100):
        raise APIError(400, f"limit must be an integer from 1 to 100, not {raw_limit!r}.", param="limit")
    toolset = toolset_of(generation, agent)
    # In a worker thread, as every search: opening an index or asking an embeddings endpoint must not stall the loop.
    found = await anyio.to_thread.run_sync(find, generation.runtime.catalog, toolset, query, int(raw_limit))
    return JSONResponse({"data": found.items} if found.match is None else {"data": found.items, "match": found.match})


def query_value(request: Request, name: str) -> str | None:
    """A query parameter given at most once (400 when repeated: which one would be meant?)."""
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise APIError(400, f"`{name}` is given {len(values)} times; give it once.", param=name)
    return values[0] if values else None


def query_flag(request: Request, name: str) -> bool:
    """A boolean query parameter: `true` or `false` (absent: false); 400 for anything else."""
    value = query_value(request, name)
    if value is None:
        return False
    if value.lower() not in ("true", "false"):
        raise APIError(400, f"`{name}` must be true or false, not {value!r}.", param=name)
    return value.lower() == "true"


async def readyz(request: Request) -> Response:
    """200 when this instance can serve audited calls: its store takes a write as an audit row is written (and
    Redis answers, with `gateway.redis`) within `gateway.shared_state_timeout` (the store's `timeout`, as long as a
    call waits for them); 503 naming what does not (`store`, `redis`: each asked apart, so a hung Redis is not
    reported as the store). A store that answers but cannot write (a full disk) is not ready. `/healthz` says the
    process lives; this says send it work (a tool call it cannot audit is not sent, so a balancer should look
    here)."""
    parts = await readiness(state_of(request).store)
    body = {"status": "ready" if all(a == "ok" for a in parts.values()) else "unavailable", **parts}
    return JSONResponse(body, 200 if body["status"] == "ready" else 503)


async def readiness(store: Any) -> dict[str, str]:
    """Each shared part's answer, asked apart and at once: `store` (and `redis`, with `gateway.redis`), each `ok`
    or why not (`/readyz`, and the console's Health page for an admin)."""
    parts = store.readiness()
    answers = await asyncio.gather(*(_ready(check, store.timeout) for _, check in parts))
    return {name: answer for (name, _), answer in zip(parts, answers, strict=True)}


async def _ready(check: Callable[[], Awaitable[None]], seconds: float) -> str:
    """`ok`, or why `check` failed: no answer within `seconds` (the grace a store's own question has past them, so
    that its own "did not answer" can come first), or the driver's own error (the URLs have no password)."""
    try:
        await asyncio.wait_for(check(), seconds + GRACE)
    except TimeoutError:
        return f"no answer within {seconds:g} s"
    except StoreUnavailable as exc:  # the gateway's own words name the part ("the store postgresql://... is ...")
        return str(exc)[:500]
    except Exception as exc:  # noqa: BLE001 - any failure is "not ready", said as it was raised
        return f"{type(exc).__name__}: {exc}"[:500]
    return "ok"


def known_agent(generation: Generation, agent: str) -> str:
    agent_of(generation, agent)
    return agent


def routes() -> list[Route]:
    """The plain doors."""
    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/models/{model}", get_model, methods=["GET"]),
        Route("/agents", list_agents, methods=["GET"]),
        Route("/agents/{agent}/tools", list_tools, methods=["GET"]),
    ]


SEARCH_ROUTE = Route("/agents/{agent}/tools/search", search_tools, methods=["GET"])
"""Routed before the direct call (`/agents/{agent}/tools/{tool}`, POST), which its path also matches: a method
neither takes is answered with the search's `Allow: GET`, as the OpenAPI document lists that path (the router
answers 405 with the first route whose path matched). A POST there still calls a tool named `search`."""
