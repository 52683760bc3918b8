from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gateway.catalog import ApiSpec, Catalog, Diagnostic, Server, Tool
from gateway.config.checker import Checker
from gateway.config.loader import DEFAULT_BASE_URLS, load_manifest, parse_manifest
from gateway.configuration import parse_configuration


def _parse(text: str, environ: dict[str, str] | None = None, catalog: Catalog | None = None):
    if catalog is None:
        return parse_manifest(textwrap.dedent(text), environ=environ or {})
    manifest, _, diagnostics = parse_configuration(textwrap.dedent(text), catalog=catalog, environ=environ or {})
    return manifest, diagnostics


def _line_of(text: str, marker: str) -> int:
    lines = [index for index, line in enumerate(textwrap.dedent(text).splitlines(), 1) if marker in line]
    assert len(lines) == 1, f"marker {marker!r} should be on exactly one line"
    return lines[0]


def _errors(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diagnostics if d.level == "error"]


def _tool(api: str, name: str, method: str = "GET", security: tuple = ()) -> Tool:
    return Tool(name=name, api=api, operation_id=name, method=method, path=f"/{name}", description=name,
                input_schema={"type": "object", "properties": {}}, security=security,
                servers=(Server(url=f"https://{api}.example.com"),))


def _catalog() -> Catalog:
    tools = [_tool("shop", "listItems"), _tool("shop", "deleteItem", "DELETE"), _tool("github", "getRepo")]
    return Catalog(tools, {"shop": ApiSpec(name="shop", file="shop.yaml"), "github": ApiSpec(name="github",
                                                                                             file="github.json")})


DESIGN_EXAMPLE = """\
providers:
  openai: {kind: openai, base_url: https://api.openai.com/v1, api_key: ${OPENAI_API_KEY}}
apis:
  shop:
    base_url: http://127.0.0.1:9000/api
    auth: {type: bearer, token: ${SHOP_TOKEN}}
    headers: {X-Tenant: acme}
    timeout: 10
agents:
  clerk:
    model: openai/gpt-4o
    instructions: You run the shop's back office.
    tools:
      - api: shop
        operations: [listItems, "get*"]
        tags: [items]
        methods: [GET]
        exclude: [deleteItem]
        args: {tenant: acme}
    approval: writes
    max_iterations: 40
    delegates: [auditor]
  auditor:
    model: openai/gpt-4o-mini
clients: {ci-bot: {key: ${CI_BOT_KEY}, agents: [clerk]}}
"""


def test_the_design_example_loads_as_written() -> None:
    env = {"OPENAI_API_KEY": "sk-1", "SHOP_TOKEN": "tok", "CI_BOT_KEY": "ci-key"}
    manifest, diagnostics = parse_manifest(DESIGN_EXAMPLE, environ=env)
    assert diagnostics == []
    assert manifest.providers["openai"].api_key == "sk-1"
    shop = manifest.apis["shop"]
    assert (shop.base_url, shop.timeout, shop.headers) == ("http://127.0.0.1:9000/api", 10.0, {"X-Tenant": "acme"})
    assert [(a.type, a.token) for a in shop.auth] == [("bearer", "tok")]
    clerk = manifest.agents["clerk"]
    assert (clerk.provider, clerk.model_id, clerk.policy.approval, clerk.delegates) == (
        "openai", "gpt-4o", "writes", ["auditor"])
    selection = clerk.tools[0]
    assert selection.operations == ["listItems", "get*"]
    assert (selection.tags, selection.methods, selection.exclude) == (["items"], ["GET"], ["deleteItem"])
    assert selection.args == {"tenant": "acme"}
    assert selection.line == _line_of(DESIGN_EXAMPLE, "- api: shop")
    assert manifest.clients["ci-bot"].key == "ci-key" and manifest.clients["ci-bot"].agents == ["clerk"]
    assert set(manifest.secrets()) == {"sk-1", "tok", "ci-key"}


def test_several_mistakes_are_all_reported_with_lines_and_key_paths() -> None:
    text = """\
    providers:
      openai: {kind: openai}
    agents:
      reader:
        model: opena/gpt-4o
        tools:
          - api: shop
          - api: nosuchapi
        max_iteration: 5
        approval: sometimes
      writer:
        model: gpt-4o
        timeout: soon
        delegates: [reeder]
    clients:
      bot: {key: abc, agent: [reader]}
    """
    _, diagnostics = _parse(text, catalog=_catalog())
    found = {(d.line, d.pointer) for d in _errors(diagnostics)}
    assert found == {
        (_line_of(text, "opena/"), "agents.reader.model"),
        (_line_of(text, "nosuchapi"), "agents.reader.tools[1].api"),
        (_line_of(text, "max_iteration"), "agents.reader.max_iteration"),
        (_line_of(text, "sometimes"), "agents.reader.approval"),
        (_line_of(text, "model: gpt-4o"), "agents.writer.model"),
        (_line_of(text, "soon"), "agents.writer.timeout"),
        (_line_of(text, "reeder"), "agents.writer.delegates[0]"),
        (_line_of(text, "agent: [reader]"), "clients.bot.agent"),
    }
    rendered = [str(d) for d in diagnostics]
    line = _line_of(text, "nosuchapi")
    expected = f"agents.yaml:{line}: agents.reader.tools[1].api: no spec named 'nosuchapi' (known: github, shop)"
    assert expected in rendered
    assert [d.line for d in diagnostics] == sorted(d.line or 0 for d in diagnostics)


