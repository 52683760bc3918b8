"""The MCP Inspector commands of docs/mcp.md, run as written with Inspector 0.15 (what `npx` installs under Node 20).

`.ci/run` installs it into `.tools/inspector` (git-ignored); without it the test is skipped and says how to install
it. Each `npx @modelcontextprotocol/inspector --cli ...` line of docs/mcp.md runs with the installed Inspector in
place of `npx` and the test gateway's address in place of 127.0.0.1:8080, in a project folder, and lists the
agent's tools.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from recording_server import RecordingServer
from server_support import ROOT, LenientLLM, gateway

INSPECTOR = Path(os.environ.get("GATEWAY_TEST_INSPECTOR",
                                ROOT / ".tools" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"))
NPX = "npx @modelcontextprotocol/inspector"


def documented_commands() -> list[str]:
    """The Inspector CLI commands of docs/mcp.md (comments cut)."""
    lines = (ROOT / "docs" / "mcp.md").read_text().splitlines()
    return [line.split("  #", 1)[0].strip() for line in lines if line.startswith(f"{NPX} --cli")]


def test_the_docs_show_a_keyed_way_that_inspector_015_has() -> None:
    """0.15's CLI has no `--header`: a command that needs it must not be the docs' way to use a key."""
    commands = documented_commands()
    assert len(commands) >= 2
    assert not [command for command in commands if "--header" in command]


@pytest.mark.slow
@pytest.mark.parametrize("command", documented_commands())
def test_a_documented_inspector_command_lists_the_agents_tools(tmp_path: Path, llm: LenientLLM,
                                                           upstream: RecordingServer, command: str) -> None:
    if not INSPECTOR.is_file():
        pytest.skip(f"MCP Inspector is absent at {INSPECTOR} (.ci/run installs it: npm install --prefix "
                    ".tools/inspector @modelcontextprotocol/inspector@0.15.0)")
    project = tmp_path / "project"
    with gateway(project, llm.url, upstream.url) as (url, _):
        argv = [str(INSPECTOR), *shlex.split(command.removeprefix(NPX).replace("http://127.0.0.1:8080", url))]
        environment = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        done = subprocess.run(argv, cwd=project, env=environment, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    listed = json.loads(done.stdout)
    assert [tool["name"] for tool in listed["tools"]] == ["getForecast"]
