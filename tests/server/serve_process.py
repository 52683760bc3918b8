"""A real `gateway serve` process for the tests that stop it (SIGTERM, as a deploy or `docker stop` does)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from shared_servers import free_port


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
