"""Several real `gateway serve` processes over one project, sharing one PostgreSQL and one Redis."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from server_support import ROOT
from shared_servers import free_port


class GatewayProcess:
    """`python -m gateway serve` on a free loopback port; its stderr in a file beside the project."""

    def __init__(self, folder: Path, name: str, *, workers: int = 1) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / f"{name}.log"
        env = {**os.environ, "GATEWAY_CACHE_DIR": str(folder / "cache"), "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "gateway", "serve", "--port", str(self.port), "--specs",
                   str(folder / "specs"), "--agents", str(folder / "agents.yaml")]
        if workers > 1:
            command += ["--workers", str(workers)]
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def wait_ready(self, timeout: float = 90) -> GatewayProcess:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"gateway serve did not start (exit {self.process.poll()}):\n"
                                       f"{self.log.read_text(errors='replace')}") from None
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL, as a crash or an OOM kill would (the whole process group: workers too)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


@contextmanager
def instances(folder: Path, count: int = 2) -> Iterator[list[GatewayProcess]]:
    """`count` gateways started together (migrations race on purpose) and stopped at the end."""
    with ExitStack() as stack:
        started = [GatewayProcess(folder, f"gateway-{i}") for i in range(count)]
        for process in started:
            stack.callback(process.stop)
        yield [process.wait_ready() for process in started]
