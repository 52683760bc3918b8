"""A real `gateway serve` process for the tests that stop it (SIGTERM, as a deploy or `docker stop` does)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from shared_servers import free_port

SLOW_SPEC = """\
openapi: 3.0.3
info: {title: Slow, version: "1"}
servers: [{url: "%s"}]
paths:
  /slow:
    get:
      operationId: slow
      responses: {"200": {description: ok, content: {application/json: {schema: {type: object}}}}}
"""
SLOW_AGENTS = """\
providers:
  llm: {kind: openai, base_url: "http://127.0.0.1:9/v1"}
agents:
  ops:
    model: llm/unused
    tools: [{api: slow}]
"""
"""One agent, `ops`, whose one tool `slow` is a GET of the upstream's /slow (route it to answer late)."""


def write_slow_project(folder: Path, upstream_url: str, agents: str = SLOW_AGENTS) -> None:
    (folder / "specs").mkdir()
    (folder / "specs" / "slow.yaml").write_text(SLOW_SPEC % upstream_url)
    (folder / "agents.yaml").write_text(agents)


def start_serve(folder: Path, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    """`gateway serve` in `folder` (its specs/ and agents.yaml written already) on a free port, once it accepts;
    its log in `folder`/serve.log."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--port", str(port), "--no-access-log", *extra], cwd=folder,
        env={**os.environ, "GATEWAY_CACHE_DIR": str(folder / "cache")}, stdout=subprocess.DEVNULL,
        stderr=open(folder / "serve.log", "wb"))  # noqa: SIM115 - the process holds it
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, port
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"gateway serve did not start: {(folder / 'serve.log').read_text()}") from None
            time.sleep(0.05)
