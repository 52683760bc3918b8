"""gateway.openapi._servers: an operation or path whose own server is another origin than the spec's is told where
it is written (it is called without the api's credentials); one on the spec's origin, or a relative one, is not."""

from __future__ import annotations

from typing import Any

from gateway.openapi import compile_document

_OK = {"200": {"description": "ok"}}


def _warnings(paths: dict[str, Any], servers: list[dict[str, str]] | None = None) -> list[tuple[str, str]]:
    spec = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": paths,
            "servers": servers if servers is not None else [{"url": "https://api.example.com/v1"}]}
    catalog = compile_document(spec, api="shop", file="shop.yaml")
    return [(d.pointer, d.message) for d in catalog.diagnostics if "another origin" in d.message]


def test_an_operations_server_on_another_origin_is_named_at_its_pointer() -> None:
    found = _warnings({"/upload": {"post": {"operationId": "up", "servers": [{"url": "https://evil.example/x"}],
                                            "responses": _OK}}})
    assert [pointer for pointer, _ in found] == ["/paths/~1upload/post/servers"]
    assert "called without the api's credentials" in found[0][1] and "apis.shop.trusted_origins" in found[0][1]
    assert "'https://evil.example/x'" in found[0][1]


def test_a_paths_server_on_another_origin_is_named_at_the_path() -> None:
    found = _warnings({"/m": {"servers": [{"url": "http://api.example.com"}], "get": {"responses": _OK}}})
    assert [pointer for pointer, _ in found] == ["/paths/~1m/servers"]  # http: another scheme, another origin


def test_the_same_origin_and_relative_servers_are_not_warned_of() -> None:
    assert _warnings({
        "/a": {"get": {"servers": [{"url": "https://API.example.com:443/v2"}], "responses": _OK}},
        "/b": {"get": {"servers": [{"url": "{scheme}://api.example.com",
                                    "variables": {"scheme": {"default": "https"}}}], "responses": _OK}},
        "/c": {"get": {"servers": [{"url": "/v3"}], "responses": _OK}},
    }) == []