@pytest.mark.parametrize(
    ("snippet", "pointer", "suggestion"),
    [
        ("providers: {openai: {kind: openai, api_kee: x}}", "providers.openai.api_kee", "api_key"),
        ("apis: {shop: {base_ur: http://x}}", "apis.shop.base_ur", "base_url"),
        ("agents: {a: {model: p/m, instruction: hi}}", "agents.a.instruction", "instructions"),
        ("agents: {a: {model: p/m, tools: [{api: s, operation: [x]}]}}", "agents.a.tools[0].operation", "operations"),
        ("agents: {a: {model: p/m, tools: [{api: s, override: {x: {renam: y}}}]}}",
         "agents.a.tools[0].override.x.renam", "rename"),
        ("agent: {}", "agent", "agents"),
    ],
)
def test_unknown_keys_are_errors_with_a_did_you_mean(snippet: str, pointer: str, suggestion: str) -> None:
    _, diagnostics = _parse("providers: {p: {kind: openai}}\n" + snippet if "providers" not in snippet else snippet)
    matching = [d for d in diagnostics if d.pointer == pointer]
    assert len(matching) == 1 and matching[0].level == "error"
    assert f"did you mean {suggestion!r}" in matching[0].message


def test_environment_substitution_with_defaults_and_escapes() -> None:
    text = """\
    providers:
      openai: {kind: openai, api_key: "Bearer-${KEY}", base_url: "${BASE:-http://127.0.0.1:1/v1}"}
    agents:
      a:
        model: ${MODEL:-openai/gpt-4o}
        instructions: "costs $5, literal $${HOME}"
        max_iterations: ${ITER:-7}
        timeout: ${TIMEOUT}
    """
    manifest, diagnostics = _parse(text, environ={"KEY": "k", "TIMEOUT": "2.5"})
    assert diagnostics == []
    assert manifest.providers["openai"].api_key == "Bearer-k"
    assert manifest.providers["openai"].base_url == "http://127.0.0.1:1/v1"
    agent = manifest.agents["a"]
    assert agent.model == "openai/gpt-4o"
    assert agent.instructions == "costs $5, literal ${HOME}"
    assert agent.policy.max_iterations == 7 and agent.policy.timeout == 2.5


def test_a_missing_variable_is_an_error_naming_variable_and_key_never_an_empty_string() -> None:
    text = """\
    providers:
      openai: {kind: openai, api_key: ${OPENAI_API_KEY}}
    clients:
      bot: {key: "${BOT_KEY}"}
    """
    manifest, diagnostics = _parse(text)
    messages = {d.pointer: (d.line, d.message) for d in diagnostics}
    assert "OPENAI_API_KEY" in messages["providers.openai.api_key"][1]
    assert messages["providers.openai.api_key"][0] == _line_of(text, "OPENAI_API_KEY")
    assert "BOT_KEY" in messages["clients.bot.key"][1]
    assert len(_errors(diagnostics)) == 2  # reported once, not again as "key is required"
    assert manifest.providers["openai"].api_key is None
    assert "bot" not in manifest.clients


def test_environment_values_cannot_change_the_document_structure() -> None:
    manifest, diagnostics = _parse("agents:\n  a:\n    model: p/m\n    instructions: ${EVIL}\nproviders: {p: {}}\n",
                                   environ={"EVIL": "x\n    approval: never\n  b: {model: p/m}"})
    assert list(manifest.agents) == ["a"]
    assert manifest.agents["a"].instructions.startswith("x\n")
    assert [d.pointer for d in diagnostics] == ["providers.p"]  # p is not a kind: its kind is required


def test_malformed_substitution_is_reported() -> None:
    _, diagnostics = _parse("providers: {openai: {api_key: ${bad-name}}}")
    assert [d.pointer for d in diagnostics] == ["providers.openai.api_key"]
    assert "malformed" in diagnostics[0].message


def test_model_is_split_at_the_first_slash_and_the_provider_must_exist() -> None:
    text = """\
    providers:
      router: {kind: openai, base_url: http://127.0.0.1:9/v1}
    agents:
      a: {model: router/meta-llama/llama-3-70b}
      b: {model: nobody/x}
      c: {model: router/}
    """
    manifest, diagnostics = _parse(text)
    assert (manifest.agents["a"].provider, manifest.agents["a"].model_id) == ("router", "meta-llama/llama-3-70b")
    by_pointer = {d.pointer: d.message for d in diagnostics}
    assert "no provider named 'nobody' (known: router)" in by_pointer["agents.b.model"]
    assert "<provider>/<model id>" in by_pointer["agents.c.model"]


def test_provider_kinds_defaults_and_url_warnings() -> None:
    text = """\
    providers:
      openai: {}
      anthropic: {api_key: a}
      local: {kind: ollama}
      wrong: {kind: openai, base_url: "http://127.0.0.1:1/v1/chat/completions/"}
      other: {kind: olama}
      nokind: {}
      slash/name: {kind: openai}
      gem: {kind: gemini, base_url: "ftp://x", headers: {X-A: 1}, timeout: 0}
    """
    manifest, diagnostics = _parse(text)
    assert manifest.providers["openai"].base_url == DEFAULT_BASE_URLS["openai"]
    assert manifest.providers["anthropic"].kind == "anthropic"
    assert manifest.providers["local"].base_url == "http://127.0.0.1:11434"
    assert manifest.providers["wrong"].base_url == "http://127.0.0.1:1/v1/chat/completions"
    by_pointer = {d.pointer: d for d in diagnostics}
    assert by_pointer["providers.wrong.base_url"].level == "warning"
    assert "did you mean 'ollama'" in by_pointer["providers.other.kind"].message
    assert "'kind' is required" in by_pointer["providers.nokind"].message
    assert "'/'" in by_pointer["providers['slash/name']"].message
    assert "URL" in by_pointer["providers.gem.base_url"].message
    assert "greater than 0" in by_pointer["providers.gem.timeout"].message
    assert "providers.gem.headers.X-A" not in by_pointer  # a number is written as text


