"""The executor end to end against a real HTTP server on 127.0.0.1: every location, style and body type,
and each safety rule (traversal, CR/LF, cross-host redirects, redaction, body cap, timeout, retries)."""

from __future__ import annotations

import asyncio
import base64
import email.parser
import json
import logging
import time
from collections.abc import Iterator

import pytest
from executor_helpers import arg, executor_for, make_tool
from recording_server import RecordingServer, Reply

from gateway.catalog import BodyBinding, Encoding, Server
from gateway.config.credentials import ApiKeyAuth, BearerAuth

pytestmark = pytest.mark.anyio


@pytest.fixture
def elsewhere() -> Iterator[RecordingServer]:
    """A second origin: 127.0.0.2 where the OS allows binding it, else another port."""
    try:
        server = RecordingServer("127.0.0.2")
    except OSError:
        server = RecordingServer()
    with server:
        yield server


async def _call(server: RecordingServer, tool, arguments, **kw):  # type: ignore[no-untyped-def]
    auth = kw.pop("auth", None)
    settings = kw.pop("settings", {})
    executor = executor_for(server.url, tool, auth=auth, **settings)
    try:
        return await executor.execute(tool, arguments, **kw)
    finally:
        await executor.aclose()


# -- locations and styles ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("style", "explode", "value", "expected_path"),
    [
        ("simple", False, [1, 2], "/items/1,2"),
        ("simple", True, {"a": 1, "b": "x y"}, "/items/a=1,b=x%20y"),
        ("label", True, ["a", "b"], "/items/.a.b"),
        ("matrix", True, {"r": 1, "g": 2}, "/items/;r=1;g=2"),
        ("matrix", False, "blue", "/items/;id=blue"),
    ],
)
async def test_path_styles_on_the_wire(upstream, style, explode, value, expected_path) -> None:
    schema = {"list": {"type": "array"}, "dict": {"type": "object"}, "str": {"type": "string"}}[
        type(value).__name__
    ]
    tool = make_tool(arg("id", "path", schema, style=style, explode=explode), path="/items/{id}")
    result = await _call(upstream, tool, {"id": value})
    assert result.ok, result.error
    assert upstream.last.path == expected_path


@pytest.mark.parametrize(
    ("style", "explode", "value", "expected_query"),
    [
        ("form", True, [0, 1], "ids=0&ids=1"),
        ("form", False, [0, 1], "ids=0,1"),
        ("spaceDelimited", False, ["a", "b"], "ids=a%20b"),
        ("pipeDelimited", False, ["a", "b"], "ids=a|b"),
        ("deepObject", True, {"lt": 5, "tag": "x"}, "ids%5Blt%5D=5&ids%5Btag%5D=x"),
        ("form", True, {"a": "1", "b": "2"}, "a=1&b=2"),
    ],
)
async def test_query_styles_on_the_wire(upstream, style, explode, value, expected_query) -> None:
    schema = {"type": "array"} if isinstance(value, list) else {"type": "object"}
    tool = make_tool(arg("ids", "query", schema, style=style, explode=explode))
    result = await _call(upstream, tool, {"ids": value})
    assert result.ok, result.error
    assert upstream.last.raw_query.replace("%7C", "|") == expected_query


async def test_zero_false_and_empty_string_are_sent(upstream) -> None:
    tool = make_tool(
        arg("n", "query", {"type": "integer"}),
        arg("flag", "query", {"type": "boolean"}),
        arg("s", "query"),
        arg("X-Flag", "header", {"type": "boolean"}),
        arg("c", "cookie", {"type": "integer"}),
    )
    result = await _call(upstream, tool, {"n": 0, "flag": False, "s": "", "X-Flag": False, "c": 0})
    assert result.ok, result.error
    assert upstream.last.query == [("n", "0"), ("flag", "false"), ("s", "")]
    assert upstream.last.header("X-Flag") == "false"
    assert upstream.last.cookies == {"c": "0"}


async def test_header_and_cookie_locations(upstream) -> None:
    tool = make_tool(
        arg("trace", "header", {"type": "array"}, wire_name="X-Trace"),
        arg("session", "cookie"),
        arg("prefs", "cookie", {"type": "array"}, explode=False),
    )
    result = await _call(upstream, tool, {"trace": ["a", "b"], "session": "v; x=1", "prefs": ["p", "q"]})
    assert result.ok, result.error
    assert upstream.last.header("X-Trace") == "a,b"
    assert upstream.last.cookies == {"session": "v; x=1", "prefs": "p,q"}


