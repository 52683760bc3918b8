"""Credential injection against a real server, including the OAuth2 client-credentials token cache."""

from __future__ import annotations

import base64
import json
from urllib.parse import parse_qsl

import pytest
from executor_helpers import executor_for, make_tool
from recording_server import RecordingServer, Reply

from gateway.config.credentials import ApiKeyAuth, BasicAuth, BearerAuth, ClientCredentialsAuth
from gateway.http.auth import reserved_names

pytestmark = pytest.mark.anyio


def _oauth(server: RecordingServer, **kw: object) -> ClientCredentialsAuth:
    return ClientCredentialsAuth(token_url=server.url + "/token", client_id="cid",
                      client_secret="client-secret-9", scopes=("read", "write"), **kw)  # type: ignore[arg-type]


def _issue_tokens(server: RecordingServer, expires_in: int = 3600) -> list[str]:
    issued: list[str] = []

    def token(request):  # type: ignore[no-untyped-def]
        issued.append(f"access-token-{len(issued) + 1}")
        return Reply(200, {"access_token": issued[-1], "token_type": "bearer", "expires_in": expires_in})

    server.route("/token", token)
    return issued


async def test_several_credentials_at_once(upstream) -> None:
    auth = [
        BasicAuth(username="alice", password="wonderland"),
        ApiKeyAuth(location="header", name="X-Key", value="hkey-1"),
        ApiKeyAuth(location="query", name="key", value="qkey-2"),
        ApiKeyAuth(location="cookie", name="ck", value="ckey-3"),
    ]
    tool = make_tool()
    executor = executor_for(upstream.url, tool, auth=auth)
    result = await executor.execute(tool, {})
    await executor.aclose()
    assert result.ok
    last = upstream.last
    assert last.header("Authorization") == "Basic " + base64.b64encode(b"alice:wonderland").decode()
    assert last.header("X-Key") == "hkey-1"
    assert last.query == [("key", "qkey-2")]
    assert last.cookies == {"ck": "ckey-3"}


async def test_oauth2_token_is_fetched_once_cached_and_redacted(upstream) -> None:
    issued = _issue_tokens(upstream)
    upstream.route("/items", lambda r: Reply(200, {"auth": r.header("Authorization")}))
    tool = make_tool()
    executor = executor_for(upstream.url, tool, auth=[_oauth(upstream)])
    first = await executor.execute(tool, {})
    second = await executor.execute(tool, {})
    await executor.aclose()
    token_requests = [r for r in upstream.requests if r.path == "/token"]
    assert len(token_requests) == 1 and issued == ["access-token-1"]
    form = dict(parse_qsl(token_requests[0].body.decode()))
    assert form == {"grant_type": "client_credentials", "scope": "read write"}
    assert token_requests[0].header("Authorization") == "Basic " + base64.b64encode(b"cid:client-secret-9").decode()
    api_requests = [r for r in upstream.requests if r.path == "/items"]
    assert [r.header("Authorization") for r in api_requests] == ["Bearer access-token-1"] * 2
    assert "access-token-1" not in json.dumps(first.to_dict()) + json.dumps(second.to_dict())


async def test_oauth2_token_is_refreshed_when_expired_or_rejected(upstream) -> None:
    issued = _issue_tokens(upstream, expires_in=0)  # already past the expiry margin: refreshed on each call
    tool = make_tool()
    executor = executor_for(upstream.url, tool, auth=[_oauth(upstream)])
    await executor.execute(tool, {})
    await executor.execute(tool, {})
    assert issued == ["access-token-1", "access-token-2"]
    rejected = iter([Reply(401, "expired"), Reply(200, {"ok": True})])
    upstream.route("/items", lambda r: next(rejected))
    result = await executor.execute(tool, {})
    await executor.aclose()
    assert result.ok and len(issued) == 4


async def test_token_endpoint_failure_is_a_configuration_error(upstream) -> None:
    upstream.route("/token", Reply(400, {"error": "invalid_client", "echo": "client-secret-9"}))
    tool = make_tool()
    executor = executor_for(upstream.url, tool, auth=[_oauth(upstream)])
    result = await executor.execute(tool, {})
    await executor.aclose()
    assert result.error_type == "configuration_error"
    assert "HTTP 400" in (result.error or "") and "client-secret-9" not in (result.error or "")
    assert [r.path for r in upstream.requests] == ["/token"]


def test_reserved_names() -> None:
    auth = [BearerAuth(token="t"), ApiKeyAuth(location="query", name="Key", value="v")]
    assert reserved_names(auth) == {("header", "authorization"), ("query", "key")}