def test_the_openai_responses_kind() -> None:
    manifest, diagnostics = _parse("""\
    providers:
      oai: {kind: openai-responses, strict: true}
      too_far: {kind: openai-responses, base_url: "http://127.0.0.1:1/v1/responses"}
    """)
    assert manifest.providers["oai"].base_url == "https://api.openai.com/v1" and manifest.providers["oai"].strict
    [warning] = diagnostics
    assert warning.pointer == "providers.too_far.base_url" and "/responses is appended" in warning.message


def test_every_auth_type_and_a_list_of_them() -> None:
    text = """\
    apis:
      a:
        auth:
          - {type: bearer, token: t}
          - {type: basic, username: u, password: p}
          - {type: api_key, in: query, name: key, value: v}
          - {type: oauth2_client_credentials, token_url: "http://127.0.0.1:1/token", client_id: i,
             client_secret: s, scopes: [read, write]}
    """
    manifest, diagnostics = _parse(text)
    assert diagnostics == []
    bearer, basic, api_key, oauth = manifest.apis["a"].auth
    assert bearer.token == "t" and (basic.username, basic.password) == ("u", "p")
    assert (api_key.location, api_key.name, api_key.value) == ("query", "key", "v")
    assert (oauth.token_url, oauth.client_id, oauth.client_secret, oauth.scopes) == (
        "http://127.0.0.1:1/token", "i", "s", ["read", "write"])


def test_auth_mistakes_and_defaults_from_the_spec() -> None:
    schemes = {"k": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
               "o": {"type": "oauth2", "flows": {"clientCredentials": {"tokenUrl": "http://127.0.0.1:1/t"}}}}
    catalog = Catalog([_tool("shop", "listItems")], {"shop": ApiSpec(name="shop", file="shop.yaml",
                                                                     security_schemes=schemes)})
    text = """\
    apis:
      shop:
        auth:
          - {type: api_key, value: v}
          - {type: oauth2_client_credentials, client_id: i, client_secret: s}
      other:
        auth:
          - {type: bearer}
          - {type: token, token: x}
          - {type: api_key, value: v, in: body}
          - {type: basic, username: u, pasword: p}
    """
    manifest, diagnostics = _parse(text, catalog=catalog)
    api_key, oauth = manifest.apis["shop"].auth
    assert (api_key.name, api_key.location) == ("X-Api-Key", "header")
    assert oauth.token_url == "http://127.0.0.1:1/t"
    errors = {(d.pointer, d.message.split(" (")[0]) for d in _errors(diagnostics)}
    assert ("apis.other", "no spec named 'other'") in errors
    assert ("apis.other.auth[0]", "'token' is required") in errors
    kinds = "bearer, basic, api_key, oauth2_client_credentials, token_exchange, user_oauth"
    assert ("apis.other.auth[1].type", f"'token' is not one of {kinds}") in errors
    assert ("apis.other.auth[2].in", "'body' is not one of header, query, cookie") in errors
    assert ("apis.other.auth[2]", "'name' is required: the header, query parameter or cookie name") in errors
    assert ("apis.other.auth[3].pasword", "unknown key 'pasword'") in errors
    assert len(errors) == 6


def test_an_empty_secret_from_an_explicit_empty_default_means_no_credential() -> None:
    manifest, diagnostics = _parse("apis: {github: {auth: {type: bearer, token: \"${GITHUB_TOKEN:-}\"}}}")
    assert diagnostics == [] and manifest.apis["github"].auth == []
    _, diagnostics = _parse("apis: {github: {auth: {type: bearer, token: \"\"}}}", environ={})
    assert diagnostics == []


def test_security_demanded_by_selected_operations_without_auth_is_a_warning() -> None:
    secured = (({"bearerAuth": ()}),)
    optional = ({"bearerAuth": ()}, {})
    catalog = Catalog([_tool("shop", "listItems", security=secured), _tool("shop", "getItem", security=optional),
                       _tool("open", "getThing", security=optional)])
    text = """\
    providers: {p: {kind: openai}}
    agents:
      a:
        model: p/m
        tools: [shop, open]
    """
    _, diagnostics = _parse(text, catalog=catalog)
    assert [(d.level, d.pointer) for d in diagnostics] == [("warning", "agents.a.tools[0].api")]
    assert "bearerAuth" in diagnostics[0].message and "listItems" in diagnostics[0].message
    _, diagnostics = _parse(text + "apis: {shop: {auth: {type: bearer, token: t}}}\n", catalog=catalog)
    assert diagnostics == []


def test_delegation_cycles_unknown_agents_and_depth() -> None:
    text = """\
    providers: {p: {kind: openai}}
    agents:
      lead: {model: p/m, delegates: [worker, ghost]}
      worker: {model: p/m, delegates: [checker]}
      checker: {model: p/m, delegates: [lead]}
      narcissus: {model: p/m, delegates: [narcissus]}
    """
    _, diagnostics = _parse(text)
    messages = sorted(d.message for d in _errors(diagnostics))
    assert messages == [
        "delegation cycle: lead -> worker -> checker -> lead",
        "delegation cycle: narcissus -> narcissus",
        "no agent named 'ghost' (known: checker, lead, narcissus, worker)",
    ]
    chain = """\
    providers: {p: {kind: openai}}
    gateway: {max_delegation_depth: 2}
    agents:
      a: {model: p/m, delegates: [b]}
      b: {model: p/m, delegates: [c]}
      c: {model: p/m, delegates: [d]}
      d: {model: p/m}
    """
    manifest, diagnostics = _parse(chain)
    assert manifest.max_delegation_depth == 2
    assert [(d.pointer, d.line) for d in diagnostics] == [("agents.a.delegates", _line_of(chain, "a: {"))]
    assert "a -> b -> c -> d is 3 deep" in diagnostics[0].message
    _, diagnostics = _parse(chain.replace("max_delegation_depth: 2", "max_delegation_depth: 3"))
    assert diagnostics == []


