"""An api an agent uses must have a server to call: without one (FastAPI writes no `servers`), with a relative one
or a variable without a default, every call fails; `gateway validate` says so before the first call does."""

from __future__ import annotations

from pathlib import Path

import yaml

from gateway.runtime import load_runtime


def _spec(title: str, servers: list[dict[str, object]] | None) -> str:
    spec: dict[str, object] = {"openapi": "3.1.0", "info": {"title": title, "version": "1"}, "paths": {
        "/items": {"get": {"operationId": f"list_{title}", "responses": {"200": {"description": "ok"}}}}}}
    if servers is not None:
        spec["servers"] = servers
    return yaml.safe_dump(spec)


def test_an_api_with_no_server_to_call_is_a_warning_naming_what_to_set(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "inventory.yaml").write_text(_spec("inventory", None))
    (specs / "orders.yaml").write_text(_spec("orders", [{"url": "/api/v2"}]))
    (specs / "vtex.yaml").write_text(_spec("vtex", [{"url": "https://{account}.example.com", "variables": {
        "account": {"default": "{account}"}}}]))
    (specs / "erp.yaml").write_text(_spec("erp", [{"url": "/erp"}]))
    (specs / "billing.yaml").write_text(_spec("billing", [{"url": "https://{region}.billing.example.com/v1",
                                                          "variables": {"region": {"default": "eu"}}}]))
    (tmp_path / "agents.yaml").write_text(
        "apis:\n  erp: {base_url: 'http://127.0.0.1:9000/erp'}\n"
        "agents:\n  a:\n    model: openai/x\n"
        "    tools: [{api: inventory}, {api: orders}, {api: vtex}, {api: erp}, {api: billing}]\n"
        "providers:\n  openai: {kind: openai, api_key: x}\n")
    runtime = load_runtime(specs, tmp_path / "agents.yaml", environ={}, use_cache=False)
    warnings = {d.pointer: (d.line, d.message) for d in runtime.diagnostics if d.level == "warning"}
    assert warnings == {
        "agents.a.tools[0].api": (6, "inventory.yaml declares no server: no call to 'inventory' can be sent; "
                                     "set apis.inventory.base_url"),
        "agents.a.tools[1].api": (6, "the server '/api/v2' of orders.yaml is relative or not http(s): no call to "
                                     "'orders' can be sent; set apis.orders.base_url"),
        "agents.a.tools[2].api": (6, "the server 'https://{account}.example.com' of vtex.yaml has a variable without "
                                     "a default: no call to 'vtex' can be sent; set apis.vtex.base_url"),
    }
    assert not [d for d in runtime.diagnostics if d.level == "error"]
