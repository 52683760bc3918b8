"""An exploded object argument (`form` + `explode`, the way a spec says "any query parameters" or "any cookies")
sends each of its keys as a parameter name: the model picks those names, so they must not name what the
credentials, the api's base URL or the tool's other arguments occupy, and a cookie's name cannot carry `;`."""

from __future__ import annotations

import pytest
from executor_helpers import arg, executor_for, make_tool
from recording_server import RecordingServer

from gateway.catalog import BodyBinding
from gateway.config.credentials import ApiKeyAuth

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
