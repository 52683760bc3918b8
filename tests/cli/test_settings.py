"""`gateway settings`: each effective setting with the layer it came from (built-in default, agents.yaml, the
environment through `${VAR}`, the command line), secrets as set/unset only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.cli import main

AGENTS = """\
providers:
  llm:
    kind: openai
    base_url: http://127.0.0.1:9/v1
    api_key: ${LLM_KEY}
    headers: {X-Api-Key: "${HEADER_KEY:-hk-default-4455667788}"}
agents:
  ops:
    model: llm/x
    max_iterations: ${MAX_IT:-12}
    tools: [{api: shop, args: {tenant: acme}}]
  other:
    model: llm/y
clients:
  bot: {key: "${BOT_KEY}", agents: [ops]}
  them: {key: ck-them-literal-0099, agents: [other]}
gateway:
  store: postgresql://gw:pw-s3cret-9911@127.0.0.1:5432/gw
  rate_limits: {client: 120/min}
"""
SECRETS = ("sk-llm-secret-1234", "ck-bot-secret-5678", "hk-default-4455667788", "pw-s3cret-9911",
           "ck-them-literal-0099")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "specs").mkdir()
    (tmp_path / "agents.yaml").write_text(AGENTS)
    monkeypatch.chdir(tmp_path)
    for name in ("GATEWAY_SPECS", "GATEWAY_AGENTS", "GATEWAY_CACHE_DIR", "GATEWAY_LOG_FORMAT", "HEADER_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LLM_KEY", SECRETS[0])
    monkeypatch.setenv("BOT_KEY", SECRETS[1])
    monkeypatch.setenv("MAX_IT", "7")
    monkeypatch.setenv("GATEWAY_LOG_FORMAT", "json")
    return tmp_path


def _settings(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, dict[str, str]], str]:
    status = main(["settings", "--json", *argv])
    out, err = capsys.readouterr()
    return status, {row["key"]: row for row in json.loads(out)} if out else {}, err


def test_each_setting_says_its_layer(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, rows, err = _settings(capsys, "--specs", "specs")
    assert status == 0, err
    assert rows["specs"] == {"key": "specs", "value": "specs", "layer": "command line", "source": "--specs"}
    assert rows["agents"]["layer"] == "default" and rows["agents"]["value"] == "./agents.yaml"
    assert rows["log_format"] == {"key": "log_format", "value": "json", "layer": "environment",
                                  "source": "GATEWAY_LOG_FORMAT"}
    assert rows["agents.ops.max_iterations"] == {"key": "agents.ops.max_iterations", "value": 7,
                                                 "layer": "environment", "source": "$MAX_IT via agents.yaml:10"}
    assert rows["agents.ops.model"]["layer"] == "agents.yaml" and rows["agents.ops.model"]["source"] == \
        "agents.yaml:9"
    assert rows["agents.ops.tools[0].args.tenant"]["value"] == "acme"
    assert rows["gateway.rate_limits.client"]["value"] == {"rate": 2.0, "burst": 120.0}  # per second, parsed
    assert rows["agents.ops.max_consecutive_errors"] == {"key": "agents.ops.max_consecutive_errors", "value": 3,
                                                         "layer": "default", "source": "built in"}
    header = rows["providers.llm.headers.X-Api-Key"]
    assert header["value"] == "set" and header["layer"] == "agents.yaml"
    assert header["source"] == "agents.yaml:6 ($HEADER_KEY unset: its default)"


def test_secrets_are_shown_as_set_or_unset_only(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in ((), ("--json",)):
        status = main(["settings", *argv])
        out, _ = capsys.readouterr()
        assert status == 0
        assert not [secret for secret in SECRETS if secret in out], out
    _, rows, _ = _settings(capsys)
    assert rows["providers.llm.api_key"]["value"] == "set"
    assert rows["providers.llm.api_key"]["source"] == "$LLM_KEY via agents.yaml:5"
    assert rows["clients.them.key"]["value"] == "set" and rows["clients.bot.key"]["layer"] == "environment"
    assert rows["gateway.store"]["value"] == "postgresql://gw:[set]@127.0.0.1:5432/gw"
    assert rows["connections_key"]["value"] == "unset"


def test_one_agents_settings_and_an_unknown_agent(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, rows, _ = _settings(capsys, "--agent", "ops")
    assert status == 0
    assert "agents.ops.model" in rows and "providers.llm.kind" in rows and "gateway.store" in rows
    assert "clients.bot.key" in rows and "clients.them.key" not in rows  # who may call ops
    assert not [key for key in rows if key.startswith("agents.other.")]
    assert main(["settings", "--agent", "nobody"]) == 2
    assert "unknown agent 'nobody'; the agents in agents.yaml are: ops, other" in capsys.readouterr().err


def test_a_mistake_is_reported_and_the_rest_still_shown(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("BOT_KEY")
    status = main(["settings"])
    out, err = capsys.readouterr()
    assert status == 1
    assert "agents.yaml:15: clients.bot.key" in err and "BOT_KEY is not set" in err
    assert "agents.ops.max_iterations" in out
    assert main(["settings", "--agents", "missing.yaml"]) == 1
    assert "missing.yaml does not exist" in capsys.readouterr().err


def test_short_forms_are_the_files_and_implied_keys_say_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SHOP_TOKEN", "tok-secret-123456")
    (tmp_path / "agents.yaml").write_text(
        "providers:\n  openai: {api_key: x}\n"                      # kind: from the provider's name
        "apis:\n  shop:\n    auth: {type: bearer, token: \"${SHOP_TOKEN}\"}\n"  # one mapping, kept as a list
        "agents:\n  a:\n    model: openai/m\n    tools: [shop]\n")   # an entry that is just the api's name
    status, rows, err = _settings(capsys)
    assert status == 0, err
    assert rows["agents.a.tools[0].api"] == {"key": "agents.a.tools[0].api", "value": "shop", "layer": "agents.yaml",
                                             "source": "agents.yaml:9"}
    assert rows["apis.shop.auth[0].token"] == {"key": "apis.shop.auth[0].token", "value": "set",
                                               "layer": "environment", "source": "$SHOP_TOKEN via agents.yaml:5"}
    assert rows["apis.shop.auth[0].type"]["layer"] == "agents.yaml"
    assert rows["providers.openai.kind"] == {"key": "providers.openai.kind", "value": "openai", "layer": "default",
                                             "source": "implied by agents.yaml:2"}
