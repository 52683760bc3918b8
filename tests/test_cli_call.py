"""`gateway call AGENT TOOL --args JSON` against a real upstream on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

from recording_server import Reply

from gateway.cli.commands import main

SPEC = {
    "openapi": "3.0.3",
    "info": {"title": "shop", "version": "1"},
    "servers": [{"url": "/relative"}],
    "paths": {
        "/items/{id}": {
            "get": {
                "operationId": "getItem",
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}},
                    {"name": "tenant", "in": "query", "required": True, "schema": {"type": "string"}},
                ],
                "responses": {"200": {"description": "ok", "content": {"application/json": {}}}},
            }
        }
    },
}


def _setup(tmp_path: Path, base_url: str) -> list[str]:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "shop.json").write_text(json.dumps(SPEC))
    agents = tmp_path / "agents.yaml"
    agents.write_text(
        "providers:\n  p: {kind: openai, base_url: http://127.0.0.1:9/v1, api_key: sk-test-key}\n"
        f"apis:\n  shop: {{base_url: '{base_url}', auth: {{type: bearer, token: shop-secret-token}}}}\n"
        "agents:\n  clerk:\n    model: p/m\n    tools:\n      - api: shop\n        args: {tenant: acme}\n"
    )
    return ["--specs", str(specs), "--agents", str(agents), "--no-cache"]


def test_call_prints_the_tool_result_with_fixed_args(tmp_path, upstream, capsys) -> None:
    upstream.route("/items", lambda r: Reply(200, {"path": r.target, "auth": r.header("Authorization")}))
    common = _setup(tmp_path, upstream.url)
    code = main(["call", *common, "clerk", "getItem", "--args", '{"id": 0, "tenant": "other"}'])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["ok"] is True and result["status"] == 200
    assert result["body"] == {"path": "/items/0?tenant=acme", "auth": "Bearer [REDACTED]"}


def test_call_reports_invalid_arguments_and_unknown_tools(tmp_path, upstream, capsys) -> None:
    common = _setup(tmp_path, upstream.url)
    assert main(["call", *common, "clerk", "getItem", "--args", '{"id": "x"}']) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["error_type"] == "invalid_arguments" and "id: expected integer" in result["error"]
    assert main(["call", *common, "clerk", "nope"]) == 1
    assert json.loads(capsys.readouterr().out)["error_type"] == "unknown_tool"
    assert main(["call", *common, "clerk", "getItem", "--args", "{bad"]) == 1
    assert "not valid JSON" in json.loads(capsys.readouterr().out)["error"]
    assert upstream.requests == []


def test_unknown_agent_or_unusable_manifest_is_reported_by_call_and_tools(tmp_path, upstream, capsys) -> None:
    common = _setup(tmp_path, upstream.url)
    for command in (["call", *common, "nobody", "getItem"], ["tools", *common, "--agent", "nobody"]):
        assert main(command) == 1
        captured = capsys.readouterr()
        assert captured.out == "" and "no agent named 'nobody' (known: clerk)" in captured.err
    (tmp_path / "agents.yaml").write_text("agents:\n  clerk:\n    model: missing/m\n")
    for command in (["call", *common, "clerk", "getItem"], ["tools", *common, "--agent", "clerk"]):
        assert main(command) == 1
        captured = capsys.readouterr()
        assert captured.out == "" and "error: " in captured.err and "missing" in captured.err
    assert upstream.requests == []


def test_call_and_tools_from_another_folder_say_what_is_missing_and_how_to_point_at_it(tmp_path, capsys) -> None:
    """Run outside the project, `gateway call weather ...` said only "no agent named 'weather' (known: none)"."""
    common = ["--specs", str(tmp_path / "specs"), "--agents", str(tmp_path / "agents.yaml"), "--no-cache"]
    for command in (["call", *common, "weather", "getForecast"], ["tools", *common, "--agent", "weather"]):
        assert main(command) == 1
        err = capsys.readouterr().err
        agents = (tmp_path / "agents.yaml").resolve()
        assert f"no agents manifest at {agents}" in err and "pass --agents FILE" in err, err
        assert f"no specs folder at {(tmp_path / 'specs').resolve()}" in err and "pass --specs DIR" in err, err


def test_serve_from_another_folder_says_what_is_missing(tmp_path: Path) -> None:
    """`gateway serve` outside the project serves nothing: it says why, not "1 operation(s) or setting(s) skipped"."""
    import io

    from gateway.server.run import load_or_report

    out = io.StringIO()
    assert load_or_report(tmp_path / "specs", tmp_path / "agents.yaml", use_cache=False, out=out) is not None
    said = out.getvalue()
    assert f"gateway: no specs folder at {(tmp_path / 'specs').resolve()}" in said
    assert f"gateway: no agents manifest at {(tmp_path / 'agents.yaml').resolve()}, so no agent is defined" in said
    assert "skipped" not in said
