"""`gateway serve` as a user starts it: a real process on the example project, seen from a raw socket."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from serve_process import alive, descendants
from server_support import ROOT

from gateway.server.listening import CANNOT_LISTEN_EXIT
from gateway.server.run import KEEP_ALIVE_SECONDS


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def served(tmp_path: Path) -> Iterator[int]:
    port = _free_port()
    env = {**os.environ, "GATEWAY_CACHE_DIR": str(tmp_path / "cache")}
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--port", str(port), "--specs", str(ROOT / "specs"),
         "--agents", str(ROOT / "agents.yaml")], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"gateway serve did not start (exit {process.poll()})") from None
                time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(30)


def _get(conn: socket.socket) -> bytes:
    conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    return data


def test_an_idle_connection_outlives_the_clients_own_expiry(served: int) -> None:
    # httpx keeps an idle connection 5 s, as uvicorn did: a client reusing it just as the server dropped it
    # got a ReadError (seen under the benchmark's 32 callers). The server now waits longer than clients do.
    assert KEEP_ALIVE_SECONDS > 60
    with socket.create_connection(("127.0.0.1", served), timeout=10) as conn:
        assert _get(conn).startswith(b"HTTP/1.1 200")
        time.sleep(5.5)
        assert _get(conn).startswith(b"HTTP/1.1 200")  # the same connection, still open


def test_a_serving_process_freezes_what_it_loaded_and_collects_young_objects_rarely() -> None:
    # In a process of its own: the test process keeps its own GC settings.
    code = ("import gc; from gateway.server.run import YOUNG_GC_THRESHOLD, tune_gc; default = gc.get_threshold(); "
            "tune_gc(); print(gc.get_threshold() == (YOUNG_GC_THRESHOLD, *default[1:]), gc.get_freeze_count() > 1000)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.split() == ["True", "True"]


def test_serve_logs_json_lines_with_their_utc_time(tmp_path: Path) -> None:
    import json
    import re

    from serve_process import start_serve, write_slow_project

    write_slow_project(tmp_path, "http://127.0.0.1:9")
    process, _ = start_serve(tmp_path, "--log-format", "json")
    process.terminate()
    process.wait(30)
    entries = [json.loads(line) for line in (tmp_path / "serve.log").read_text().splitlines()]  # every line
    assert any(entry["message"] == "Application startup complete." for entry in entries), entries  # uvicorn's
    assert any(entry["message"].startswith("1 tools, 1 agents (ops) on http://") for entry in entries), entries
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entry["time"]) for entry in entries), entries


def test_serve_refuses_an_unknown_log_format_from_the_environment(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "gateway", "serve", "--specs", str(ROOT / "specs"),
                           "--agents", str(ROOT / "agents.yaml")], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "GATEWAY_LOG_FORMAT": "xml"}, timeout=60)
    assert done.returncode == 2
    assert "GATEWAY_LOG_FORMAT) must be text or json, not 'xml'" in done.stderr


def _serve_command(port: int) -> list[str]:
    return [sys.executable, "-m", "gateway", "serve", "--port", str(port), "--specs", str(ROOT / "specs"),
            "--agents", str(ROOT / "agents.yaml")]


def test_serve_says_in_one_line_that_its_port_is_taken(tmp_path: Path) -> None:
    """Another program listens on the port: one line naming the address and what to do, and an exit status of
    its own (was: "on http://..." as if serving, then uvicorn's `[Errno 98]` log line and exit status 3)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = subprocess.run(_serve_command(port), cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "GATEWAY_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == CANNOT_LISTEN_EXIT == 4, done.stderr
    assert done.stderr.splitlines() == [
        f"gateway: cannot listen on 127.0.0.1:{port}: another program is listening there (another `gateway serve`?); "
        "stop it, or choose another port with --port (0 takes a free one)"], done.stderr


def test_serve_says_where_it_listens_once_the_port_is_bound(tmp_path: Path) -> None:
    """`--port 0`: the line names the port the system gave, so it was printed after binding, and it answers there."""
    process = subprocess.Popen(_serve_command(0), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "GATEWAY_CACHE_DIR": str(tmp_path / "cache")})
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.search(r" on http://127\.0\.0\.1:(\d+) \(console: http://127\.0\.0\.1:(\d+)/console\)", line)
        assert found is not None and found.group(1) == found.group(2) != "0", line
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", int(found.group(1))), timeout=10) as conn:
                    assert _get(conn).startswith(b"HTTP/1.1 200")
                break
            except ConnectionRefusedError:  # bound, the app still starting: uvicorn listens once it has started
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.05)
    finally:
        process.terminate()
        process.wait(30)


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="this machine has no IPv6 loopback (::1) to connect over")
def test_serve_on_localhost_answers_over_ipv4_and_ipv6_loopback(tmp_path: Path) -> None:
    """`--host localhost` listened on 127.0.0.1 only: a client that resolves localhost to ::1 first (Node.js 17+,
    curl, browsers) was refused. It listens on each loopback address the name stands for, on one port, and says so."""
    import httpx

    command = [*_serve_command(0), "--host", "localhost"]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "GATEWAY_CACHE_DIR": str(tmp_path / "cache")})
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.search(r" on http://localhost:(\d+)", line)
        assert found is not None, line
        port = int(found.group(1))
        for address in ("[::1]", "127.0.0.1"):
            deadline = time.monotonic() + 60
            while True:
                try:
                    answer = httpx.get(f"http://{address}:{port}/healthz", headers={"host": f"localhost:{port}"},
                                       timeout=10)
                    break
                except httpx.ConnectError:  # bound, the app still starting: uvicorn listens once it has started
                    assert time.monotonic() < deadline and process.poll() is None, address
                    time.sleep(0.05)
            assert answer.status_code == 200, (address, answer.text)
        assert f"on http://localhost:{port} (127.0.0.1 and [::1]) (console: " in line, line  # each address said
    finally:
        process.terminate()
        process.wait(30)