def test_clients_default_to_every_agent_and_keys_must_differ() -> None:
    text = """\
    providers: {p: {kind: openai}}
    agents: {clerk: {model: p/m}}
    clients:
      all: {key: k1}
      some: {key: k2, agents: [clerk]}
      twin: {key: k1, agents: "*"}
      nokey: {agents: [clerk]}
    """
    manifest, diagnostics = _parse(text)
    assert manifest.clients["all"].agents == ["*"]
    assert manifest.clients["twin"].agents == ["*"]
    assert {(d.pointer, d.message) for d in diagnostics} == {
        ("clients.twin.key", "the same key as client 'all': each caller needs its own key"),
        ("clients.nokey", "'key' is required (or `claims`, for a client that tokens reach)"),
    }


def test_a_previous_key_is_a_key_of_its_own_and_needs_the_new_one() -> None:
    text = """\
    providers: {p: {kind: openai}}
    agents: {clerk: {model: p/m}}
    clients:
      app: {key: k-new, previous_key: k-old}
      same: {key: k2, previous_key: k2}
      other: {key: k-old}
      alone: {previous_key: k3}
    """
    manifest, diagnostics = _parse(text)
    assert manifest.clients["app"].previous_key == "k-old"
    assert {(d.pointer, d.message) for d in diagnostics} == {
        ("clients.same.previous_key", "the same key as this client's `key`: a rotation needs a new one"),
        ("clients.other.key", "the same key as client 'app': each caller needs its own key"),
        ("clients.alone.previous_key", "a former key needs the new one: set `key` as well"),
        ("clients.alone", "'key' is required (or `claims`, for a client that tokens reach)"),
    }
    assert "k-old" in manifest.secrets()  # redacted like `key`


def test_policies_and_per_tool_overrides() -> None:
    text = """\
    providers: {p: {kind: openai}}
    agents:
      a:
        model: p/m
        approval: always
        max_iterations: 3
        max_consecutive_errors: 2
        max_parallel_calls: 1
        max_result_bytes: 1000
        timeout: 9.5
        tool_timeout: 2
        max_tool_calls: 10
        tools:
          - api: shop
            override:
              getItem: {rename: fetch_item, description: Fetch., approval: never, timeout: 1, max_result_bytes: 5}
              bad: {rename: "no spaces allowed", approval: maybe, max_result_bytes: 0}
      b: {model: p/m, max_iterations: 2.5, max_parallel_calls: true}
    """
    manifest, diagnostics = _parse(text)
    policy = manifest.agents["a"].policy
    assert (policy.approval, policy.max_iterations, policy.max_consecutive_errors, policy.max_parallel_calls) == (
        "always", 3, 2, 1)
    assert (policy.max_result_bytes, policy.timeout, policy.tool_timeout, policy.max_tool_calls) == (1000, 9.5, 2, 10)
    override = manifest.agents["a"].tools[0].overrides["getItem"]
    assert (override.rename, override.description, override.approval, override.timeout,
            override.max_result_bytes) == ("fetch_item", "Fetch.", "never", 1.0, 5)
    assert {d.pointer for d in diagnostics} == {
        "agents.a.tools[0].override.bad.rename", "agents.a.tools[0].override.bad.approval",
        "agents.a.tools[0].override.bad.max_result_bytes", "agents.b.max_iterations", "agents.b.max_parallel_calls",
    }
    assert manifest.agents["b"].policy.max_iterations == 40  # a bad value leaves the default


def test_tool_entries_accept_a_bare_api_name_and_single_strings() -> None:
    text = """\
    providers: {p: {kind: openai}}
    agents:
      a:
        model: p/m
        tools:
          - shop
          - {api: github, operations: getRepo, methods: [get, FETCH]}
    """
    manifest, diagnostics = _parse(text)
    first, second = manifest.agents["a"].tools
    assert (first.api, first.operations) == ("shop", None)
    assert second.operations == ["getRepo"] and second.methods == ["GET"]  # the bad one is left out
    assert [(d.pointer, d.line) for d in diagnostics] == [("agents.a.tools[1].methods[1]", _line_of(text, "FETCH"))]


def test_yaml_level_problems() -> None:
    _, diagnostics = _parse("agents:\n  a: [1\n  b: 2\n")
    assert len(diagnostics) == 1 and diagnostics[0].line == 3 and "invalid YAML" in diagnostics[0].message
    _, diagnostics = _parse("agents:\n  a: {model: p/m}\n  a: {model: p/n}\nproviders: {p: {kind: openai}}\n")
    assert [(d.pointer, d.line, d.message) for d in diagnostics] == [
        ("agents.a", 3, "duplicate key 'a' (first at line 2)")]
    _, diagnostics = _parse("- just\n- a list\n")
    assert [d.message for d in diagnostics] == ["expected a mapping, got a list"]
    manifest, diagnostics = _parse("# nothing yet\n")
    assert diagnostics == [] and manifest.agents == {}
    manifest, diagnostics = _parse("providers: {p: {kind: openai}}\nagents:\n  yes: {model: p/m}\n")
    assert diagnostics == [] and list(manifest.agents) == ["yes"]  # keys are text, not YAML booleans
    _, diagnostics = _parse("providers: {p: {kind: openai}}\nagents:\n  bad.name: {model: p/m}\n")
    assert [d.pointer for d in diagnostics] == ["agents['bad.name']"]


