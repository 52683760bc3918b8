"""Real PostgreSQL and Redis servers for the tests, each on a free loopback port in a temporary folder.

The binaries come from Debian's packages (`apt-get install -y postgresql redis-server`); without them
the fixtures skip with the reason. PostgreSQL refuses to run as root, so as root its commands run as the
`postgres` user (`runuser`). One server of each per test session; each test gets a database of its own
(`postgres_url`) or a flushed Redis (`redis_url`).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class PostgresServer:
    """`postgres` on 127.0.0.1:<free port>, trust auth for the user `gateway`, data in a temporary folder."""

    def __init__(self) -> None:
        bindir = _postgres_bin()
        if bindir is None:
            pytest.skip("PostgreSQL is not installed (apt-get install -y postgresql)")
        self.bindir = bindir
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="gateway-pg-"))
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            if shutil.which("runuser") is None:
                pytest.skip("PostgreSQL cannot run as root and runuser is missing")
            try:
                import pwd

                user = pwd.getpwnam("postgres")
            except KeyError:
                pytest.skip("PostgreSQL cannot run as root and there is no postgres user")
            os.chown(self.folder, user.pw_uid, user.pw_gid)
            self._as_user = ["runuser", "-u", "postgres", "--"]
        self.process: subprocess.Popen[bytes] | None = None
        self.durable = False

    def start(self, *, durable: bool = False) -> PostgresServer:
        """initdb and start; `durable`: with fsync (benchmarks), else without (tests: nothing outlives them)."""
        data = self.folder / "data"
        subprocess.run([*self._as_user, str(self.bindir / "initdb"), "-D", str(data), "-U", "gateway",
                        "-A", "trust", "-E", "UTF8", "--no-sync"], check=True, capture_output=True)
        self.durable = durable
        for attempt in range(3):
            try:
                self._launch()
                return self
            except RuntimeError as exc:
                # Another process took the free port between `free_port` and the server's bind (a shared
                # machine): try another one.
                if "Address already in use" not in str(exc) or attempt == 2:
                    raise
                self.port = free_port()
        return self

    def _launch(self) -> None:
        data = self.folder / "data"
        durable = self.durable
        self.process = subprocess.Popen(
            [*self._as_user, str(self.bindir / "postgres"), "-D", str(data), "-p", str(self.port),
             "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.folder}",
             "-c", f"fsync={'on' if durable else 'off'}", "-c", "max_connections=300", "-c", "shared_buffers=32MB"],
            stdout=subprocess.DEVNULL, stderr=open(self.folder / "postgres.log", "ab"))  # noqa: SIM115
        self._wait_ready()

    def pids(self) -> list[int]:
        """Every process of the server (runuser, the postmaster and its backends), read from /proc."""
        if self.process is None or self.process.poll() is not None:
            return []
        return _descendants(self.process.pid)

    def pause(self) -> None:
        """SIGSTOP every process of the server: connections stay open and nothing answers (a hung database)."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def halt(self) -> None:
        """Stop the server (fast shutdown: every connection is closed), keeping its data for `restart`."""
        if self.process is not None and self.process.poll() is None:
            postmaster = [pid for pid in self.pids() if pid != self.process.pid][:1]
            for pid in postmaster or [self.process.pid]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGINT)  # the postmaster's fast shutdown
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def restart(self) -> None:
        """Start the server again on its data and port after `halt`."""
        self._launch()

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://gateway@127.0.0.1:{self.port}/{database}"

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + 30
        while True:
            try:
                with psycopg.connect(self.url(), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if self.process is not None and self.process.poll() is not None or time.monotonic() > deadline:
                    log = (self.folder / "postgres.log").read_text(errors="replace")
                    raise RuntimeError(f"PostgreSQL did not start:\n{log}") from None
                time.sleep(0.1)

    def create_database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            # FILE_COPY (PostgreSQL 15+) copies the small template's files: several times faster than WAL_LOG.
            strategy = " STRATEGY FILE_COPY" if conn.info.server_version >= 150000 else ""
            conn.execute(f"CREATE DATABASE {name}{strategy}".encode())
        return self.url(name)

    def stop(self) -> None:
        """A fast shutdown (SIGINT to the postmaster: clients are disconnected, as when a server goes away).

        The signal goes to the postmaster itself, whose pid is the first line of postmaster.pid: `runuser`
        passes a signal on but then waits two seconds before it exits, on every stop."""
        if self.process is not None and self.process.poll() is None:
            try:
                os.kill(int((self.folder / "data" / "postmaster.pid").read_text().split()[0]), signal.SIGINT)
            except (OSError, ValueError, IndexError):
                self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


class RedisServer:
    """`redis-server` on 127.0.0.1:<free port>, nothing saved to disk."""

    def __init__(self, *options: str) -> None:
        """`options`: more of redis-server's command-line options ("--enable-debug-command", "local")."""
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("Redis is not installed (apt-get install -y redis-server)")
        self.binary = binary
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="gateway-redis-"))
        self.process: subprocess.Popen[bytes] | None = None
        self.options = options

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.folder), *self.options], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import redis

        deadline = time.monotonic() + 15
        while True:
            try:
                with redis.Redis(port=self.port, socket_connect_timeout=1) as client:
                    client.ping()
                    return self
            except redis.ConnectionError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)

    def flush(self) -> None:
        import redis

        with redis.Redis(port=self.port) as client:
            client.flushall()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.resume()  # a paused server does not hear SIGTERM
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def pause(self) -> None:
        """SIGSTOP the server: connections stay open (new ones too: the kernel accepts them) and nothing answers."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)

    def halt(self) -> None:
        """Stop the server (its clients' connections are closed), keeping its folder: `start` brings it back on
        the same port."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _descendants(root: int) -> list[int]:
    """`root` and every process below it (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = PostgresServer()
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A fresh database on the session's PostgreSQL."""
    return postgres_server.create_database()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The session's Redis, emptied."""
    redis_server.flush()
    return redis_server.url