async def test_content_parameter_in_query(upstream) -> None:
    tool = make_tool(arg("filter", "query", {"type": "object"}, content_type="application/json"))
    await _call(upstream, tool, {"filter": {"a": [1, 2]}})
    assert json.loads(dict(upstream.last.query)["filter"]) == {"a": [1, 2]}


async def test_server_variables_used_without_base_url(upstream) -> None:
    server = Server(url="http://127.0.0.1:{port}/{version}", variables={"port": upstream.url.rsplit(":", 1)[1],
                                                                         "version": "v2"})
    tool = make_tool(arg("id", "path"), path="/items/{id}", servers=(server,))
    executor = executor_for(None, tool)
    result = await executor.execute(tool, {"id": "7"})
    await executor.aclose()
    assert result.ok, result.error
    assert upstream.last.path == "/v2/items/7"


async def test_base_url_path_is_kept(upstream) -> None:
    tool = make_tool(path="/items")
    executor = executor_for(upstream.url + "/api/", tool)
    await executor.execute(tool, {})
    await executor.aclose()
    assert upstream.last.path == "/api/items"


async def test_relative_server_without_base_url_is_a_configuration_error() -> None:
    tool = make_tool(servers=(Server(url="/v1"),))
    executor = executor_for(None, tool)
    result = await executor.execute(tool, {})
    assert result.error_type == "configuration_error"
    assert "base_url" in (result.error or "")


async def test_a_setup_error_is_said_on_every_call_and_a_planned_request_takes_each_call_s_values(upstream) -> None:
    """A tool's request is planned once per api configuration (`RequestPlan`): a configuration it cannot plan is
    an error on every call (never remembered), and a planned one takes each call's own values."""
    broken = make_tool(servers=(Server(url="/v1"),))
    executor = executor_for(None, broken)
    try:
        first, second = await executor.execute(broken, {}), await executor.execute(broken, {})
    finally:
        await executor.aclose()
    assert first.error_type == second.error_type == "configuration_error"
    tool = make_tool(arg("id", "path"), arg("q", "query"), path="/items/{id}")
    executor = executor_for(upstream.url, tool)
    try:
        await executor.execute(tool, {"id": "a", "q": "x y"})
        await executor.execute(tool, {"id": "b"})
        missing = await executor.execute(tool, {"q": "z"})
    finally:
        await executor.aclose()
    assert [r.target for r in upstream.requests] == ["/items/a?q=x%20y", "/items/b"]
    assert not missing.ok and "id" in (missing.error or "")  # the path value is asked of every call


async def test_accept_comes_from_response_media_types(upstream) -> None:
    tool = make_tool(response_media_types=("application/vnd.github+json", "text/csv"))
    await _call(upstream, tool, {})
    assert upstream.last.header("Accept") == "application/vnd.github+json, text/csv"


# -- bodies ------------------------------------------------------------------------------------------


async def test_json_body_keeps_vendor_content_type(upstream) -> None:
    tool = make_tool(method="POST", body=BodyBinding(media_type="application/vnd.api+json", argument="body"),
                     body_schema={"type": "object"})
    result = await _call(upstream, tool, {"body": {"n": 0, "ok": False, "s": ""}})
    assert result.ok, result.error
    assert upstream.last.header("Content-Type") == "application/vnd.api+json"
    assert upstream.last.json() == {"n": 0, "ok": False, "s": ""}


async def test_spread_body_properties_and_path_id_collision(upstream) -> None:
    tool = make_tool(
        arg("id", "path"),
        arg("body_id", "body", {"type": "integer"}, wire_name="id"),
        arg("name", "body"),
        method="PUT",
        path="/items/{id}",
        body=BodyBinding(media_type="application/json"),
    )
    await _call(upstream, tool, {"id": "p1", "body_id": 9, "name": "x"})
    assert upstream.last.path == "/items/p1"
    assert upstream.last.json() == {"id": 9, "name": "x"}


