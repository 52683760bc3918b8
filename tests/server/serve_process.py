"""A real `gateway serve` process for the tests that stop it (SIGTERM, as a deploy or `docker stop` does)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from recording_server import RecordingServer, Reply
from shared_servers import free_port

from gateway.safety.audit import CANCELLED, CANCELLED_UNSENT

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


HELD_BY_A_HOOK = """\
    hooks:
      - {on: before_tool_call, url: "UPSTREAM/hook", timeout: 30}
"""
"""A hook that answers late: the call waits in it, before its audit row and before anything is sent."""

CUTS = {
    # what the call waits on when the graceful timeout ends: the upstream (sent), or a hook before its audit row
    "sent": ("/slow", "", "was sent and may have run upstream", CANCELLED),
    "not sent": ("/hook", HELD_BY_A_HOOK, "The call was not sent: nothing ran upstream", CANCELLED_UNSENT),
}


@contextmanager
def stopped_while_held(folder: Path, upstream: RecordingServer, llm_url: str, sent: str,
                       settings: str = "", *, workers: int = 1) -> Iterator[int]:
    """`gateway serve --graceful-timeout 1` whose `ops` agent (with `settings` too) runs on the scripted LLM at
    `llm_url`;
    SIGTERM once a call reached the place `sent` names (held there 8 s); the block's caller makes that call, and the
    process has ended when the block does. With `workers` > 1 the supervisor is SIGKILLed instead (as `kill -9` or
    the OOM killer ends it: its workers are not told), and the block ends once every process it started has ended
    and the port is free again (a bounded wait: a hang guard, not a timing threshold)."""
    held_at, hooks, _, _ = CUTS[sent]
    upstream.route(held_at, Reply(200, {"done": True}, delay=8))
    agents = SLOW_AGENTS.replace("http://127.0.0.1:9/v1", f"{llm_url}/v1") + settings \
        + hooks.replace("UPSTREAM", upstream.url)
    write_slow_project(folder, upstream.url, agents)
    process, port = start_serve(folder, "--graceful-timeout", "1", *(["--workers", str(workers)] * (workers > 1)))
    started: list[int] = []

    def stop_once_held() -> None:
        deadline = time.monotonic() + 60  # a hang guard only
        while not any(request.path == held_at for request in upstream.requests) and time.monotonic() < deadline:
            time.sleep(0.02)
        if workers > 1:
            started.extend(descendants(process.pid))
            process.send_signal(signal.SIGKILL)
        else:
            process.send_signal(signal.SIGTERM)

    stopper = threading.Thread(target=stop_once_held)
    stopper.start()
    try:
        yield port
        stopper.join(60)
        assert process.wait(30) in (0, -signal.SIGTERM, -signal.SIGKILL)
        if workers > 1:
            # A worker (the one holding the call, at least) among them; on a loaded machine uvicorn may be replacing
            # another one that missed its health check (forked, not yet running Python: no command line yet).
            assert any("spawn_main" in _command(pid) for pid in started), [_command(pid) for pid in started]
            deadline = time.monotonic() + 60  # a hang guard only
            while (left := [pid for pid in started if alive(pid)]) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert left == [], "orphaned: " + ", ".join(_command(pid) for pid in left)
            with socket.socket() as probe:  # free: a restarted gateway can bind it
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind(("127.0.0.1", port))
    finally:
        process.kill()
        for pid in started:  # a worker left behind (the test failed): not left to the next test
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def folder_of_a_killed_supervisor(parent: Path) -> Path:
    """The metrics folder a `gateway serve --workers` supervisor made in `parent` before it was SIGKILLed (a real
    process holding its lock, killed), with a worker's counts in it."""
    making = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from gateway.server.metrics_folder import MetricsFolder; "
                               "print(MetricsFolder(sys.argv[1]).path, flush=True); time.sleep(120)", str(parent)],
        stdout=subprocess.PIPE, text=True)
    assert making.stdout is not None
    folder = Path(making.stdout.readline().strip())
    (folder / f"counter_{making.pid}.db").write_bytes(b"\0" * 8)
    making.kill()
    making.wait(30)
    assert folder.is_dir()
    return folder


def descendants(pid: int) -> list[int]:
    """Every process `pid` started, and theirs (Linux's /proc: `children` of each of its threads)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += [int(child), *descendants(int(child))]
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"  # a zombie has ended; only its parent has not asked how


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except (FileNotFoundError, ProcessLookupError):
        return f"{pid} (ended)"


def audit_rows(folder: Path, kind: str = "tool") -> list[tuple[str, str]]:
    """(status, error) of the stopped gateway's rows of `kind`, read by `gateway audit` (the operator's export)."""
    done = subprocess.run([sys.executable, "-m", "gateway", "audit", "--json"], cwd=folder, capture_output=True,
                          text=True, timeout=60, check=True)
    return [(row["status"], row["error"]) for line in done.stdout.splitlines()
            if (row := json.loads(line))["kind"] == kind]
