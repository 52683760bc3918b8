"""Codex CLI (`codex exec`, npm `@openai/codex`) with a gateway agent as its model, over the Responses API.

Codex sends what it sends to OpenAI (`include`, `prompt_cache_key`, `client_metadata`, `reasoning.summary`, a
`namespace` tool, a built-in `web_search` tool, `store: false`, a stream); the agent's LLM is the scripted one,
and its tool runs against a real upstream on loopback. `.ci/run` installs Codex into `.tools/codex` (git-ignored);
without it the test is skipped and says how to install it. Codex is told to reach no other host (no update check,
analytics, plugins or apps), and an HTTP proxy on loopback that records every connection proves it tried none.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from recording_server import RecordingServer
from safety.safety_support import CLIENTS_YAML, WEATHER_KEY, safe_gateway
from scripted_llm import Call, Reply
from server_support import AGENTS_YAML, ROOT, LenientLLM

CODEX = Path(os.environ.get("GATEWAY_TEST_CODEX", ROOT / ".tools" / "codex" / "node_modules" / ".bin" / "codex"))
FORECAST_CALL = Call("getForecast", {"latitude": 52.52, "longitude": 13.41, "current": ["temperature_2m"]})

CONFIG = """\
model = "weather"
model_provider = "gateway"
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
plugins = false
apps = false

[model_providers.gateway]
name = "gateway"
base_url = "{url}/v1"
env_key = "GATEWAY_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
"""


class _Tripwire:
    """A TCP listener on loopback that counts the connections made to it (the proxy for any other host)."""

    def __init__(self) -> None:
        self.connections = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._sock.close()


@pytest.fixture
def tripwire() -> Iterator[_Tripwire]:
    wire = _Tripwire()
    yield wire
    wire.close()


def _codex_exec(home: Path, workdir: Path, prompt: str, proxy: str) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("OPENAI_", "CODEX_"))}
    environment.update({
        "CODEX_HOME": str(home), "GATEWAY_KEY": WEATHER_KEY, "HOME": str(home),
        # Any host but loopback would be reached through the tripwire (none is reachable here anyway).
        "HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "ALL_PROXY": proxy, "http_proxy": proxy, "https_proxy": proxy,
        "all_proxy": proxy, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
    })
    return subprocess.run([str(CODEX), "exec", "--skip-git-repo-check", "--ephemeral", "--sandbox", "read-only",
                           "--color", "never", prompt], cwd=workdir, env=environment, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)


def _run_codex(folder: Path, llm: LenientLLM, upstream: RecordingServer, tripwire: _Tripwire,
               prompt: str) -> subprocess.CompletedProcess[str]:
    if not (CODEX.is_file() or shutil.which(str(CODEX))):
        pytest.skip(f"Codex CLI is absent at {CODEX} (.ci/run installs it: npm install --prefix .tools/codex "
                    "@openai/codex)")
    with safe_gateway(folder / "gateway", llm.url, upstream.url, agents_yaml=AGENTS_YAML + CLIENTS_YAML) as (url, _):
        home, workdir = folder / "codex-home", folder / "work"
        home.mkdir()
        workdir.mkdir()
        (home / "config.toml").write_text(CONFIG.format(url=url))
        return _codex_exec(home, workdir, prompt, tripwire.url)


@pytest.mark.slow
def test_codex_exec_runs_an_agent_tool_through_the_gateway(tmp_path: Path, llm: LenientLLM,
                                                          upstream: RecordingServer, tripwire: _Tripwire) -> None:
    llm.script(Reply(calls=[FORECAST_CALL]), Reply(text="It is 3.5 °C in Berlin right now."))
    done = _run_codex(tmp_path, llm, upstream, tripwire, "What is the weather in Berlin?")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "It is 3.5 °C in Berlin right now." in done.stdout
    assert upstream.last.path == "/meteo/v1/forecast"  # the agent's tool ran, in the gateway
    first = llm.bodies()[0]
    assert first["model"] == "gpt-test"
    offered = [tool["function"]["name"] for tool in first["tools"]]
    assert offered[0] == "getForecast" and "exec_command" in offered  # the agent's tool, then Codex's own
    assert "prompt_cache_key" in first  # passed on to the agent's (openai) provider
    assert tripwire.connections == 0  # Codex tried no other host


@pytest.mark.slow
def test_codex_runs_its_own_tool_the_gateway_hands_back_and_the_run_goes_on(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, tripwire: _Tripwire) -> None:
    """The model calls one of Codex's tools: the gateway hands it back, Codex runs it and sends its output (with
    the whole history: `store: false`), and the agent's run goes on to the answer."""
    llm.script(Reply(calls=[Call("exec_command", {"cmd": "echo gateway-was-here"}, id="call_exec")]),
               Reply(text="The command printed its line."))
    done = _run_codex(tmp_path, llm, upstream, tripwire, "Run echo for me.")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "The command printed its line." in done.stdout
    second = llm.bodies()[1]["messages"]
    [answered] = [m for m in second if m["role"] == "tool"]
    assert answered["tool_call_id"] == "call_exec" and answered["content"]  # Codex's output of its own tool
    assert tripwire.connections == 0
