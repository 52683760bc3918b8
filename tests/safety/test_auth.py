from __future__ import annotations

import json
import logging

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from gateway.config.model import ClientConfig
from gateway.errors import ConfigError
from gateway.safety.ratelimit import RateLimiter, RateLimits
from gateway.server.api_errors import error_handlers
from gateway.server.app import gated
from gateway.server.auth import AuthMiddleware, ClientKeys, admit_agent
from gateway.server.listening import check_bind, is_loopback
from gateway.server.routes import visible_agents
from gateway.store import MemoryStore

KEY_CI = "ck-ci-0123456789abcdef"
KEY_ALL = "ck-ops-fedcba9876543210"
CLIENTS = {
    "ci": ClientConfig(name="ci", key=KEY_CI, agents=["clerk"]),
    "ops": ClientConfig(name="ops", key=KEY_ALL, agents=["*"]),
}


async def _echo(request: Request) -> JSONResponse:
    body = await request.body()
    return JSONResponse({"client": request.scope.get("gateway.client"), "agents": sorted(
        request.scope.get("gateway.agents") or []), "body": body.decode()})


async def _chat(request: Request) -> JSONResponse:
    body = await request.body()
    await admit_agent(request.scope, json.loads(body)["model"])  # as the chat door does once it has the model
    return await _echo(request)


async def _models(request: Request) -> JSONResponse:
    return JSONResponse({"object": "list", "data": [{"id": n} for n in visible_agents(request, ["clerk", "weather"])]})


def _client(keys: ClientKeys, *, root_path: str = "", **options: object) -> TestClient:
    app = Starlette(routes=[
        Route("/v1/chat/completions", _chat, methods=["POST"]),
        *gated([
            Route("/v1/models", _models),
            Route("/agents/{agent}/tools", _echo),
            Route("/mcp/{agent}", _echo, methods=["POST"]),
            Route("/audit", _echo),
            Route("/healthz", _echo),
        ]),
    ], middleware=[Middleware(AuthMiddleware, keys=lambda: keys, **options)],
        exception_handlers=error_handlers())
    return TestClient(app, root_path=root_path)


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_keys_identify_clients_and_keep_no_plain_key() -> None:
    keys = ClientKeys(CLIENTS)
    assert keys.identify(KEY_CI).name == "ci"  # type: ignore[union-attr]
    assert keys.identify(KEY_ALL).name == "ops"  # type: ignore[union-attr]
    assert keys.identify(KEY_CI + "x") is None and keys.identify("") is None
    assert KEY_CI not in repr(vars(keys)) and KEY_CI.encode() not in b"".join(entry[0] for entry in keys._entries)