def test_yaml_anchors_and_merge_keys_work() -> None:
    text = """\
    providers: {p: {kind: openai}}
    x-defaults: &defaults {model: p/m, max_iterations: 5}
    agents:
      a: {<<: *defaults, instructions: A}
    """
    manifest, diagnostics = _parse(text)
    assert manifest.agents["a"].policy.max_iterations == 5
    assert [d.pointer for d in diagnostics] == ["x-defaults"]  # unknown top-level keys are still errors


def test_load_manifest_reads_a_file_and_never_raises(tmp_path: Path) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text("providers: {p: {kind: openai}}\nagents: {a: {model: p/m}}\n")
    manifest, diagnostics = load_manifest(path, environ={})
    assert diagnostics == [] and manifest.file == "agents.yaml" and list(manifest.agents) == ["a"]
    manifest, diagnostics = load_manifest(tmp_path / "absent.yaml")
    assert len(diagnostics) == 1 and diagnostics[0].level == "error" and "cannot read" in diagnostics[0].message
    path.write_bytes(b"\xff\xfe\x00bad")
    _, diagnostics = load_manifest(path)
    assert len(diagnostics) == 1 and diagnostics[0].level == "error"


def test_secrets_cover_credentials_client_keys_and_credential_headers() -> None:
    text = """\
    providers:
      p: {kind: openai, api_key: sk-1, headers: {X-Org: acme, X-Portkey-Api-Key: pk-2}}
    apis:
      shop:
        auth: [{type: basic, username: u, password: pw-3}, {type: api_key, name: k, value: v-4}]
        headers: {Authorization: "Token t-5", X-Tenant: acme}
    clients: {bot: {key: c-6}}
    """
    manifest, diagnostics = _parse(text)
    assert diagnostics == []
    assert sorted(manifest.secrets()) == ["Token t-5", "c-6", "pk-2", "pw-3", "sk-1", "t-5", "v-4"]


def test_secrets_cover_credentials_written_into_urls() -> None:
    # A provider's key in its URL (Gemini's `?key=`), an api's userinfo, the stores' passwords: none may reach a log.
    text = """\
    providers:
      g: {kind: gemini, base_url: "https://gemini.example/v1beta?key=AIzaSyD-0123456789abcdef"}
    apis:
      shop: {base_url: "https://robot:hunter2-pw@shop.example/api"}
    gateway:
      store: "postgresql://gw:pg-s3cret@127.0.0.1:5432/gateway"
      redis: "rediss://:redis-pw-9@127.0.0.1:6380/0"
    """
    manifest, diagnostics = _parse(text)
    assert diagnostics == []
    secrets = manifest.secrets()
    for value in ("AIzaSyD-0123456789abcdef", "hunter2-pw", "pg-s3cret", "redis-pw-9"):
        assert value in secrets
    assert "shop.example" not in " ".join(secrets)  # the host stays readable
    assert "gw" not in secrets  # a store's user name is no secret (redacted, "gw" would blank every line)


def test_gateway_settings_are_typed_with_the_rest_of_the_file() -> None:
    _, diagnostics = _parse("""
        gateway:
          audit_retention_days: 30
          rate_limits: {client: 600 per min}
          breaker: {failures: -1}
        """)
    errors = sorted((d.line, d.pointer, d.message) for d in diagnostics if d.level == "error")
    assert errors == [
        (4, "gateway.rate_limits.client", "expected a limit like 60/min or 10/s, got '600 per min'"),
        (5, "gateway.breaker.failures", "must be at least 1, got -1"),
    ]
    _, diagnostics = _parse("""
        gateway:
          rate_limits: {client: 600/min, tools: {createIssue: {rate: 1/s, burst: 5}}}
          breaker: {failures: 5, reset_after: 30}
        """)
    assert [d for d in diagnostics if d.level == "error"] == []


def test_bad_store_urls_and_retention_are_reported_with_their_line() -> None:
    # `gateway validate` reports what `serve` would refuse: the Redis URL and the conversation retention too.
    manifest, diagnostics = _parse("""
        gateway:
          redis: localhost:6379
          conversation_retention_days: forever
        """)
    errors = sorted((d.line, d.pointer, d.message) for d in diagnostics if d.level == "error")
    assert errors == [(3, "gateway.redis", "expected a redis://, rediss:// or unix:// URL, got 'localhost:6379'"),
                      (4, "gateway.conversation_retention_days", "expected a number, got a string ('forever')")]
    manifest, diagnostics = _parse("gateway: {redis: 'redis://127.0.0.1:6379/0', conversation_retention_days: 7}")
    assert diagnostics == []
    assert manifest.gateway.redis == "redis://127.0.0.1:6379/0" and manifest.gateway.conversation_retention_days == 7


def test_provider_strict_mode_is_a_boolean_for_openai() -> None:
    manifest, diagnostics = _parse("""
        providers:
          openai: {kind: openai, strict: true}
          claude: {kind: anthropic, strict: true}
          broken: {kind: openai, strict: "yes"}
        """)
    assert manifest.providers["openai"].strict is True and manifest.providers["claude"].strict is True
    assert manifest.providers["broken"].strict is False
    assert sorted((d.level, d.line, d.pointer) for d in diagnostics) == [
        ("error", 5, "providers.broken.strict"), ("warning", 4, "providers.claude.strict")]


