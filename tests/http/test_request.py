"""URL building: the host is the api's, whatever the template or the arguments say."""

from __future__ import annotations

import random
import unicodedata
from urllib.parse import unquote

import pytest
from executor_helpers import arg, make_tool

from gateway.catalog import Server
from gateway.config.model import ApiConfig
from gateway.errors import ApiSetupError, ArgumentError
from gateway.http.request import _build_path, _template, accept_header, build_request

API = ApiConfig(name="demo", base_url="https://api.example.com/v1/")


def test_template_starting_with_double_slash_stays_on_the_host() -> None:
    request = build_request(make_tool(path="//evil.example/x"), {}, API)
    assert request.url.host == "api.example.com"
    assert request.url.raw_path == b"/v1//evil.example/x"


def test_literal_fragment_in_template_is_encoded() -> None:
    tool = make_tool(arg("Key", "path"), path="/{Key}#uploads")
    request = build_request(tool, {"Key": "k"}, API)
    assert request.url.raw_path == b"/v1/k%23uploads" and request.url.fragment == ""


@pytest.mark.parametrize("value", [".", "..", "\uff0e\uff0e", "\u2025", "x/\uff0e\uff0e/y", "\uff0e",
                                   "x/%2e%2e/y", "%2e", "x%2f%2e%2e%2fy", "%252e%252e"])
def test_dot_segments_are_refused(value: str) -> None:
    # Fullwidth dots and a two-dot leader fold into `..` (NFKC); escapes a proxy and its server decode twice too.
    with pytest.raises(ArgumentError):
        build_request(make_tool(arg("id", "path"), path="/a/{id}/b"), {"id": value}, API)


@pytest.mark.parametrize(("template", "value"), [
    ("/a/%{id}/b", "2e"), ("/a/%{id}/b", "2E"), ("/a/%2{id}/b", "e"), ("/a/{id}%2e/b", "."),
    ("/a/%%{id}/b", "32e"), ("/a/%{id}2e/b", "25"), ("/a/%{id}/b", "5c..%5c"), ("/a/{id}/b", "\uff0e\uff0e"),
    ("/a/%EF%BC%8E%EF%BC%8E/{id}", "x"), ("/a/%e2%80%a5/{id}", "x"), ("/a/{id}", "%2e"),
])
def test_dot_segments_the_template_and_the_value_spell_together_are_refused(template: str, value: str) -> None:
    # The spec's path template keeps a `%` as written: with the value after it, it can spell an escaped dot (once
    # decoded, or twice: `%%32e` is `%2e`, then `.`), which no look at the value alone would see.
    with pytest.raises(ArgumentError):
        build_request(make_tool(arg("id", "path"), path=template), {"id": value}, API)


def _decoded_verdict(path: str) -> bool:
    """Whether a path holds a dot segment, by decoding it as a proxy and its server may, three times, every time."""
    decoded = path
    for _ in range(3):
        decoded = unquote(decoded).replace("\\", "/")
    decoded = unicodedata.normalize("NFKC", decoded)
    return any(segment in (".", "..") for segment in decoded.split("/"))


def test_a_path_is_refused_exactly_when_a_decoding_of_it_holds_a_dot_segment() -> None:
    # The builder decodes a path only when decoding could change its segments (the usual `hello%20world` is judged
    # as written): every template of escapes, dots, slashes and `%`s agrees with decoding it every time.
    pieces = ["%", "2", "e", "E", "5", "c", "f", "F", "3", "%2e", "%2E", "%25", "%5c", "%2f", "%20", "%41", "%7e",
              "%c3%a9", "%ef%bc%8e", "\uff0e", "\u2025", ".", ".", "/", "/", "a", "~", "\\"]
    rng = random.Random(31)
    checked = 0
    for _ in range(4000):
        template = "/" + "".join(rng.choice(pieces) for _ in range(rng.randint(1, 7)))
        tool = make_tool(path=template)
        plan_path = _template(tool)
        try:
            path = _build_path(tool, plan_path, {})
        except ArgumentError:
            refused, path = True, "".join(literal for literal, *_ in plan_path.path) + plan_path.tail
        else:
            refused = False
        assert refused == _decoded_verdict(path if path.startswith("/") else "/" + path), template
        checked += refused
    assert checked > 100  # both verdicts were reached