def test_no_key_is_401_and_a_wrong_key_too(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client = _client(ClientKeys(CLIENTS))
    for headers in ({}, _bearer("nope"), {"Authorization": f"Basic {KEY_CI}"}):
        response = client.get("/audit", headers=headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json()["error"]["type"] == "authentication_error"
    assert client.get("/healthz").status_code == 200
    assert KEY_CI not in caplog.text


def test_each_key_only_its_agents() -> None:
    client = _client(ClientKeys(CLIENTS))
    assert client.get("/agents/clerk/tools", headers=_bearer(KEY_CI)).json()["client"] == "ci"
    assert client.get("/agents/weather/tools", headers=_bearer(KEY_CI)).status_code == 403
    assert client.post("/mcp/weather", headers=_bearer(KEY_CI), content=b"{}").status_code == 403
    assert client.get("/agents/weather/tools", headers=_bearer(KEY_ALL)).status_code == 200
    denied = client.post("/v1/chat/completions", headers=_bearer(KEY_CI), json={"model": "weather"})
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "agent_forbidden"
    # a mistyped or another's agent: the refusal names the key's own, so a typo reads as one (user44)
    assert "its agents are: clerk." in denied.json()["error"]["message"]
    refused = client.post("/mcp/weather", headers=_bearer(KEY_CI), content=b"{}")
    assert "its agents are: clerk." in refused.json()["error"]["message"]
    allowed = client.post("/v1/chat/completions", headers=_bearer(KEY_CI), json={"model": "clerk", "x": 1})
    assert allowed.status_code == 200 and json.loads(allowed.json()["body"]) == {"model": "clerk", "x": 1}
    assert allowed.json()["agents"] == ["clerk"]


@pytest.mark.parametrize("root_path", ["/gw", "/a/b"])
def test_behind_a_url_prefix_each_key_still_only_its_agents(root_path: str) -> None:
    """Under an ASGI root path (the server puts it in front of each path) the agent is the one the router
    matched, not a re-parse of the raw path."""
    client = _client(ClientKeys(CLIENTS), root_path=root_path)
    assert client.get(f"{root_path}/agents/clerk/tools", headers=_bearer(KEY_CI)).json()["client"] == "ci"
    assert client.get(f"{root_path}/agents/weather/tools", headers=_bearer(KEY_CI)).status_code == 403
    assert client.post(f"{root_path}/mcp/weather", headers=_bearer(KEY_CI), content=b"{}").status_code == 403
    chat = client.post(f"{root_path}/v1/chat/completions", headers=_bearer(KEY_CI), json={"model": "weather"})
    assert chat.status_code == 403
    models = client.get(f"{root_path}/v1/models", headers=_bearer(KEY_CI)).json()["data"]
    assert [m["id"] for m in models] == ["clerk"]
    assert client.get(f"{root_path}/healthz").status_code == 200  # public under the prefix too
    assert client.get(f"{root_path}/audit").status_code == 401


def test_model_lists_are_filtered_per_key() -> None:
    client = _client(ClientKeys(CLIENTS))
    assert [m["id"] for m in client.get("/v1/models", headers=_bearer(KEY_CI)).json()["data"]] == ["clerk"]
    assert len(client.get("/v1/models", headers=_bearer(KEY_ALL)).json()["data"]) == 2


def test_without_clients_everything_is_open_on_loopback() -> None:
    client = _client(ClientKeys({}))
    response = client.get("/audit")
    assert response.status_code == 200 and response.json()["client"] is None
    assert len(client.get("/v1/models").json()["data"]) == 2


def test_requests_beyond_loopback_need_keys_or_allow_public() -> None:
    async def app_call(allow_public: bool) -> int:
        middleware = AuthMiddleware(Starlette(routes=[Route("/audit", _echo)]), lambda: ClientKeys({}),
                                    allow_public=allow_public)
        sent: list[dict] = []

        async def receive() -> dict:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "GET", "path": "/audit", "headers": [], "query_string": b"",
                 "server": ("10.0.0.5", 8080), "scheme": "http", "root_path": "", "http_version": "1.1"}
        await middleware(scope, receive, send)
        return sent[0]["status"]

    import anyio

    assert anyio.run(app_call, False) == 403
    assert anyio.run(app_call, True) == 200


def test_request_rate_limit_answers_429_with_retry_after() -> None:
    limiter = RateLimiter(MemoryStore(), RateLimits.model_validate({"client": "2/min"}))
    client = _client(ClientKeys(CLIENTS), limiter=lambda: limiter)
    for _ in range(2):
        assert client.get("/agents/clerk/tools", headers=_bearer(KEY_CI)).status_code == 200
    limited = client.get("/agents/clerk/tools", headers=_bearer(KEY_CI))
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
    assert limited.json()["error"]["code"] == "rate_limited"
    assert client.get("/agents/clerk/tools", headers=_bearer(KEY_ALL)).status_code == 200


def test_check_bind() -> None:
    check_bind("127.0.0.1", {})
    check_bind("::1", {})
    check_bind("localhost", {})
    check_bind("0.0.0.0", CLIENTS)
    check_bind("0.0.0.0", {}, allow_public=True)
    with pytest.raises(ConfigError, match="--allow-public"):
        check_bind("0.0.0.0", {})
    assert is_loopback("127.0.0.2") and not is_loopback("192.168.1.1") and not is_loopback("example.com")


def test_anonymous_requests_are_charged_to_their_agent_and_a_new_limiter_applies_at_once() -> None:
    """Without clients, one `Access` serves every anonymous request while the limiter is the same: an agent limit
    still charges each of them, and a limiter swapped in (a reload) or one without limits is used from the next."""
    limited = RateLimiter(MemoryStore(), RateLimits.model_validate({"agent": "2/min"}))
    current: list[RateLimiter | None] = [limited]
    client = _client(ClientKeys({}), limiter=lambda: current[0])
    assert [client.get("/agents/clerk/tools").status_code for _ in range(3)] == [200, 200, 429]
    assert client.get("/agents/weather/tools").status_code == 200  # its own bucket
    current[0] = RateLimiter(MemoryStore(), RateLimits())
    assert [client.get("/agents/clerk/tools").status_code for _ in range(3)] == [200, 200, 200]
    current[0] = None
    assert client.get("/agents/clerk/tools").status_code == 200
    current[0] = limited
    assert client.get("/agents/clerk/tools").status_code == 429