def test_an_agent_with_more_tools_than_openai_accepts_is_warned_about() -> None:
    catalog = Catalog([_tool("big", f"op{i}") for i in range(130)], apis={"big": ApiSpec(name="big", file="big.json")})
    text = """
        providers:
          openai: {kind: openai}
          local: {kind: openai, base_url: "http://127.0.0.1:8000/v1"}
        agents:
          hoarder: {model: openai/gpt-4o, tools: [{api: big}], tool_search: "off"}
          local: {model: local/qwen, tools: [{api: big}], tool_search: "off"}
          picky: {model: openai/gpt-4o, tools: [{api: big, operations: ["op1*"]}]}
          searcher: {model: openai/gpt-4o, tools: [{api: big}]}
        """
    _, diagnostics = _parse(text, catalog=catalog)
    # `searcher` has tool search (auto: on above 64 tools), so its requests carry a few tools at a time.
    [warning] = [d for d in diagnostics if "at most 128" in d.message]
    assert warning.pointer == "agents.hoarder.tools" and warning.line == _line_of(text, "hoarder:")
    assert warning.message.startswith("130 tools")


def test_native_tool_search_is_refused_on_a_provider_without_one() -> None:
    text = """\
    providers:
      claude: {kind: anthropic, api_key: k}
      responses: {kind: openai-responses, api_key: k}
      gpt: {kind: openai, api_key: k}
    agents:
      native: {model: claude/claude-sonnet-4-5, tool_search: native}
      also: {model: responses/gpt-5.4, tool_search: native}
      wrong: {model: gpt/gpt-4o, tool_search: native}
    """
    manifest, diagnostics = _parse(text)
    assert manifest.agents["native"].tool_search == manifest.agents["also"].tool_search == "native"
    [error] = _errors(diagnostics)
    assert (error.file, error.line, error.pointer) == ("agents.yaml", _line_of(text, "wrong:"),
                                                       "agents.wrong.tool_search")
    assert "'gpt' (kind openai) has no native tool search" in error.message and "tool_search: on" in error.message


def test_native_tool_search_past_anthropics_catalog_limit_is_an_error() -> None:
    from gateway.providers.anthropic import MAX_DEFERRED_TOOLS

    count = MAX_DEFERRED_TOOLS + 2
    catalog = Catalog([_tool("big", f"op{i}") for i in range(count)], apis={"big": ApiSpec(name="big", file="b.json")})
    text = """
        providers:
          claude: {kind: anthropic, api_key: k}
        agents:
          all: {model: claude/c, tools: [{api: big}], tool_search: native}
          pinned: {model: claude/c, tools: [{api: big}], tool_search: native, pinned: [op1, op2]}
        """
    _, diagnostics = _parse(text, catalog=catalog)
    [error] = _errors(diagnostics)
    assert error.pointer == "agents.all.tools" and error.line == _line_of(text, "all:")
    assert f"{count} tools" in error.message and f"at most {MAX_DEFERRED_TOOLS} deferred" in error.message


def test_the_checker_knows_which_providers_search_natively() -> None:
    from gateway.providers import ADAPTERS

    refused = set()
    for kind in ADAPTERS:
        _, diagnostics = _parse(f"""
            providers:
              p: {{kind: {kind}}}
            agents:
              a: {{model: p/m, tool_search: native}}
            """)
        if any(d.pointer == "agents.a.tool_search" for d in diagnostics if d.level == "error"):
            refused.add(kind)
    assert {kind for kind, adapter in ADAPTERS.items() if not adapter.native_tool_search} == refused
    assert refused and refused != set(ADAPTERS)  # some kinds search natively, some do not


def test_tool_search_on_and_off_unquoted_are_read_as_written() -> None:
    text = """\
    providers:
      gpt: {kind: openai, api_key: k}
    agents:
      a: {model: gpt/x, tool_search: on}
      b: {model: gpt/x, tool_search: off}
      c: {model: gpt/x, tool_search: sometimes}
    """
    manifest, diagnostics = _parse(text)
    assert (manifest.agents["a"].tool_search, manifest.agents["b"].tool_search) == ("on", "off")
    [error] = _errors(diagnostics)
    assert error.pointer == "agents.c.tool_search" and "auto, on, off, native" in error.message


def test_output_check_and_reuse_connections_per_api_and_per_tool() -> None:
    text = """\
    providers: {local: {kind: ollama}}
    apis:
      shop: {output_check: warn, reuse_connections: false}
      github: {output_check: maybe, reuse_connections: sometimes}
    agents:
      clerk:
        model: local/llama3
        tools:
          - api: shop
            override: {listItems: {output_check: off}, deleteItem: {output_check: enforce}}
    """
    manifest, diagnostics = _parse(text, catalog=_catalog())
    assert [(d.pointer, d.line) for d in _errors(diagnostics)] == [
        ("apis.github.output_check", _line_of(text, "github:")), ("apis.github.reuse_connections",
                                                                 _line_of(text, "github:"))]
    shop = manifest.apis["shop"]
    assert shop.output_check == "warn" and shop.reuse_connections is False
    assert manifest.api("github").output_check == "enforce" and manifest.api("github").reuse_connections is True
    overrides = manifest.agents["clerk"].tools[0].overrides
    assert overrides["listItems"].output_check == "off" and overrides["deleteItem"].output_check == "enforce"


def test_a_pinned_name_that_matches_no_tool_of_the_agent_is_a_warning() -> None:
    text = """\
    providers: {p: {kind: openai, api_key: k}}
    agents:
      a:
        model: p/m
        tools: [shop]
        tool_search: on
        pinned: [listItems, "delete*", users/get-authenticated]
    """
    _, diagnostics = _parse(text, catalog=_catalog())
    [warning] = diagnostics
    assert (warning.level, warning.pointer, warning.line) == ("warning", "agents.a.pinned[2]", _line_of(text, "pinned"))
    assert "'users/get-authenticated' names none of the agent's tools" in warning.message


