"""What agents.yaml says of identity, checked where it is written (file:line:key), and read into the identity layer."""

from __future__ import annotations

import textwrap

from gateway.config.loader import parse_manifest
from gateway.identity.resource import ResourceSettings

GOOD = """\
clients:
  eng: {agents: ["*"], claims: {groups: [eng, qa], sub: ann}}
  ci: {key: ci-key}
apis:
  tracker:
    auth: {type: user_oauth, client_id: gw, authorization_url: "https://id.example/auth",
           token_url: "https://id.example/token", scopes: [tickets], redirect_uri: "https://gw.example/connections/callback"}
  repos:
    auth: {type: token_exchange, token_url: "https://id.example/token", client_id: gw, client_secret: s,
           resource: "https://repos.example/", scope: "repo:read"}
gateway:
  auth: {issuer: "https://id.example", audience: "https://gw.example/", leeway: 5, scopes: [gateway],
         introspection: {client_id: gw, client_secret: s}}
"""


def _errors(text: str) -> list[str]:
    _, diagnostics = parse_manifest(textwrap.dedent(text))
    return [f"{d.line}: {d.message}" for d in diagnostics if d.level == "error"]


def test_the_identity_keys_are_read() -> None:
    manifest, diagnostics = parse_manifest(GOOD)
    assert [d for d in diagnostics if d.level == "error"] == []
    assert manifest.clients["eng"].key is None and manifest.clients["eng"].claims == {"groups": ["eng", "qa"],
                                                                                      "sub": ["ann"]}
    exchange = manifest.apis["repos"].auth[0]
    assert (exchange.type, exchange.resource, exchange.scope) == ("token_exchange", "https://repos.example/",
                                                                  "repo:read")
    own = manifest.apis["tracker"].auth[0]
    assert (own.type, own.redirect_uri, own.scopes) == ("user_oauth", "https://gw.example/connections/callback",
                                                        ["tickets"])
    settings = ResourceSettings.from_manifest(manifest)
    assert settings is not None and (settings.issuer, settings.audience, settings.leeway) == (
        "https://id.example", "https://gw.example/", 5.0)
    assert settings.introspection is not None and settings.introspection.client_id == "gw"
    assert settings.clients == (("eng", (("groups", ("eng", "qa")), ("sub", ("ann",)))),)


def test_mistakes_are_reported_at_their_line() -> None:
    errors = _errors("""\
        clients:
          eng: {agents: ["*"]}
        apis:
          repos:
            auth: {type: token_exchange, token_url: "https://id.example/token", client_id: gw, client_secret: s}
        gateway:
          auth:
            issuer: https://id.example
            leeway: -1
    """)
    assert "2: 'key' is required (or `claims`, for a client that tokens reach)" in errors
    assert any(e.startswith("5: ") and "`resource` or `audience`" in e for e in errors)
    assert "7: 'audience' is required" in errors
    assert "9: must be at least 0, got -1" in errors


def _warnings(text: str) -> list[str]:
    _, diagnostics = parse_manifest(textwrap.dedent(text))
    return [f"{d.line}: {d.message}" for d in diagnostics if d.level == "warning"]


def test_credentials_of_the_signed_in_user_need_gateway_auth_and_a_way_back() -> None:
    without_auth = """\
        apis:
          repos:
            auth: {type: token_exchange, token_url: "https://id.example/token", client_id: gw, client_secret: s,
                   resource: "https://repos.example/"}
    """
    assert ["3: token_exchange acts as the signed-in user, and without `gateway.auth` no caller is one: every call "
            "of this api is refused"] == _warnings(without_auth)
    no_way_back = """\
        apis:
          tracker:
            auth:
              - {type: user_oauth, client_id: gw, authorization_url: "https://id.example/auth",
                 token_url: "https://id.example/token"}
        gateway:
          auth: {issuer: "https://id.example", audience: "api://gateway"}
    """
    errors = _errors(no_way_back)
    assert any(e.startswith("4: 'redirect_uri' is required") for e in errors), errors
    # the audience as the gateway's URL, or redirect_uri, says where
    assert _errors(no_way_back.replace("api://gateway", "https://gw.example/")) == []
    assert _errors(no_way_back.replace('token_url: "https://id.example/token"}',
                                       'token_url: "https://id.example/token", '
                                       'redirect_uri: "https://gw.example/connections/callback"}')) == []


def test_an_exchange_for_the_gateways_own_audience_is_warned_at_its_key() -> None:
    text = """\
        apis:
          repos:
            auth:
              type: token_exchange
              token_url: "https://id.example/token"
              client_id: gw
              client_secret: s
              resource: "https://gw.example"
        gateway:
          auth: {issuer: "https://id.example", audience: "https://gw.example/"}
    """
    _, diagnostics = parse_manifest(textwrap.dedent(text), file="agents.yaml")
    [warned] = [d for d in diagnostics if d.level == "warning"]
    assert (warned.file, warned.line, warned.pointer) == ("agents.yaml", 8, "apis.repos.auth.resource"), warned
    assert "the gateway's own audience (https://gw.example/)" in warned.message
    named = text.replace('resource: "https://gw.example"', "audience: https://gw.example/")
    assert [d.pointer for d in parse_manifest(textwrap.dedent(named))[1]] == ["apis.repos.auth.audience"]
    assert _warnings(text.replace("https://gw.example\"", "https://repos.example/\"")) == []


def test_a_write_under_approval_on_an_exchanged_api_is_named_at_the_agents_approval() -> None:
    """An approved call resumes without its user's access token, which an exchange needs: validate says the write
    would never run (found trying the docs: `approval: writes` on a `token_exchange` api posted nothing)."""
    from gateway.catalog import ApiSpec, Catalog, Tool
    from gateway.configuration import parse_configuration

    def tool(name: str, method: str) -> Tool:
        return Tool(name=name, api="repos", operation_id=name, method=method, path=f"/{name}", description=name,
                    input_schema={"type": "object", "properties": {}})

    catalog = Catalog([tool("getRepo", "GET"), tool("createIssue", "POST")],
                      {"repos": ApiSpec(name="repos", file="repos.yaml")})
    text = GOOD + textwrap.dedent("""\
        providers:
          openai: {kind: openai, api_key: k}
        agents:
          coder: {model: openai/m, tools: [{api: repos}], approval: writes}
          reader: {model: openai/m, tools: [{api: repos, methods: [GET]}], approval: writes}
        """)
    _, _, diagnostics = parse_configuration(text, catalog=catalog, environ={})
    named = [d for d in diagnostics if "token_exchange" in d.message and "approval" in d.message]
    assert [(d.level, d.line, d.message.split(" wait")[0]) for d in named] == [
        ("warning", text.splitlines().index(
            "  coder: {model: openai/m, tools: [{api: repos}], approval: writes}") + 1, "createIssue")]
    assert "use user_oauth" in named[0].message
