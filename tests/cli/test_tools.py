"""`gateway tools`: what an agent's model is sent (its views, within gateway.tool_budget), or `--exact` schemas."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from scripted_llm import Reply, ScriptedLLM

from gateway.cli.commands import main
from gateway.cli.terminal_chat import chat_command

_LONG = ("Creates an order for the customer. The order is checked against the stock first. Each line names a "
         "product and a quantity. Orders above the credit limit wait for a manager. ") * 3
SPEC = {
    "openapi": "3.0.3",
    "info": {"title": "shop", "version": "1"},
    "servers": [{"url": "http://127.0.0.1:9"}],
    "paths": {"/orders": {"post": {
        "operationId": "createOrder", "summary": "Create an order.", "description": _LONG,
        "requestBody": {"required": True, "content": {"application/json": {"schema": {
            "type": "object", "required": ["lines"], "properties": {
                "note": {"type": "string", "description": _LONG},
                "lines": {"type": "array", "description": _LONG, "items": {
                    "type": "object", "properties": {"product": {"type": "string", "description": _LONG},
                                                     "quantity": {"type": "integer", "minimum": 1}}}}}}}}},
        "responses": {"200": {"description": "ok"}},
    }}},
}
KINDS = {"openai": "openai", "anthropic": "anthropic", "gemini": "gemini"}


def _project(tmp_path: Path, llm_url: str, kind: str) -> list[str]:
    specs = tmp_path / "specs"
    specs.mkdir(exist_ok=True)
    (specs / "shop.json").write_text(json.dumps(SPEC))
    base = f"{llm_url}/v1" if kind == "openai" else llm_url
    (tmp_path / "agents.yaml").write_text(
        f"providers: {{p: {{kind: {kind}, base_url: '{base}', api_key: k}}}}\n"
        "agents: {clerk: {model: p/m, tools: [shop]}}\n"
        "gateway: {tool_budget: 200}\n")
    return ["--specs", str(specs), "--agents", str(tmp_path / "agents.yaml"), "--no-cache"]


def _tools(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    assert main(["tools", *argv]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def _sent(body: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    if kind == "gemini":
        return [f for group in body["tools"] for f in group.get("functionDeclarations", [])]
    return body["tools"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_default_is_what_the_loop_sends_the_model(tmp_path: Path, llm: ScriptedLLM, kind: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    common = _project(tmp_path, llm.url, kind)
    printed = _tools(capsys, *common, "--agent", "clerk", "--format", KINDS[kind])
    llm.script(Reply(text="done"))
    assert chat_command(Path(common[1]), Path(common[3]), "clerk", "hi", use_cache=False, out=io.StringIO(),
                        err=io.StringIO()) == 0
    assert printed == _sent(llm.bodies()[0], kind)


def test_exact_prints_the_exact_schema_and_the_default_the_view_within_the_budget(
        tmp_path: Path, llm: ScriptedLLM, capsys: pytest.CaptureFixture[str]) -> None:
    common = _project(tmp_path, llm.url, "openai")
    catalog = _tools(capsys, *common, "--agent", "clerk", "--format", "json")
    exact = _tools(capsys, *common, "--agent", "clerk", "--format", "openai", "--exact")
    view = _tools(capsys, *common, "--agent", "clerk", "--format", "openai")
    create = {t["function"]["name"]: t["function"] for t in exact}["createOrder"]
    assert create["parameters"] == catalog[0]["input_schema"] and _LONG.strip() in json.dumps(create)
    shown = {t["function"]["name"]: t["function"] for t in view}
    assert len(json.dumps(shown["createOrder"])) < len(json.dumps(create)) / 2  # within 200 tokens
    assert "describe_tool" in shown  # the view leaves parts out: the model may ask for them
    wider = _tools(capsys, *common, "--agent", "clerk", "--format", "openai", "--budget", "4000")
    assert {t["function"]["name"]: t["function"] for t in wider}["createOrder"] == create
    with pytest.raises(SystemExit):  # one or the other
        main(["tools", *common, "--agent", "clerk", "--exact", "--budget", "300"])


def test_without_an_agent_the_catalog_is_shown_as_views_unless_exact(tmp_path: Path, llm: ScriptedLLM,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    common = _project(tmp_path, llm.url, "openai")
    catalog = _tools(capsys, *common, "--format", "json")
    exact = _tools(capsys, *common, "--format", "anthropic", "--exact")
    view = _tools(capsys, *common, "--format", "anthropic", "--budget", "200")
    assert exact[0]["input_schema"] == catalog[0]["input_schema"] != view[0]["input_schema"]


def test_an_agents_tools_print_the_warnings_about_that_agent_only(tmp_path: Path, llm: ScriptedLLM,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The README's `gateway tools --agent weather` warned about GitHub's empty token, an api weather never calls."""
    common = _project(tmp_path, llm.url, "openai")
    locked = {**SPEC, "info": {"title": "vault", "version": "1"},
              "components": {"securitySchemes": {"key": {"type": "http", "scheme": "bearer"}}},
              "security": [{"key": []}]}
    (Path(common[1]) / "vault.json").write_text(json.dumps(locked))
    (tmp_path / "agents.yaml").write_text(
        f"providers: {{p: {{kind: openai, base_url: '{llm.url}/v1', api_key: k}}}}\n"
        "apis: {vault: {auth: {type: bearer, token: ''}}}\n"
        "agents: {clerk: {model: p/m, tools: [shop]}, keeper: {model: p/m, tools: [vault], pinned: [nothing*]}}\n")
    keeper = _warnings(capsys, common, "keeper")
    assert "apis.vault.auth" in keeper and "agents.keeper.pinned" in keeper
    clerk = _warnings(capsys, common, "clerk")
    assert "vault" not in clerk and "keeper" not in clerk
    assert main(["validate", *common]) == 0  # validate still lists them all
    everything = capsys.readouterr().out
    assert "apis.vault.auth" in everything and "agents.keeper.pinned" in everything


def _warnings(capsys: pytest.CaptureFixture[str], common: list[str], agent: str) -> str:
    assert main(["tools", *common, "--agent", agent, "--format", "openai"]) == 0
    return capsys.readouterr().err
