"""URL building: the host is the api's, whatever the template or the arguments say."""

from __future__ import annotations

import pytest
from executor_helpers import arg, make_tool

from gateway.catalog import Server
from gateway.config.model import ApiConfig
from gateway.errors import ApiSetupError, ArgumentError
from gateway.http.request import accept_header, build_request

API = ApiConfig(name="demo", base_url="https://api.example.com/v1/")


def test_template_starting_with_double_slash_stays_on_the_host() -> None:
    request = build_request(make_tool(path="//evil.example/x"), {}, API)
    assert request.url.host == "api.example.com"
    assert request.url.raw_path == b"/v1//evil.example/x"


def test_literal_fragment_in_template_is_encoded() -> None:
    tool = make_tool(arg("Key", "path"), path="/{Key}#uploads")
    request = build_request(tool, {"Key": "k"}, API)
    assert request.url.raw_path == b"/v1/k%23uploads" and request.url.fragment == ""


@pytest.mark.parametrize("value", [".", ".."])
def test_dot_segments_are_refused(value: str) -> None:
    with pytest.raises(ArgumentError):
        build_request(make_tool(arg("id", "path"), path="/a/{id}/b"), {"id": value}, API)


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
