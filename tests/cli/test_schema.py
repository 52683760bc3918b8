"""`gateway schema`: the JSON Schema (2020-12) of agents.yaml, made from the settings model the loader uses."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema.validators import Draft202012Validator

from gateway.cli.commands import main
from gateway.config.loader import parse_manifest

ROOT = Path(__file__).resolve().parents[2]
FULL = """\
providers:
  openai: {kind: openai, api_key: "${OPENAI_API_KEY:-}", strict: true}
apis:
  shop:
    base_url: http://127.0.0.1:9000/api
    auth: [{type: bearer, token: t}, {type: api_key, in: query, name: key, value: v}]
    output_check: warn
  crm:
    auth: {type: token_exchange, token_url: "https://id.example.com/token", client_id: gw, client_secret: s,
           audience: crm}
agents:
  clerk:
    model: openai/gpt-4o
    tools:
      - shop
      - api: crm
        operations: getCustomer
        override: {getCustomer: {rename: customer, output_check: "off"}}
    approval: writes
    max_iterations: ${MAX_ITERATIONS:-40}
    tool_search: on
    code_mode: only
    code_limits: {time: 10, memory: 128, tool_calls: 20}
    hooks: [{on: before_tool_call, call: "guards:check"}]
hooks: [{on: after_tool_call, url: "http://127.0.0.1:9100/mask"}]
budgets: {run: {tokens: 2000}, agent: {cost: 5, window: 1h}, prices: {openai/gpt-4o: {input: 2.5, output: 10}}}
clients:
  ops: {key: k1, admin: true}
  staff: {key: k2, agents: [clerk], approver: true, claims: {groups: [staff, ops], sub: alice}}
gateway:
  store: "memory:"
  rate_limits: {client: 600/min, tools: {createIssue: {rate: 1/s, burst: 5}}}
  breaker: {failures: 5, reset_after: 30}
  mcp: {max_sessions: 10}
  search_embeddings: {kind: ollama, model: nomic-embed-text}
  auth: {issuer: "https://id.example.com", audience: "https://gw.example.com"}
  allowed_hosts: [gw.example.com]
"""


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return _printed_schema()


def _printed_schema() -> dict[str, Any]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["schema"]) == 0
    return json.loads(out.getvalue())  # type: ignore[no-any-return]


def _errors(schema: dict[str, Any], document: Any) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in Draft202012Validator(schema).iter_errors(document)]


def test_it_is_valid_json_schema_2020_12(schema: dict[str, Any]) -> None:
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_the_example_and_every_kind_of_key_pass_as_written(schema: dict[str, Any]) -> None:
    example = yaml.safe_load((ROOT / "agents.yaml").read_text())
    assert _errors(schema, example) == []
    full = yaml.safe_load(FULL.replace("on: ", "'on': "))  # YAML 1.1 reads a bare `on` key as true
    assert _errors(schema, full) == []
    _, diagnostics = parse_manifest(FULL, environ={})  # and the loader takes it too
    assert [d for d in diagnostics if d.level == "error" and "module" not in d.message] == []


UNKNOWN_AT = [(), ("providers", "openai"), ("apis", "shop"), ("apis", "shop", "auth", 0), ("apis", "crm", "auth"),
              ("agents", "clerk"), ("agents", "clerk", "tools", 1), ("agents", "clerk", "tools", 1, "override",
                                                                     "getCustomer"),
              ("agents", "clerk", "code_limits"), ("agents", "clerk", "hooks", 0), ("hooks", 0), ("budgets",),
              ("budgets", "run"), ("budgets", "prices", "openai/gpt-4o"), ("clients", "staff"), ("gateway",),
              ("gateway", "rate_limits"), ("gateway", "rate_limits", "tools", "createIssue"), ("gateway", "breaker"),
              ("gateway", "mcp"), ("gateway", "search_embeddings"), ("gateway", "auth")]


@pytest.mark.parametrize("where", UNKNOWN_AT, ids=lambda where: ".".join(map(str, where)) or "top")
def test_an_unknown_key_anywhere_fails_it_as_it_fails_the_loader(schema: dict[str, Any],
                                                                 where: tuple[str | int, ...]) -> None:
    document = yaml.safe_load(FULL.replace("on: ", "'on': "))
    node = document
    for part in where:
        node = node[part]
    node["unknown_key_xyz"] = 1
    assert any("unknown_key_xyz" in error for error in _errors(schema, document))
    _, diagnostics = parse_manifest(yaml.safe_dump(copy.deepcopy(document)), environ={})
    assert any(d.pointer.endswith("unknown_key_xyz") and d.message.startswith("unknown key")
               for d in diagnostics if d.level == "error")


def test_every_key_has_a_description(schema: dict[str, Any]) -> None:
    definitions = schema["$defs"]

    def described(node: dict[str, Any]) -> bool:
        ref = node.get("$ref")
        return bool(node.get("description")) or (ref is not None and bool(
            definitions[ref.rsplit("/", 1)[1]].get("description")))

    missing = [f"{where}.{key}" for where, node in [("(root)", schema), *definitions.items()]
               for key, value in node.get("properties", {}).items() if not described(value)]
    assert missing == []


def test_placeholders_are_accepted_where_values_are_checked(schema: dict[str, Any]) -> None:
    document = {"agents": {"a": {"model": "p/m", "max_iterations": "${N:-3}", "approval": "${APPROVAL}",
                                 "timeout": "${T}", "tool_search": "${SEARCH:-on}"}},
                "providers": {"p": {"kind": "openai", "strict": "${STRICT:-false}", "base_url": "${URL}"}}}
    assert _errors(schema, document) == []
    assert _errors(schema, {"agents": {"a": {"model": "p/m", "max_iterations": "many"}}}) != []
