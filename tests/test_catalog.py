from __future__ import annotations

import pytest

from gateway.catalog import Catalog, Diagnostic, Server, Tool


def _tool(name: str, method: str = "GET", api: str = "shop") -> Tool:
    return Tool(name=name, api=api, operation_id=name, method=method, path="/x", description="",
                input_schema={"type": "object", "properties": {}})


def test_catalog_refuses_duplicate_names() -> None:
    with pytest.raises(ValueError, match="duplicate tool name 'a'"):
        Catalog([_tool("a"), _tool("a")])


def test_catalog_lookup_and_per_api() -> None:
    catalog = Catalog([_tool("a"), _tool("b", api="other")])
    assert catalog.get("a") is not None and "b" in catalog and len(catalog) == 2
    assert [t.name for t in catalog.for_api("other")] == ["b"]


def test_is_write_reads_the_method() -> None:
    assert not _tool("a", "GET").is_write and not _tool("b", "HEAD").is_write
    assert _tool("c", "POST").is_write and _tool("d", "DELETE").is_write


def test_server_resolves_variable_defaults() -> None:
    server = Server(url="https://{region}.example.test/{v}", variables={"region": "eu", "v": "v2"})
    assert server.resolved() == "https://eu.example.test/v2"


def test_diagnostic_names_file_line_and_pointer() -> None:
    diagnostic = Diagnostic(level="error", file="a.yaml", pointer="/paths/~1x", message="bad")
    assert str(diagnostic) == "a.yaml#/paths/~1x: bad"
    assert str(Diagnostic(level="error", file="agents.yaml", line=9, pointer="agents.x", message="m")) == (
        "agents.yaml:9: agents.x: m"
    )