def test_a_postgresql_store_or_redis_without_the_shared_extra_is_an_error_at_its_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # not installed, as the import system records it
    monkeypatch.setitem(sys.modules, "redis", None)
    text = """\
    gateway:
      store: postgresql://gw@127.0.0.1:9/gw
      redis: redis://127.0.0.1:9/0
    """
    _, diagnostics = _parse(text)
    assert [(d.level, d.pointer, d.line) for d in diagnostics] == [("error", "gateway.store", 2),
                                                                   ("error", "gateway.redis", 3)]
    assert all("pip install 'gateway[shared]'" in d.message for d in diagnostics)


def test_an_ollama_base_url_takes_the_forms_of_ollama_host() -> None:
    """The example reads `${OLLAMA_HOST:-...}`, which Ollama's users often set as `0.0.0.0` or `host:port`: that made
    the whole file unusable, for the OpenAI agents too."""
    text = """\
    providers:
      ollama: {base_url: "${OLLAMA_HOST:-http://127.0.0.1:11434}"}
      remote: {kind: ollama, base_url: "gpu-box:8000"}
      cloud: {kind: openai, base_url: "api.example.com/v1", api_key: k}
    gateway:
      search_embeddings: {kind: ollama, model: nomic-embed-text, base_url: ":9000"}
    """
    manifest, diagnostics = _parse(text, environ={"OLLAMA_HOST": "0.0.0.0"})
    assert manifest.providers["ollama"].base_url == "http://0.0.0.0:11434"
    assert manifest.providers["remote"].base_url == "http://gpu-box:8000"
    embeddings = manifest.gateway.search_embeddings
    assert embeddings is not None and embeddings.base_url == "http://127.0.0.1:9000"
    [error] = _errors(diagnostics)  # other kinds still need a URL: no server of theirs is addressed that way
    assert error.pointer == "providers.cloud.base_url" and "expected an http:// or https:// URL" in error.message


def test_the_example_serves_with_ollama_host_set_as_ollama_serve_wants_it() -> None:
    from gateway.runtime import load_runtime

    root = Path(__file__).resolve().parents[2]
    runtime = load_runtime(root / "specs", root / "agents.yaml", use_cache=False,
                           environ={"OLLAMA_HOST": "0.0.0.0:11434"})
    assert runtime.manifest.providers["ollama"].base_url == "http://0.0.0.0:11434"


def test_a_model_without_its_provider_names_the_variable_it_came_from_and_the_providers() -> None:
    """GATEWAY_MODEL=gpt-4o (the README's variable, without the provider) made every agent 'expected
    <provider>/<model id>'; the error now says the value came from GATEWAY_MODEL and how to write it."""
    text = """\
    providers: {openai: {kind: openai, api_key: k}, ollama: {kind: ollama}}
    agents:
      weather: {model: "${GATEWAY_MODEL:-openai/gpt-4o-mini}"}
      triage: {model: opneai/gpt-4o}
    """
    _, diagnostics = _parse(text, environ={"GATEWAY_MODEL": "gpt-4o"})
    first, second = _errors(diagnostics)
    assert first.pointer == "agents.weather.model" and first.message == (
        "expected '<provider>/<model id>', got 'gpt-4o' (from GATEWAY_MODEL); the providers are openai, ollama, "
        "e.g. 'openai/gpt-4o'")
    assert second.pointer == "agents.triage.model" and "no provider named 'opneai'" in second.message
    assert "(from " not in second.message  # written in the file: nothing to point at


def _shop_of_70_lists(**fields: Any) -> Catalog:
    """An api `shop` of 70 GET tools `list0`..`list69` without parameters, each with `fields`."""
    tools = [Tool(name=f"list{i}", api="shop", operation_id=f"list{i}", method="GET", path=f"/l{i}",
                  input_schema={"type": "object", "properties": {}}, servers=(Server(url="https://shop.example.com"),),
                  **fields) for i in range(70)]
    return Catalog(tools, {"shop": ApiSpec(name="shop", file="shop.yaml")})


def test_pinned_tools_that_fill_the_definitions_budget_are_a_warning() -> None:
    """tool-search.md's example pinned "issues/list*": 20 of GitHub's tools, past the 20,000 tokens a request may
    carry, so every search answered "not loaded". Here 70 tools with long descriptions, a budget of 2,000 tokens."""
    catalog = _shop_of_70_lists(
        description="Lists the things of the shop, one page at a time, with every filter the shop offers. " * 8)
    text = """\
    providers: {p: {kind: openai, api_key: k}}
    gateway: {tool_definitions_budget: 2000}
    agents:
      a: {model: p/m, tools: [shop], pinned: ["list1*"]}
      b: {model: p/m, tools: [shop], pinned: [list1]}
    """
    _, diagnostics = _parse(text, catalog=catalog)
    [warning] = diagnostics
    assert (warning.level, warning.pointer) == ("warning", "agents.a.pinned")
    assert "(11 pinned, and search_tools)" in warning.message and "a search can load nothing" in warning.message


def test_pinned_tools_are_counted_as_the_agents_provider_is_sent_them() -> None:
    """Output schemas go to MCP clients, not in a chat request's tools: 11 pinned tools whose output schemas alone
    would pass the budget leave room for a search, and validate does not warn."""
    output = {"type": "object", "properties": {f"field{i}": {"type": "string", "description": "A field of the "
                                                             "thing, as the shop stores it."} for i in range(40)}}
    catalog = _shop_of_70_lists(description="Lists the things of the shop.", output_schema=output)
    text = """\
    providers: {p: {kind: openai, api_key: k}}
    gateway: {tool_definitions_budget: 2000}
    agents:
      a: {model: p/m, tools: [shop], pinned: ["list1*"]}
    """
    _, diagnostics = _parse(text, catalog=catalog)
    assert diagnostics == []