async def test_form_urlencoded_body_with_encoding(upstream) -> None:
    binding = BodyBinding(
        media_type="application/x-www-form-urlencoded",
        encoding={"meta": Encoding(style="deepObject", explode=True), "tags": Encoding(explode=False)},
    )
    tool = make_tool(
        arg("name", "body"), arg("tags", "body", {"type": "array"}), arg("meta", "body", {"type": "object"}),
        arg("count", "body", {"type": "integer"}),
        method="POST", body=binding,
    )
    await _call(upstream, tool, {"name": "a b&c", "tags": ["x", "y"], "meta": {"k": "v"}, "count": 0})
    assert upstream.last.header("Content-Type") == "application/x-www-form-urlencoded"
    assert upstream.last.body == b"name=a%20b%26c&tags=x,y&meta%5Bk%5D=v&count=0"


def _parts(recorded) -> list:  # type: ignore[no-untyped-def]
    head = f"Content-Type: {recorded.header('Content-Type')}\r\n\r\n".encode()
    return email.parser.BytesParser().parsebytes(head + recorded.body).get_payload()


async def test_multipart_text_fields_files_and_json_parts(upstream) -> None:
    schema = {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "upload": {"type": "string", "contentEncoding": "base64", "contentMediaType": "image/png"},
            "notes": {"type": "string", "format": "binary"},
            "meta": {"type": "object"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    }
    tool = make_tool(method="POST", body=BodyBinding(media_type="multipart/form-data", argument="body"),
                     body_schema=schema)
    png = b"\x89PNG\r\n\x1a\n\x00\x01"
    result = await _call(upstream, tool, {"body": {
        "title": "t", "upload": base64.b64encode(png).decode(), "notes": "plain text", "meta": {"a": 1},
        "tags": ["x", "y"],
    }})
    assert result.ok, result.error
    parts = {(p.get_param("name", header="content-disposition"), i): p for i, p in enumerate(_parts(upstream.last))}
    by_name = [(name, part) for (name, _), part in parts.items()]
    names = [name for name, _ in by_name]
    assert names == ["title", "upload", "notes", "meta", "tags", "tags"]
    upload = dict(by_name)["upload"]
    assert upload.get_payload(decode=True) == png
    assert upload.get_content_type() == "image/png"
    assert upload.get_filename() == "upload"
    assert dict(by_name)["notes"].get_payload(decode=True) == b"plain text"
    assert json.loads(dict(by_name)["meta"].get_payload(decode=True)) == {"a": 1}
    assert dict(by_name)["meta"].get_content_type() == "application/json"


async def test_text_plain_and_octet_stream_bodies(upstream) -> None:
    text_tool = make_tool(method="POST", body=BodyBinding(media_type="text/plain", argument="body"))
    await _call(upstream, text_tool, {"body": "héllo\nworld"})
    assert upstream.last.body == "héllo\nworld".encode()
    assert upstream.last.header("Content-Type") == "text/plain"
    raw = bytes(range(256))
    bin_tool = make_tool(method="PUT", body=BodyBinding(media_type="application/octet-stream", argument="body"))
    result = await _call(upstream, bin_tool, {"body": base64.b64encode(raw).decode()})
    assert result.ok, result.error
    assert upstream.last.body == raw
    bad = await _call(upstream, bin_tool, {"body": "not base64!"})
    assert bad.error_type == "invalid_arguments" and "base64" in (bad.error or "")


async def test_xml_bodies(upstream) -> None:
    tool = make_tool(method="POST", body=BodyBinding(media_type="text/xml", argument="body"),
                     body_schema={"type": "object"})
    await _call(upstream, tool, {"body": {"Done": {"Part": [{"N": 1}, {"N": 2}], "Note": "a<b"}}})
    assert upstream.last.header("Content-Type") == "text/xml"
    assert upstream.last.body.endswith(b"<Done><Part><N>1</N></Part><Part><N>2</N></Part><Note>a&lt;b</Note></Done>")
    await _call(upstream, tool, {"body": {"bad name": 1}})
    assert len(upstream.requests) == 1
    string_tool = make_tool(method="POST", body=BodyBinding(media_type="application/xml", argument="body"))
    await _call(upstream, string_tool, {"body": "<a/>"})
    assert upstream.last.body == b"<a/>"


# -- safety ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["..", ".", "../../admin", "a/../../b", "%2e%2e"])
async def test_path_traversal_cannot_leave_the_endpoint(upstream, value) -> None:
    tool = make_tool(arg("id", "path"), path="/items/{id}/detail")
    result = await _call(upstream, tool, {"id": value})
    for request in upstream.requests:
        segments = request.path.split("/")
        assert segments[:2] == ["", "items"] and segments[-1] == "detail" and len(segments) == 4
    if value in (".", ".."):
        assert result.error_type == "invalid_arguments" and not upstream.requests


@pytest.mark.parametrize("value", ["../private/secret.txt", "..\\private\\secret.txt", "./../private/secret.txt",
                                   "sub/../../private/secret.txt", "a.txt/.."])
async def test_a_path_value_cannot_walk_out_on_an_upstream_that_decodes_slashes(tmp_path, value) -> None:
    """redteam45: `../private/secret.txt` went out as `/files/..%2Fprivate%2Fsecret.txt`, one segment as sent; but
    many upstreams decode `%2F` before they resolve the path (a normalizing proxy; here Python's own file server),
    and this one served the file outside `/files/`."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "a.txt").write_text("public")
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "secret.txt").write_text("the secret")

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    files = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(tmp_path)))
    threading.Thread(target=files.serve_forever, daemon=True).start()
    tool = make_tool(arg("name", "path"), path="/files/{name}", response_media_types=("text/plain",))
    executor = executor_for(f"http://127.0.0.1:{files.server_address[1]}", tool)
    try:
        walked = await executor.execute(tool, {"name": value})
        assert walked.error_type == "invalid_arguments" and "'..'" in (walked.error or ""), (walked.status, walked.body)
        assert (await executor.execute(tool, {"name": "a.txt"})).body == "public"  # the endpoint itself
    finally:
        await executor.aclose()
        files.shutdown()
        files.server_close()


async def test_validation_failure_sends_nothing(upstream) -> None:
    tool = make_tool(arg("n", "query", {"type": "integer"}, required=True))
    result = await _call(upstream, tool, {"n": "five"})
    assert result.error_type == "invalid_arguments"
    assert "n: expected integer" in (result.error or "")
    assert upstream.requests == []


async def test_crlf_in_header_value_is_refused(upstream) -> None:
    tool = make_tool(arg("X-Note", "header"))
    result = await _call(upstream, tool, {"X-Note": "ok\r\nX-Injected: 1"})
    assert result.error_type == "invalid_arguments"
    assert upstream.requests == []


async def test_non_ascii_header_value_is_refused_clearly(upstream) -> None:
    tool = make_tool(arg("X-Note", "header"))
    result = await _call(upstream, tool, {"X-Note": "café"})
    assert result.error_type == "invalid_arguments" and "ASCII" in (result.error or "")
    assert upstream.requests == []


async def test_control_characters_in_a_header_value_are_the_models_error_not_the_apis(upstream) -> None:
    # redteam45: the library refused `\x01` or DEL itself, as a `transport_error`, which the breaker counts as the
    # api failing: a model made to repeat such a call paused the api for every caller of its group.
    tool = make_tool(arg("X-Note", "header"))
    for value in ("a\x01b", "a\x7fb", "a\x1bb"):
        result = await _call(upstream, tool, {"X-Note": value})
        assert result.error_type == "invalid_arguments" and "X-Note" in (result.error or ""), result.error
    result = await _call(upstream, tool, {"X-Note": "tab\tand space"})
    assert result.ok and upstream.last.header("X-Note") == "tab\tand space"


async def test_secret_looking_static_headers_are_redacted(upstream) -> None:
    upstream.route("/items", lambda r: Reply(200, {"echo": r.header("X-Api-Key"), "tenant": r.header("X-Tenant")}))
    result = await _call(upstream, make_tool(), {}, settings={"headers": {"X-Api-Key": "static-key-42",
                                                                         "X-Tenant": "acme-corp"}})
    assert result.body == {"echo": "[REDACTED]", "tenant": "acme-corp"}


async def test_owned_and_credential_headers_are_not_taken_from_arguments(upstream) -> None:
    tool = make_tool(
        arg("Host", "header"), arg("Authorization", "header"), arg("Content-Length", "header"),
        arg("X-Api-Key", "header"), arg("api_key", "query"),
    )
    auth = [ApiKeyAuth(location="header", name="X-API-Key", value="real-key-123"),
            ApiKeyAuth(location="query", name="api_key", value="query-key-456")]
    result = await _call(upstream, tool, {"Host": "evil.example", "Authorization": "Bearer model",
                                          "Content-Length": "5", "X-Api-Key": "model-key", "api_key": "model"},
                         auth=auth)
    assert result.ok, result.error
    last = upstream.last
    assert last.header("Host").startswith("127.0.0.1")
    assert last.header("Authorization") is None
    assert last.header("X-API-Key") == "real-key-123"
    assert last.query == [("api_key", "query-key-456")]


async def test_required_credential_parameter_is_supplied_by_the_gateway(upstream) -> None:
    tool = make_tool(arg("X-Api-Key", "header", required=True))
    auth = [ApiKeyAuth(location="header", name="X-API-Key", value="real-key-123")]
    result = await _call(upstream, tool, {}, auth=auth)
    assert result.ok, result.error
    assert upstream.last.header("X-API-Key") == "real-key-123"


async def test_cross_host_redirect_is_refused_and_carries_no_credentials(upstream, elsewhere) -> None:
    upstream.route("/items", Reply(302, headers={"Location": elsewhere.url + "/steal?x=1"}))
    tool = make_tool()
    auth = [BearerAuth(token="bearer-secret-1"),
            ApiKeyAuth(location="header", name="X-API-Key", value="key-secret-2")]
    result = await _call(upstream, tool, {}, auth=auth)
    assert result.error_type == "transport_error"
    assert "another host" in (result.error or "")
    assert elsewhere.requests == []


async def test_same_origin_redirect_is_followed_with_credentials(upstream) -> None:
    upstream.route("/old", Reply(301, headers={"Location": "/new"}))
    tool = make_tool(path="/old")
    result = await _call(upstream, tool, {}, auth=[BearerAuth(token="tok-abcdef")])
    assert result.ok
    assert [r.path for r in upstream.requests] == ["/old", "/new"]
    assert upstream.last.header("Authorization") == "Bearer tok-abcdef"


async def test_secrets_are_redacted_from_bodies_and_errors(upstream) -> None:
    secret = "sk-live-0123456789"
    upstream.route("/echo", lambda r: Reply(200, {"seen": r.header("Authorization"), "list": [r.target]}))
    upstream.route("/fail", lambda r: Reply(403, f"bad key {r.target} Authorization: {r.header('Authorization')}"))
    auth = [BearerAuth(token=secret), ApiKeyAuth(location="query", name="k",
                                                                value="query/secret+1")]
    ok = await _call(upstream, make_tool(path="/echo"), {}, auth=auth)
    failed = await _call(upstream, make_tool(path="/fail"), {}, auth=auth)
    dumped = json.dumps(ok.to_dict()) + json.dumps(failed.to_dict())
    assert "Bearer [REDACTED]" in dumped
    assert secret not in dumped and "query/secret+1" not in dumped and "query%2Fsecret%2B1" not in dumped
    assert failed.error_type == "upstream_error" and failed.status == 403 and "HTTP 403" in (failed.error or "")


async def test_large_json_is_cut_at_item_boundaries(upstream) -> None:
    items = [{"id": i, "name": f"item {i}"} for i in range(2000)]
    upstream.route("/big", Reply(200, {"items": items, "total": 2000}))
    result = await _call(upstream, make_tool(path="/big"), {}, max_result_bytes=2000)
    assert result.ok and result.truncated
    shown = result.body["items"]
    assert shown[:-1] == items[: len(shown) - 1]
    assert "more items" in shown[-1] and "left out" in shown[-1]
    assert len(json.dumps(result.body)) < 2600


async def test_endless_body_stops_at_the_hard_cap(upstream) -> None:
    upstream.route("/stream", Reply(200, endless=True, headers={"Content-Type": "text/plain"}))
    result = await _call(upstream, make_tool(path="/stream"), {}, max_result_bytes=1000)
    assert result.ok and result.truncated
    assert "at least" in result.body
    assert 0 < result.bytes <= 4 * 1024 * 1024 + 65536


async def test_binary_response_is_described(upstream) -> None:
    upstream.route("/img", Reply(200, b"\x89PNG" + bytes(1000), headers={"Content-Type": "image/png"}))
    result = await _call(upstream, make_tool(path="/img"), {})
    assert result.media_type == "image/png"
    assert "1004 bytes of image/png" in result.body


async def test_timeout_is_a_result(upstream) -> None:
    upstream.route("/slow", Reply(200, {"late": True}, delay=1.0))
    result = await _call(upstream, make_tool(path="/slow"), {}, timeout=0.2)
    assert result.ok is False and result.error_type == "timeout"


async def test_a_body_that_never_ends_times_out_at_the_deadline(upstream) -> None:
    # The headers come at once, then a few bytes every 50 ms, forever and far below the size cap: only the
    # deadline ends the call (the wire's own timer: the executor sets none of its own on this path).
    upstream.route("/drip", Reply(200, endless=True, trickle=0.05, headers={"Content-Type": "text/plain"}))
    started = time.monotonic()
    async with asyncio.timeout(5):  # a hang fails the test instead of stalling it
        result = await _call(upstream, make_tool(path="/drip"), {}, timeout=0.3)
    assert result.ok is False and result.error_type == "timeout"
    assert 0.3 <= time.monotonic() - started < 2.0


async def test_post_is_never_sent_twice(upstream) -> None:
    upstream.route("/items", Reply(503, "busy", headers={"Retry-After": "0"}))
    tool = make_tool(method="POST", body=BodyBinding(media_type="application/json", argument="body"),
                     body_schema={"type": "object"})
    result = await _call(upstream, tool, {"body": {}})
    assert result.status == 503 and result.error_type == "upstream_error"
    assert len(upstream.requests) == 1


async def test_get_retries_honouring_retry_after(upstream) -> None:
    import time

    answers = iter([Reply(503, "busy", headers={"Retry-After": "1"}), Reply(200, {"ok": True})])
    stamps: list[float] = []

    def flaky(request):  # type: ignore[no-untyped-def]
        stamps.append(time.monotonic())
        return next(answers)

    upstream.route("/items", flaky)
    result = await _call(upstream, make_tool(), {})
    assert result.ok and len(upstream.requests) == 2
    assert stamps[1] - stamps[0] >= 1.0  # waited as told, not the (much shorter) backoff


async def test_a_retried_call_says_so_in_the_log(upstream, caplog: pytest.LogCaptureFixture) -> None:
    # "Why did the api get this call twice?": one audit row, one step; only the retry's log line tells.
    answers = iter([Reply(503, "busy", headers={"Retry-After": "0"})])
    upstream.route("/items", lambda request: next(answers, Reply(200, {"ok": True})))
    with caplog.at_level(logging.INFO, logger="gateway.execution"):
        result = await _call(upstream, make_tool(), {})
        once = await _call(upstream, make_tool(), {})
    assert result.ok and once.ok and len(upstream.requests) == 3
    assert [r.getMessage() for r in caplog.records if r.name == "gateway.execution"] == [
        "op (api demo): GET sent 2 times, again after HTTP 503"]


async def test_retry_after_beyond_the_deadline_returns_the_answer(upstream) -> None:
    upstream.route("/items", Reply(429, "slow down", headers={"Retry-After": "60"}))
    result = await _call(upstream, make_tool(), {}, timeout=2)
    assert result.status == 429 and len(upstream.requests) == 1


async def test_connection_refused_is_a_transport_error() -> None:
    with RecordingServer() as server:
        url = server.url
    tool = make_tool()
    executor = executor_for(url, tool)
    result = await executor.execute(tool, {})
    await executor.aclose()
    assert result.error_type == "transport_error"


async def test_cookies_set_by_upstream_do_not_leak_into_later_calls(upstream) -> None:
    upstream.route("/login", Reply(200, {}, headers={"Set-Cookie": "sid=abc; Path=/"}))
    tool_a, tool_b = make_tool(path="/login", name="a"), make_tool(path="/other", name="b")
    executor = executor_for(upstream.url, tool_a, tool_b)
    await executor.execute(tool_a, {})
    await executor.execute(tool_b, {})
    await executor.aclose()
    assert upstream.last.header("Cookie") is None