def test_localhost_is_every_loopback_address_on_one_port() -> None:
    from gateway.server.listening import listen_addresses, open_listeners

    assert listen_addresses("127.0.0.1") == ["127.0.0.1"] and listen_addresses("[::1]") == ["::1"]
    assert {"127.0.0.1", "::1"} <= set(listen_addresses("localhost"))
    listeners = open_listeners("localhost", 0)
    try:
        ports = {sock.getsockname()[1] for sock in listeners}
        assert len(ports) == 1 and 0 not in ports
        assert {sock.getsockname()[0] for sock in listeners} >= ({"127.0.0.1", "::1"} if _has_ipv6_loopback()
                                                                 else {"127.0.0.1"})
    finally:
        for sock in listeners:
            sock.close()


def _listening(pid: int) -> set[tuple[str, int]]:
    """The (address, port) pairs `pid` listens on: its socket descriptors matched with the kernel's TCP tables."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            address, port = fields[1].split(":")
            raw = bytes.fromhex(address)  # 32-bit words in the host's order (little-endian here)
            packed = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            found.add((socket.inet_ntop(family, packed), int(port, 16)))
    return found


def _port_free(address: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as a restarted gateway binds it
        try:
            probe.bind((address, port))
            probe.listen()
        except OSError:
            return False
    return True


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="this machine has no IPv6 loopback (::1) to connect over")
def test_serve_on_localhost_with_workers_answers_on_both_addresses_and_stops_every_worker(tmp_path: Path) -> None:
    """`--host localhost --workers 2`: each worker listens on 127.0.0.1 and ::1 on the one port (the parent bound
    both sockets; its workers inherit them), both answer, and SIGTERM ends every process the gateway started (no
    worker left holding the port: it is free again on both addresses)."""
    import signal

    import httpx

    log = tmp_path / "serve.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen([*_serve_command(0), "--host", "localhost", "--workers", "2"], cwd=tmp_path,
                                   stdout=subprocess.DEVNULL, stderr=stderr,
                                   env={**os.environ, "GATEWAY_CACHE_DIR": str(tmp_path / "cache")})
    try:
        deadline = time.monotonic() + 60  # a hang guard only
        while (found := re.search(r" on http://localhost:(\d+) \(127\.0\.0\.1 and \[::1\]\) \(console: "
                                  r".*\(2 workers\)", log.read_text())) is None:
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        port = int(found.group(1))
        for address in ("[::1]", "127.0.0.1"):
            while True:
                try:
                    answer = httpx.get(f"http://{address}:{port}/healthz", headers={"host": f"localhost:{port}"},
                                       timeout=10)
                    break
                except httpx.ConnectError:  # bound, the workers still starting: they listen once started
                    assert time.monotonic() < deadline and process.poll() is None, (address, log.read_text())
                    time.sleep(0.05)
            assert answer.status_code == 200, (address, answer.text)
        started = descendants(process.pid)
        workers = [pid for pid in started if "spawn_main" in Path(f"/proc/{pid}/cmdline").read_text()]
        assert len(workers) == 2, [Path(f"/proc/{pid}/cmdline").read_text() for pid in started]
        for worker in workers:
            assert {("127.0.0.1", port), ("::1", port)} <= _listening(worker), worker
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0, log.read_text()
    finally:
        process.kill()
        process.wait(30)
    deadline = time.monotonic() + 30  # multiprocessing's resource tracker ends as the parent's end closes its pipe
    while (left := [pid for pid in started if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == [], "orphaned: " + ", ".join(Path(f"/proc/{pid}/cmdline").read_text() for pid in left)
    assert _port_free("127.0.0.1", port) and _port_free("::1", port)


def test_workers_whose_supervisor_is_stopped_keep_serving_and_say_so_once(tmp_path: Path) -> None:
    """`gateway serve --workers 2` whose supervisor is stopped (`kill -STOP`, a debugger): the workers keep serving
    and /readyz stays ready (the store answers; taking every worker out for it would make a paused supervisor an
    outage), and each worker says once that its supervisor is stopped (a worker that dies is not replaced meanwhile,
    a SIGTERM to it waits) and once that it is resumed. Before: nothing said it; SIGTERM seemed ignored."""
    import signal

    import httpx
    from serve_process import start_serve, write_slow_project

    write_slow_project(tmp_path, "http://127.0.0.1:9")
    process, port = start_serve(tmp_path, "--workers", "2")
    log = tmp_path / "serve.log"

    def said(words: str, times: int) -> None:
        deadline = time.monotonic() + 60  # a hang guard only
        while log.read_text().count(words) < times:
            assert time.monotonic() < deadline and process.poll() is None, log.read_text()
            time.sleep(0.1)

    try:
        said("Application startup complete", 2)  # both workers run (and watch their supervisor)
        process.send_signal(signal.SIGSTOP)
        said("is stopped (SIGSTOP or a debugger)", 2)
        for _ in range(4):
            answer = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=30)
            assert answer.status_code == 200 and answer.json()["status"] == "ready", answer.text
        process.send_signal(signal.SIGCONT)
        said(") is resumed", 2)
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0, log.read_text()
    finally:
        process.send_signal(signal.SIGCONT)
        process.kill()
        process.wait(30)
    text = log.read_text()
    assert text.count("is stopped (SIGSTOP or a debugger)") == 2 and text.count(") is resumed") == 2, text