@pytest.mark.parametrize("line", ["  store: memory:", "  store: sqlite: ./state.db"])
def test_an_unquoted_value_with_a_colon_says_to_quote_it(line: str) -> None:
    """`store: memory:` (as the docs name the in-memory store) read as a key: PyYAML's 'mapping values are not
    allowed here' alone did not say what to do."""
    _, diagnostics = _parse(f"gateway:\n{line}\n  redis: redis://127.0.0.1:6379/0\n")
    [error] = diagnostics
    assert error.line == 2 and "quote it" in error.message, error


def test_a_clients_concurrency_cap_is_a_count_at_most_the_apis_slots_and_a_wrong_one_is_named_at_its_key() -> None:
    text = """\
    apis:
      shop: {max_concurrency: 4, max_concurrency_per_client: 5}
      github: {max_concurrency_per_client: 20}
      wiki: {max_concurrency_per_client: 0}
      maps: {max_concurrency: 2}
    gateway:
      max_concurrency: 16
      max_concurrency_per_client: 17
    """
    _, diagnostics = _parse(text)
    assert [(d.file, d.line, d.pointer, d.message) for d in _errors(diagnostics)] == [
        ("agents.yaml", 2, "apis.shop.max_concurrency_per_client",
         "at most the api's max_concurrency (4, apis.shop.max_concurrency), got 5"),
        ("agents.yaml", 3, "apis.github.max_concurrency_per_client",
         "at most the api's max_concurrency (16, gateway.max_concurrency), got 20"),
        ("agents.yaml", 4, "apis.wiki.max_concurrency_per_client", "must be at least 1, got 0"),
        ("agents.yaml", 8, "gateway.max_concurrency_per_client", "at most gateway.max_concurrency (16), got 17"),
    ]
    # A gateway-wide cap above one api's own slots is no cap there (not an error); read into the guard's settings.
    manifest, diagnostics = _parse("apis: {maps: {max_concurrency: 2}}\ngateway: {max_concurrency_per_client: 4}\n")
    assert _errors(diagnostics) == [] and manifest.gateway.guard.max_concurrency_per_client == 4


def test_a_clients_share_of_runs_and_sandboxes_is_a_count_and_a_wrong_one_is_named_at_its_key() -> None:
    text = """\
    gateway:
      max_runs_per_client: 0
      max_code_workers_per_client: 17
    """
    _, diagnostics = _parse(text)
    assert [(d.file, d.line, d.pointer, d.message) for d in _errors(diagnostics)] == [
        ("agents.yaml", 2, "gateway.max_runs_per_client", "must be at least 1, got 0"),
        ("agents.yaml", 3, "gateway.max_code_workers_per_client", "at most the 16 sandboxes of a process, got 17"),
    ]
    manifest, diagnostics = _parse("gateway: {max_runs_per_client: 3, max_code_workers_per_client: 16}\n")
    assert _errors(diagnostics) == []
    assert (manifest.gateway.max_runs_per_client, manifest.gateway.max_code_workers_per_client) == (3, 16)
    default, _ = _parse("gateway: {}\n")  # no cap unless set: a single client's setup is as it was
    assert (default.gateway.max_runs_per_client, default.gateway.max_code_workers_per_client) == (None, None)


def test_a_clients_concurrency_cap_with_redis_is_applied_so_nothing_is_said() -> None:
    """With gateway.redis the cap is counted across instances (tests/safety/test_slot_queue.py), as the slots are."""
    text = """\
    apis:
      shop: {max_concurrency_per_client: 2}
    gateway:
      redis: redis://127.0.0.1:9/0
    """
    warnings = [d for d in _parse(text)[1] if d.level == "warning"]  # (without the shared extra, also an error)
    assert warnings == []


def test_code_mode_without_its_sandbox_installed_names_the_key_and_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found, not imported: the check asks whether pydantic-monty is on the path (a module set to None in
    `sys.modules` is one Python cannot import), and names the agent's `code_mode` line."""
    text = """\
    providers:
      local: {kind: openai, base_url: "http://127.0.0.1:9/v1"}
    agents:
      coder:
        model: local/scripted
        code_mode: on
    """
    assert _errors(_parse(text)[1]) == []  # installed here (the test extra)
    monkeypatch.setitem(sys.modules, "pydantic_monty", None)
    errors = _errors(_parse(text)[1])
    assert [(d.line, d.pointer) for d in errors] == [(6, "agents.coder.code_mode")]
    assert "pip install 'gateway[codemode]'" in errors[0].message


def test_a_diagnostic_past_a_left_out_list_item_names_the_files_item_and_its_line() -> None:
    """A list item left out (its own mistake reported) shifts the loaded list's indexes: a later diagnostic on the
    loaded list's first item names the file's second item, at the second item's line, not the third's (the path
    was mapped to the file's once for the pointer and again for the line)."""
    tools = ("agents", "a", "tools")
    c = Checker("agents.yaml", {tools: 9, (*tools, 0): 10, (*tools, 1): 11, (*tools, 2): 12})
    c.kept[tools] = [1, 2]  # the file's item 0 was left out
    c.error((*tools, 0), "no spec named 'nosuch'")
    [diagnostic] = c.diagnostics
    assert (diagnostic.pointer, diagnostic.line) == ("agents.a.tools[1]", 11)
    assert c.line((*tools, 1)) == 12  # a loaded path's line: mapped once