def test_host_like_values_stay_inside_the_path() -> None:
    tool = make_tool(arg("id", "path"), path="{id}")
    request = build_request(tool, {"id": "@evil.example:80"}, ApiConfig(name="demo", base_url="http://h.test"))
    assert request.url.host == "h.test" and request.url.raw_path == b"/%40evil.example%3A80"


def test_server_choice_and_configuration_errors() -> None:
    tool = make_tool(servers=(Server(url="https://{region}.example.com/api", variables={"region": "eu"}),))
    assert str(build_request(tool, {}, ApiConfig(name="demo")).url) == "https://eu.example.com/api/items"
    for servers in ((Server(url="/relative"),), (Server(url="https://{region}.example.com"),), ()):
        with pytest.raises(ApiSetupError, match="base_url"):
            build_request(make_tool(servers=servers), {}, ApiConfig(name="demo"))
    with pytest.raises(ApiSetupError, match=r"^apis\.demo\.base_url is relative or not http"):
        # agents.yaml cannot say this (its model refuses it); the request builder refuses it on its own too
        build_request(make_tool(), {}, ApiConfig.model_construct(name="demo", base_url="ftp://files.example.com"))


def test_base_url_query_is_kept_and_extended() -> None:
    tool = make_tool(arg("q", "query"))
    request = build_request(tool, {"q": "x"}, ApiConfig(name="demo", base_url="http://h.test/api?v=2"))
    assert request.url.raw_path == b"/api/items?v=2&q=x"


def test_accept_header() -> None:
    assert accept_header(("application/json", "application/json; charset=utf-8", "text/plain")) == (
        "application/json, text/plain"
    )
    assert accept_header(()) == "application/json, */*;q=0.5"


@pytest.mark.parametrize("explode", [False, True])
def test_array_query_values_are_spelled_as_serialize_query_spells_them(explode: bool) -> None:
    """A plain `form` array is written by the request plan itself: byte for byte what `serialize_query` writes,
    in the spec's order among the other query arguments (and the headers, cookies in theirs)."""
    from gateway.http.serialize import serialize_query

    labels = arg("labels", "query", {"type": "array"}, explode=explode)
    flags = arg("flags", "query", {"type": "array"}, explode=explode, allow_reserved=True)
    tool = make_tool(arg("first", "query"), labels, arg("X-B", "header"), flags, arg("last", "query"),
                     arg("X-A", "header"), arg("c", "cookie"))
    values: list[object] = ["bug", "ui x", "ü/&=", 7, True, 1.5, None, ""]
    request = build_request(tool, {"first": "1", "labels": values, "X-B": "b", "flags": ["a/b", "c&d"],
                                   "last": 2, "X-A": "a", "c": "k"}, API)
    expected = ["first=1", *serialize_query(labels[0], values), *serialize_query(flags[0], ["a/b", "c&d"]),
                "last=2"]
    assert request.href == "https://api.example.com/v1/items?" + "&".join(expected)
    assert ("labels=bug&labels=ui%20x" if explode else "labels=bug,ui%20x,%C3%BC%2F%26%3D,7,true,1.5,,") \
        in request.href
    assert [name for name, _ in request.headers][:2] == ["X-B", "X-A"] and request.cookies == [("c", "k")]
    assert build_request(tool, {"labels": []}, API).href.endswith("/items" if explode else "/items?labels=")


def test_a_string_header_argument_is_still_checked_when_the_plan_sends_it_as_it_is() -> None:
    tool = make_tool(arg("X-Request-Id", "header"))
    assert ("X-Request-Id", "abc 1") in build_request(tool, {"X-Request-Id": "abc 1"}, API).headers
    for bad, problem in (("x\r\nX-Evil: 1", "CR"), ("x\x00", "NUL"), ("zürich", "ASCII")):
        with pytest.raises(ArgumentError, match=problem):
            build_request(tool, {"X-Request-Id": bad}, API)
