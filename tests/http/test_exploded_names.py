"""An exploded object argument (`form` + `explode`, the way a spec says "any query parameters" or "any cookies")
sends each of its keys as a parameter name: the model picks those names, so they must not name what the
credentials, the api's base URL or the tool's other arguments occupy, and a cookie's name cannot carry `;`."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest
from executor_helpers import arg, executor_for, make_tool
from recording_server import RecordingServer

from gateway.catalog import BodyBinding, Encoding
from gateway.config.credentials import ApiKeyAuth
from gateway.openapi import compile_document

pytestmark = pytest.mark.anyio

OBJECT = {"type": "object", "additionalProperties": {"type": "string"}}


async def _call(upstream: RecordingServer, tool, arguments, **settings):  # type: ignore[no-untyped-def]
    executor = executor_for(upstream.url, tool, **settings)
    try:
        return await executor.execute(tool, arguments)
    finally:
        await executor.aclose()


async def test_a_query_object_cannot_name_the_credentials_parameter(upstream: RecordingServer) -> None:
    tool = make_tool(arg("filter", "query", OBJECT))
    auth = [ApiKeyAuth(location="query", name="api_key", value="query-secret-1")]
    for key in ("api_key", "API_KEY"):
        result = await _call(upstream, tool, {"filter": {"status": "open", key: "the-models-key"}}, auth=auth)
        assert not result.ok and result.error_type == "invalid_arguments"
        assert f"filter: the key {key!r}" in (result.error or "")
    assert upstream.requests == []  # nothing was sent
    result = await _call(upstream, tool, {"filter": {"status": "open"}}, auth=auth)
    assert result.ok and upstream.last.query == [("status", "open"), ("api_key", "query-secret-1")]


async def test_a_query_object_cannot_name_another_argument_or_the_base_urls_parameter(
        upstream: RecordingServer) -> None:
    # `tenant` is the kind of argument agents.yaml fixes (`args: {tenant: acme}`): a second `tenant=` would let
    # the model pick the tenant on an upstream that reads the first value.
    tool = make_tool(arg("filter", "query", OBJECT), arg("tenant", "query"))
    result = await _call(upstream, tool, {"tenant": "acme", "filter": {"tenant": "other"}})
    assert not result.ok and result.error_type == "invalid_arguments"
    executor = executor_for(upstream.url + "/?version=2", tool)
    result = await executor.execute(tool, {"filter": {"version": "1"}})
    await executor.aclose()
    assert not result.ok and result.error_type == "invalid_arguments"
    assert upstream.requests == []


async def test_a_cookie_object_cannot_add_or_replace_cookies(upstream: RecordingServer) -> None:
    tool = make_tool(arg("prefs", "cookie", OBJECT))
    auth = [ApiKeyAuth(location="cookie", name="session", value="cookie-secret-1")]
    for keys in ({"theme; session": "stolen"}, {"session": "stolen"}, {"a\r\nX-Evil: 1": "v"}, {"a=b": "v"}):
        result = await _call(upstream, tool, {"prefs": keys}, auth=auth)
        assert not result.ok and result.error_type == "invalid_arguments", keys
    assert upstream.requests == []
    result = await _call(upstream, tool, {"prefs": {"theme": "dark mode"}}, auth=auth)
    assert result.ok and upstream.last.cookies == {"theme": "dark mode", "session": "cookie-secret-1"}


async def test_a_form_body_object_cannot_send_another_field_twice(upstream: RecordingServer) -> None:
    form = BodyBinding(media_type="application/x-www-form-urlencoded")
    tool = make_tool(arg("tenant", "body"), arg("meta", "body", OBJECT), method="POST", body=form)
    result = await _call(upstream, tool, {"tenant": "acme", "meta": {"tenant": "other"}})
    assert not result.ok and result.error_type == "invalid_arguments" and "'tenant'" in (result.error or "")
    assert upstream.requests == []
    result = await _call(upstream, tool, {"tenant": "acme", "meta": {"color": "red"}})
    assert result.ok and upstream.last.body == b"tenant=acme&color=red"


def _spread_spec(location: str, style: str) -> dict:
    """A spec whose `any` parameter is an exploded object under a style other than `form` (legal to write: the
    gateway takes a parameter's style as written)."""
    parameter = {"name": "any", "in": location, "style": style, "explode": True, "schema": OBJECT}
    return {"openapi": "3.1.0", "info": {"title": "t", "version": "1"},
            "paths": {"/items": {"get": {"operationId": "listItems", "parameters": [parameter],
                                         "responses": {"200": {"description": "ok"}}}}}}


@pytest.mark.parametrize("style", ["pipeDelimited", "spaceDelimited"])
async def test_an_exploded_query_object_of_any_style_cannot_name_the_credentials_parameter(
        upstream: RecordingServer, style: str) -> None:
    # redteam45: only `form` was checked, and these styles spread an exploded object's keys just the same: the
    # model's `api_key=mine` went out before the gateway's `api_key=<secret>`, the identity a first-wins
    # upstream acts as.
    tool = compile_document(_spread_spec("query", style), api="demo", file="spread.yaml").get("listItems")
    assert tool is not None
    auth = [ApiKeyAuth(location="query", name="api_key", value="query-secret-1")]
    result = await _call(upstream, tool, {"any": {"api_key": "the-models-key"}}, auth=auth)
    assert not result.ok and result.error_type == "invalid_arguments", upstream.requests and upstream.last.target
    assert upstream.requests == []
    result = await _call(upstream, tool, {"any": {"status": "open"}}, auth=auth)
    assert result.ok and upstream.last.query == [("status", "open"), ("api_key", "query-secret-1")]


async def test_an_exploded_cookie_object_of_another_style_cannot_add_or_replace_cookies(
        upstream: RecordingServer) -> None:
    # redteam45: a cookie parameter whose spec says `style: simple` was sent one cookie per key unchecked:
    # `{"x; admin": "1"}` went out as `Cookie: x; admin=1; session=...`, `{"session": ...}` before the key's.
    tool = compile_document(_spread_spec("cookie", "simple"), api="demo", file="spread.yaml").get("listItems")
    assert tool is not None
    auth = [ApiKeyAuth(location="cookie", name="session", value="cookie-secret-1")]
    for keys in ({"x; admin": "1"}, {"session": "stolen"}, {"a=b": "v"}):
        result = await _call(upstream, tool, {"any": keys}, auth=auth)
        assert not result.ok and result.error_type == "invalid_arguments", upstream.requests and upstream.last.headers
    assert upstream.requests == []
    result = await _call(upstream, tool, {"any": {"theme": "dark"}}, auth=auth)
    assert result.ok and upstream.last.cookies == {"theme": "dark", "session": "cookie-secret-1"}


@pytest.mark.parametrize("style", ["pipeDelimited", "spaceDelimited"])
async def test_a_form_body_object_of_any_style_cannot_send_another_field_twice(
        upstream: RecordingServer, style: str) -> None:
    # redteam45: an encoding with these styles and explode: true spread the object's keys as fields unchecked.
    form = BodyBinding(media_type="application/x-www-form-urlencoded",
                       encoding={"meta": Encoding(style=style, explode=True)})
    tool = make_tool(arg("tenant", "body"), arg("meta", "body", OBJECT), method="POST", body=form)
    result = await _call(upstream, tool, {"tenant": "acme", "meta": {"tenant": "other"}})
    assert not result.ok and result.error_type == "invalid_arguments", upstream.requests and upstream.last.body
    assert upstream.requests == []
    result = await _call(upstream, tool, {"tenant": "acme", "meta": {"color": "red"}})
    assert result.ok and upstream.last.body == b"tenant=acme&color=red"


async def test_an_allow_reserved_value_cannot_add_a_parameter_where_semicolons_separate(
        upstream: RecordingServer) -> None:
    # redteam45: allowReserved kept `;` literal, and many servers split the query on it as on `&` (Python before
    # 3.9.2, Go before 1.17, Rack 2): `q=x;api_key=mine` went out ahead of the credentials' `api_key=<secret>`.
    tool = make_tool(arg("q", "query", allow_reserved=True), arg("tags", "query", {"type": "array"},
                                                                   allow_reserved=True, explode=False))
    auth = [ApiKeyAuth(location="query", name="api_key", value="query-secret-1")]
    result = await _call(upstream, tool, {"q": "a/b:c;api_key=mine", "tags": ["x;api_key=mine", "y"]}, auth=auth)
    assert result.ok
    for separator in ("&", ";"):  # read as a server that splits on `;` reads it: each value is still one
        pairs = parse_qsl(upstream.last.raw_query, separator=separator)
        assert [name for name, _ in pairs].count("api_key") == (1 if separator == "&" else 0), pairs
    assert dict(parse_qsl(upstream.last.raw_query)) == {"q": "a/b:c;api_key=mine", "tags": "x;api_key=mine,y",
                                                        "api_key": "query-secret-1"}
    assert "q=a/b:c%3Bapi_key=mine" in upstream.last.raw_query  # the rest of the reserved set kept


async def test_a_key_php_reads_as_another_parameters_name_is_refused_too(upstream: RecordingServer) -> None:
    # redteam45: PHP reads `.`, ` ` and `[` in a query, form or cookie name as `_`, and keeps the later of two:
    # `tenant.id=other` after `tenant_id=acme` (a value agents.yaml fixes) was the tenant of the call there.
    tool = make_tool(arg("tenant_id", "query"), arg("filter", "query", OBJECT))
    for key in ("tenant.id", "Tenant Id", "tenant[id"):
        result = await _call(upstream, tool, {"tenant_id": "acme", "filter": {key: "other"}})
        assert not result.ok and result.error_type == "invalid_arguments", key
    auth = [ApiKeyAuth(location="cookie", name="session_id", value="cookie-secret-1")]
    cookies = make_tool(arg("prefs", "cookie", OBJECT))
    result = await _call(upstream, cookies, {"prefs": {"session.id": "stolen"}}, auth=auth)
    assert not result.ok and result.error_type == "invalid_arguments"
    form = BodyBinding(media_type="application/x-www-form-urlencoded")
    body = make_tool(arg("tenant_id", "body"), arg("meta", "body", OBJECT), method="POST", body=form)
    result = await _call(upstream, body, {"tenant_id": "acme", "meta": {"tenant.id": "other"}})
    assert not result.ok and result.error_type == "invalid_arguments"
    assert upstream.requests == []
    result = await _call(upstream, tool, {"tenant_id": "acme", "filter": {"tenant.name": "x"}})
    assert result.ok and upstream.last.query == [("tenant_id", "acme"), ("tenant.name", "x")]
