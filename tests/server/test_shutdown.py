"""Stopping `gateway serve` (SIGTERM, as a deploy or `docker stop` does) while a call is in flight: a real
process, a real slow upstream on 127.0.0.1, a direct call from another thread."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from recording_server import RecordingServer, Reply
from serve_process import start_serve, write_slow_project


def _serve(folder: Path, upstream: RecordingServer, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    write_slow_project(folder, upstream.url)
    return start_serve(folder, *extra)


def _call_in_flight(port: int, upstream: RecordingServer) -> tuple[threading.Thread, dict[str, object]]:
    """A direct call of `slow` from a thread, returned once the upstream has it (the call is in flight)."""
    answer: dict[str, object] = {}

    def call() -> None:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/agents/ops/tools/slow", data=b"{}",
                                         headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                answer["status"], answer["body"] = response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            answer["status"] = exc.code
        except OSError as exc:
            answer["status"] = type(exc).__name__

    thread = threading.Thread(target=call)
    thread.start()
    deadline = time.monotonic() + 30
    while not upstream.requests:
        assert time.monotonic() < deadline, "the call never reached the upstream"
        time.sleep(0.02)
    return thread, answer


def _stop_during_a_call(folder: Path, upstream: RecordingServer, *, delay: float, graceful: int,
                        meanwhile: Callable[[int], None] = lambda port: None) -> dict[str, object]:
    """SIGTERM to `gateway serve --graceful-timeout graceful` while a call of `delay` s is in flight (`meanwhile`:
    what to do with the port once the signal is sent); the call's answer, once the process has ended."""
    upstream.route("/slow", Reply(200, {"done": True}, delay=delay))
    process, port = _serve(folder, upstream, "--graceful-timeout", str(graceful))
    try:
        thread, answer = _call_in_flight(port, upstream)
        process.send_signal(signal.SIGTERM)
        meanwhile(port)
        assert process.wait(30) in (0, -signal.SIGTERM)  # uvicorn raises the signal again once it has stopped
        thread.join(30)
        return answer
    finally:
        process.kill()


def _refused(port: int) -> None:
    time.sleep(0.5)
    with pytest.raises(ConnectionRefusedError):  # the balancer's next try goes to another instance
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_a_call_in_flight_ends_within_the_graceful_timeout_and_new_connections_are_refused(
        tmp_path: Path, upstream: RecordingServer) -> None:
    answer = _stop_during_a_call(tmp_path, upstream, delay=2, graceful=20, meanwhile=_refused)
    assert answer["status"] == 200
    assert answer["body"]["body"] == {"done": True}  # type: ignore[index]


def test_a_call_longer_than_the_graceful_timeout_is_cut_when_it_ends(
        tmp_path: Path, upstream: RecordingServer) -> None:
    # The same call under the default (30 s) would have been answered 200 after its 6 s: here the operator
    # gave requests 1 s, so the process ends before the call and the caller is told it failed.
    answer = _stop_during_a_call(tmp_path, upstream, delay=6, graceful=1)
    assert answer["status"] != 200
    assert "timeout graceful shutdown exceeded" in (tmp_path / "serve.log").read_text()


@pytest.mark.parametrize(("value", "said"), [("-1", "must be 0 or more seconds, not -1"), ("1.5", "invalid int value")])
def test_a_graceful_timeout_that_is_no_duration_is_refused(tmp_path: Path, value: str, said: str) -> None:
    done = subprocess.run([sys.executable, "-m", "gateway", "serve", "--graceful-timeout", value], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert said in done.stderr
