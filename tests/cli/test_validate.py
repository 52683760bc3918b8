"""`gateway validate` and the commands that serve read agents.yaml the same way: the same lines, never a traceback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli.commands import main

ROOT = Path(__file__).resolve().parents[2]
BAD_GATEWAY = """\
agents:
  weather: {model: openai/gpt-4o-mini, tools: [open-meteo]}
providers:
  openai: {kind: openai, api_key: k}
gateway:
  allowed_hosts: 5
  unknown_key_xyz: 1
"""
LINES = ["agents.yaml:6: gateway.allowed_hosts: expected a list, got a number (5)",
         "agents.yaml:7: gateway.unknown_key_xyz: unknown key 'unknown_key_xyz'"]


@pytest.fixture
def project(tmp_path: Path) -> list[str]:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "open-meteo.yaml").write_text((ROOT / "specs" / "open-meteo.yaml").read_text())
    (tmp_path / "agents.yaml").write_text(BAD_GATEWAY)
    return ["--specs", str(specs), "--agents", str(tmp_path / "agents.yaml")]


def test_validate_names_a_wrong_type_and_an_unknown_key_under_gateway_with_their_lines(
        project: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", *project, "--no-cache"]) == 1
    out = capsys.readouterr().out
    assert "agents.yaml: UNUSABLE, 2 diagnostic(s)" in out
    for line in LINES:
        assert f"  error: {line}" in out
    assert main(["validate", *project, "--no-cache", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)["manifest"]
    assert [(d["line"], d["pointer"]) for d in report["diagnostics"]] == [
        (6, "gateway.allowed_hosts"), (7, "gateway.unknown_key_xyz")]


def test_a_named_manifest_that_does_not_exist_fails_validate(
        project: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A CI job validating the manifest it deploys must not pass on a mistyped path (it said "not found (no
    agents)" and exit 0); the default ./agents.yaml may still be absent, the specs checked alone."""
    specs = project[:2]
    assert main(["validate", *specs, "--agents", str(tmp_path / "agnets.yaml"), "--no-cache"]) == 1
    assert "agnets.yaml: UNUSABLE, not found" in capsys.readouterr().out
    monkeypatch.setenv("GATEWAY_AGENTS", str(tmp_path / "nope.yaml"))
    assert main(["validate", *specs, "--no-cache", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["manifest"]["usable"] is False
    monkeypatch.delenv("GATEWAY_AGENTS")
    monkeypatch.chdir(tmp_path / "specs")  # no agents.yaml here
    assert main(["validate", *specs, "--no-cache"]) == 0
    assert "agents.yaml: not found (no agents)" in capsys.readouterr().out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("command", [["serve", "--port", "PORT"], ["mcp", "weather"], ["chat", "weather", "hi"],
                                     ["call", "weather", "getForecast"], ["tools", "--agent", "weather"]])
def test_every_command_refuses_the_same_file_with_the_same_lines_and_no_traceback(
        project: list[str], tmp_path: Path, command: list[str]) -> None:
    argv = [str(_free_port()) if part == "PORT" else part for part in command]
    done = subprocess.run([sys.executable, "-m", "gateway", argv[0], *project, *argv[1:]], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=tmp_path,
                          env={**os.environ, "GATEWAY_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout
    for line in LINES:
        assert line in done.stderr
