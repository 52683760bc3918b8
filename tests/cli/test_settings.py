"""`gateway settings`: each effective setting with the layer it came from (built-in default, agents.yaml, the
environment through `${VAR}`, the command line), secrets as set/unset only."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


RUNNING_AGENTS = """\
providers:
  llm: {kind: openai, base_url: "http://127.0.0.1:9/v1", api_key: "${LLM_KEY:-}"}
agents:
  ops:
    model: llm/unused
    max_iterations: ${MAX_IT:-12}
    tools: [{api: slow}]
clients:
  admin: {key: ck-admin-settings-0011, admin: true, agents: []}
  plain: {key: ck-plain-settings-0022, agents: [ops]}
gateway:
  shared_state_timeout: 4
"""


def test_url_shows_what_the_running_gateway_uses_not_what_the_file_says_here(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`gateway settings` reads agents.yaml with the terminal's environment; a gateway started with another one (and
    whose reload of an edit was refused since) runs otherwise. `--url` asks the running process (`GET /settings`,
    an admin key from GATEWAY_KEY): its `${MAX_IT}`, its `GATEWAY_LOG_FORMAT`, its loaded values after a refused
    reload, and says the file changed and why the reload was refused. Before: no way to ask; the file's values."""
    import signal

    import httpx
    from serve_process import start_serve, write_slow_project

    write_slow_project(tmp_path, "http://127.0.0.1:9", RUNNING_AGENTS)
    monkeypatch.chdir(tmp_path)
    for name in ("GATEWAY_SPECS", "GATEWAY_AGENTS", "GATEWAY_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in (("MAX_IT", "7"), ("GATEWAY_LOG_FORMAT", "json"), ("LLM_KEY", "sk-running-secret-3344")):
        monkeypatch.setenv(name, value)  # the running gateway's environment, not the terminal's below
    process, port = start_serve(tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        for name in ("MAX_IT", "GATEWAY_LOG_FORMAT", "LLM_KEY"):
            monkeypatch.delenv(name)
        status, rows, err = _settings(capsys)  # the file, read here
        assert status == 0, err
        assert rows["agents.ops.max_iterations"]["value"] == 12 and rows["log_format"]["value"] == "text"

        monkeypatch.setenv("GATEWAY_KEY", "ck-admin-settings-0011")
        status, rows, err = _settings(capsys, "--url", url)
        assert status == 0 and err == "", err
        assert rows["agents.ops.max_iterations"] == {"key": "agents.ops.max_iterations", "value": 7,
                                                     "layer": "environment", "source": "$MAX_IT via agents.yaml:6"}
        assert rows["log_format"] == {"key": "log_format", "value": "json", "layer": "environment",
                                      "source": "GATEWAY_LOG_FORMAT"}
        assert rows["providers.llm.api_key"]["value"] == "set" and rows["clients.plain.key"]["value"] == "set"
        assert rows["agents"]["value"] == "./agents.yaml"
        # `gateway serve`'s own, read at start only: where it listens, how many workers (before: not listed)
        assert rows["port"] == {"key": "port", "value": port, "layer": "command line", "source": "gateway serve --port"}
        assert rows["host"]["value"] == "127.0.0.1" and rows["workers"] == {"key": "workers", "value": 1,
                                                                             "layer": "default", "source": "built in"}
        status, rows, _ = _settings(capsys, "--url", url, "--agent", "ops")
        assert status == 0 and "agents.ops.model" in rows and "clients.admin.key" not in rows
        assert main(["settings", "--url", url, "--agent", "nobody"]) == 2
        assert "no agent 'nobody'" in capsys.readouterr().err
        status = main(["settings", "--url", url])  # the table
        out, _ = capsys.readouterr()
        assert status == 0 and "sk-running-secret-3344" not in out and "ck-admin-settings-0011" not in out

        def running_once(ready: Callable[[dict[str, Any]], bool]) -> None:
            deadline = time.monotonic() + 60  # a hang guard only: a reload is tried once the edit settles
            while not ready(httpx.get(f"{url}/settings", headers={"Authorization": "Bearer ck-admin-settings-0011"},
                                      timeout=30).json()):
                assert time.monotonic() < deadline
                time.sleep(0.2)

        # A reload of a setting read at start only: the process keeps the value it started with, and says so.
        (tmp_path / "agents.yaml").write_text(RUNNING_AGENTS.replace("shared_state_timeout: 4",
                                                                     "shared_state_timeout: 9"))
        running_once(lambda body: body["reloads"] == 1)
        status, rows, err = _settings(capsys, "--url", url)
        assert status == 0, err
        kept = rows["gateway.shared_state_timeout"]
        assert kept["value"] == 4 and kept["source"] == ("agents.yaml:12 (read at start only: agents.yaml now gives "
                                                         "9.0 (agents.yaml:12), which a restart applies)"), kept
        assert ("agents.yaml gives gateway.shared_state_timeout, read at start only, another value than the one the "
                "running gateway started with: restart it to apply") in err, err

        # An edit the running gateway refuses to reload: it runs what it loaded, and says so.
        (tmp_path / "agents.yaml").write_text(RUNNING_AGENTS.replace("${MAX_IT:-12}", "many"))
        running_once(lambda body: body["reload_refused"] is not None)
        status, rows, err = _settings(capsys, "--url", url)
        assert status == 0 and rows["agents.ops.max_iterations"]["value"] == 7
        assert "agents.yaml is broken now (the running gateway keeps what it loaded at " in err
        assert "its last reload was refused" in err and "max_iterations" in err

        for key, said in (("ck-plain-settings-0022", "HTTP 403"), ("", "HTTP 401")):
            monkeypatch.setenv("GATEWAY_KEY", key)
            assert main(["settings", "--url", url]) == 1
            out, err = capsys.readouterr()
            assert out == "" and said in err and "admin" in err, err
        assert main(["settings", "--url", url, "--agents", "agents.yaml"]) == 2  # the running one has its own
        assert main(["settings", "--url", "http://127.0.0.1:9"]) == 1
        assert "cannot reach http://127.0.0.1:9/settings" in capsys.readouterr().err
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)


def test_url_after_an_edit_or_a_break_shows_what_runs_with_the_lines_it_was_loaded_from(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A running gateway whose agents.yaml was edited (its reload refused: the spec it names was broken beside it)
    or is broken now (a wrong value, bad YAML, bytes that are not UTF-8): `GET /settings` and `gateway settings
    --url` show the values it runs on, each with the line it was loaded from, say the file changed since the load (at
    what time), and name the file's errors (file, line, key). Before: the values came with the edited file's lines
    and layers (`agents.yaml:8`, a literal, for a value read from `$MAX_IT` at line 6), and a file that did not parse
    left only the process settings and no error."""
    import signal

    import httpx
    from serve_process import start_serve, write_slow_project

    write_slow_project(tmp_path, "http://127.0.0.1:9", RUNNING_AGENTS)
    monkeypatch.chdir(tmp_path)
    for name in ("GATEWAY_SPECS", "GATEWAY_AGENTS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MAX_IT", "7")
    monkeypatch.setenv("GATEWAY_KEY", "ck-admin-settings-0011")
    process, port = start_serve(tmp_path)
    url = f"http://127.0.0.1:{port}"

    def settings() -> dict[str, Any]:
        answer = httpx.get(f"{url}/settings", headers={"Authorization": "Bearer ck-admin-settings-0011"}, timeout=30)
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    try:
        loaded = settings()
        running = {"key": "agents.ops.max_iterations", "value": 7, "layer": "environment",
                   "source": "$MAX_IT via agents.yaml:6"}
        assert {row["key"]: row for row in loaded["data"]}["agents.ops.max_iterations"] == running
        assert loaded["agents_yaml"] == "as loaded" and loaded.get("agents_yaml_errors", []) == []

        # Edited (two lines above it, a literal 9) and refused: the spec it names was broken in the same edit.
        (tmp_path / "specs" / "slow.yaml").write_text("openapi: 3.0.3\ninfo: {title: Slow, version: '1'}\npaths: {}\n")
        (tmp_path / "agents.yaml").write_text("# edited\n# twice\n" + RUNNING_AGENTS.replace("${MAX_IT:-12}", "9"))
        deadline = time.monotonic() + 60  # a hang guard only: a reload is tried once the edit settles
        while (body := settings())["reload_refused"] is None:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert {row["key"]: row for row in body["data"]}["agents.ops.max_iterations"] == running
        assert body["reloads"] == 0 and body["agents_yaml"] == "changed" and body.get("agents_yaml_errors", []) == []
        status, rows, err = _settings(capsys, "--url", url)
        assert status == 0 and rows["agents.ops.max_iterations"] == running
        assert (f"agents.yaml changed since the running gateway loaded it at {loaded['loaded_at']} (not reloaded yet, "
                "or the reload was refused): the values shown are the ones it runs on, each with the line it was "
                "loaded from") in err

        for broken, said in ((RUNNING_AGENTS.replace("${MAX_IT:-12}", "many"),
                              {"level": "error", "file": "agents.yaml", "line": 6,
                               "pointer": "agents.ops.max_iterations"}),
                             (RUNNING_AGENTS.replace("tools: [{api: slow}]", "tools: [{api: slow}"),
                              {"level": "error", "file": "agents.yaml", "line": 8}),
                             ("agents: \udcff\n", {"level": "error", "file": "agents.yaml", "line": None})):
            (tmp_path / "agents.yaml").write_bytes(broken.encode("utf-8", "surrogateescape"))
            body = settings()
            assert {row["key"]: row for row in body["data"]}.get("agents.ops.max_iterations") == running, body
            assert body["agents_yaml"] == ("unreadable" if said["line"] is None else "broken"), body
            [error] = body["agents_yaml_errors"]
            assert {key: error[key] for key in said} == said, error
            status, rows, err = _settings(capsys, "--url", url)
            assert status == 0 and rows["agents.ops.max_iterations"] == running and "agents.ops.model" in rows
            assert f"the running gateway keeps what it loaded at {loaded['loaded_at']}" in err or \
                f"it keeps what it loaded at {loaded['loaded_at']}" in err, err
            assert f"  agents.yaml{':' + str(said['line']) if said['line'] else ''}:" in err, err
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)


def test_a_gateway_started_without_agents_yaml_reads_as_loaded_until_one_appears(tmp_path: Path) -> None:
    """No agents.yaml at start, none now: the file reads as it was loaded (before: `unreadable`, as if one broke);
    one written since, broken, is named with its error."""
    from gateway.runtime import load_runtime
    from gateway.server.settings_route import settings_of

    (tmp_path / "specs").mkdir()
    runtime = load_runtime(tmp_path / "specs", tmp_path / "agents.yaml", use_cache=False)
    _, reads, errors, _ = settings_of(runtime, runtime.manifest, None)
    assert (reads, errors) == ("as loaded", [])
    (tmp_path / "agents.yaml").write_text("agents: [\n")
    _, reads, errors, _ = settings_of(runtime, runtime.manifest, None)
    assert reads == "broken" and [error.file for error in errors] == ["agents.yaml"]


def test_a_setting_read_at_start_only_shows_what_the_process_runs_on_and_what_the_file_gives_now(
        tmp_path: Path) -> None:
    """`gateway.store` is read at start only. Edited in agents.yaml (moved three lines down, another file named),
    `GET /settings` shows the store the process runs on with the line it came from, beside what the file gives now
    and at which line, and lists it as needing a restart: whether the edit was not reloaded yet (before: nothing said
    it) or reloaded (before: the start value beside the new file's line, `agents.yaml:5`, where it never was)."""
    from gateway.runtime import load_runtime
    from gateway.server.settings_route import settings_of

    (tmp_path / "specs").mkdir()
    agents = tmp_path / "agents.yaml"
    agents.write_text("gateway:\n  store: first.db\n  shared_state_timeout: 4\n")
    started = load_runtime(tmp_path / "specs", agents, use_cache=False)
    rows, reads, _, restart = settings_of(started, started.manifest, None)
    assert (reads, restart) == ("as loaded", [])
    assert {row.key: row for row in rows}["gateway.store"].source == "agents.yaml:2"

    agents.write_text("# the store moved\n\ngateway:\n  shared_state_timeout: 4\n  store: second.db\n")
    said = ("agents.yaml:2 (read at start only: agents.yaml now gives second.db (agents.yaml:5), which a restart "
            "applies)")
    reloaded = load_runtime(tmp_path / "specs", agents, use_cache=False)
    for running, file_reads in ((started, "changed"), (reloaded, "as loaded")):
        rows, reads, _, restart = settings_of(running, started.manifest, None)
        shown = {row.key: row for row in rows}
        assert (reads, restart) == (file_reads, ["gateway.store"])
        assert (shown["gateway.store"].value, shown["gateway.store"].source) == ("first.db", said)
        assert shown["gateway.shared_state_timeout"].source == f"agents.yaml:{3 if running is started else 4}"
