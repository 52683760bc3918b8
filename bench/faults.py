"""Faults under load: two `gateway serve` instances on one PostgreSQL and one Redis take writes while one part fails.

    python -m bench.faults [--seconds 4] [--fault-seconds 8] [--callers 16] [--phases ...] [--gateway-root PATH]

Each phase sends POST /agents/writer/tools/write with a unique `n` from `--callers` concurrent callers, spread over
both instances: `--seconds` before the fault, `--fault-seconds` of it, `--seconds` after. One fault a phase:

- `pg-pause`: every PostgreSQL process is stopped (SIGSTOP) and continued (a hung database);
- `pg-restart`: PostgreSQL is shut down (fast) and started again on its data (every connection is cut);
- `pg-disk-full`: the database's tablespace (a 64 MiB tmpfs) is filled, then freed;
- `redis-stop`: Redis is stopped and started again on its port;
- `sqlite-disk-full`: two other instances on one SQLite file (on a 16 MiB tmpfs, no Redis) take the writes; the
  disk is filled, then freed.

The disk phases mount a tmpfs, so they need root (they are left out, saying so, without it). The upstream (a
counting ASGI app in its own process) keeps every `n` it received; the audit rows are read from the store
afterwards. Printed per phase: answers by status, and the counts that matter:

- `ran`: writes the upstream received;
- `unaudited`: writes the upstream received that have no audit row (must be 0: nothing runs unrecorded);
- `503 but ran`: answered 503 although the upstream received them (and their share of the 503s, the figure of
  issue #27); `503 ran untold`: of those, the answers that did not say the call may have run;
- `failed 1 s after`: answers other than 2xx more than a second after the fault ended (stale connections);
- `lost`: acknowledged (2xx) but never received upstream; `twice`: received more than once.

`--gateway-root` runs the gateway of another checkout (e.g. an export of main) to compare before and after.
PostgreSQL runs without fsync (a test server): the faults are about connections, not the disk. On a 2-core machine
the instances, PostgreSQL, Redis, the upstream and the callers share the cores: the counts depend on the load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import json
import os
import pwd
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from bench.support import ROOT, free_port, python_module, spawned

sys.path.insert(0, str(ROOT / "tests"))

from shared_servers import PostgresServer, RedisServer  # noqa: E402

SPEC = {
    "openapi": "3.0.3",
    "info": {"title": "counter", "version": "1"},
    "servers": [{"url": "http://127.0.0.1:9"}],
    "paths": {"/write": {"post": {
        "operationId": "write",
        "requestBody": {"required": True, "content": {"application/json": {"schema": {
            "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}},
        "responses": {"201": {"description": "created"}},
    }}},
}
AGENTS = """\
providers:
  openai: {{kind: openai, base_url: "http://127.0.0.1:9/v1", api_key: unused}}
apis:
  counter: {{base_url: "{upstream}", timeout: 10}}
agents:
  writer:
    model: openai/none
    tools: [{{api: counter}}]
gateway:
  store: {store}
{redis}"""
PG_PHASES = ("pg-pause", "pg-restart", "pg-disk-full", "redis-stop")
SQLITE_PHASES = ("sqlite-disk-full",)
PHASES = PG_PHASES + SQLITE_PHASES


def upstream_main(port: int) -> None:
    """The counting upstream: POST /write records the body's `n`; GET /received answers every `n` so far."""
    import uvicorn

    received: list[int] = []

    async def app(scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["method"] == "POST":
            received.append(int(json.loads(body)["n"]))
            status, answer = 201, b'{"ok": true}'
        else:
            status, answer = 200, json.dumps(received).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": answer})

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error", access_log=False, lifespan="off")


class Disk:
    """A tmpfs of `size` at `folder` that can be filled (every free byte taken) and freed again."""

    def __init__(self, folder: Path, size: str) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=True,
                       capture_output=True)
        self.filler = folder / "filler"

    def fill(self) -> None:
        with self.filler.open("wb", buffering=0) as out:
            try:
                while True:
                    out.write(b"\0" * 65536)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
            with contextlib.suppress(OSError):
                while True:  # the last bytes, smaller than a block
                    out.write(b"\0" * 512)

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.folder)], check=False)


class Load:
    """Callers sending writes with unique numbers until stopped; what each answer was."""

    def __init__(self, urls: list[str], start: int, callers: int) -> None:
        self.urls = urls
        self.next = start
        self.callers = callers
        self.answers: dict[int, str] = {}
        self.finished: dict[int, float] = {}
        self.running = True

    async def run(self) -> None:
        limits = httpx.Limits(max_connections=self.callers * 2)
        async with httpx.AsyncClient(timeout=15, trust_env=False, limits=limits) as client:
            await asyncio.gather(*(self._caller(client) for _ in range(self.callers)))

    async def _caller(self, client: httpx.AsyncClient) -> None:
        while self.running:
            n = self.next
            self.next += 1
            url = f"{self.urls[n % len(self.urls)]}/agents/writer/tools/write"
            try:
                answer = await client.post(url, json={"n": n})
                code = ""
                if answer.status_code >= 400:
                    try:
                        error = answer.json().get("error", {})
                        code = error.get("code") or ""
                        if "may have run" in (error.get("message") or ""):
                            code += " (may have run)"
                    except ValueError:
                        code = "not-json"
                self.answers[n] = f"{answer.status_code} {code}".strip()
            except httpx.HTTPError as exc:
                self.answers[n] = type(exc).__name__
                await asyncio.sleep(0.05)
            self.finished[n] = time.monotonic()


Rows = Callable[[int], tuple[Counter[int], Counter[str]]]
"""The audit rows of writes numbered from `start` on: how many per `n`, how many per status."""


def postgres_rows(store: str) -> Rows:
    def rows(start: int) -> tuple[Counter[int], Counter[str]]:
        import psycopg

        with psycopg.connect(store) as conn:
            found = conn.execute("SELECT (arguments->>'n')::bigint, status FROM audit WHERE kind = 'tool' AND "
                                 "tool = 'write' AND (arguments->>'n')::bigint >= %s", (start,)).fetchall()
        return Counter(int(n) for n, _ in found), Counter(status for _, status in found)
    return rows


def sqlite_rows(path: Path) -> Rows:
    def rows(start: int) -> tuple[Counter[int], Counter[str]]:
        with contextlib.closing(sqlite3.connect(path, timeout=30)) as conn:
            found = conn.execute("SELECT CAST(json_extract(arguments, '$.n') AS INTEGER), status FROM audit WHERE "
                                 "kind = 'tool' AND tool = 'write' AND json_extract(arguments, '$.n') >= ?",
                                 (start,)).fetchall()
        return Counter(int(n) for n, _ in found), Counter(status for _, status in found)
    return rows


def run_phase(name: str, urls: list[str], upstream: str, fault: tuple[Callable[[], None], Callable[[], None]],
              rows_of: Rows, start: int, seconds: float, fault_seconds: float, callers: int) -> dict[str, Any]:
    load = Load(urls, start, callers)
    begin, end = fault

    ended: list[float] = []

    def timeline() -> None:
        time.sleep(seconds)
        begin()
        time.sleep(fault_seconds)
        end()
        ended.append(time.monotonic())
        time.sleep(seconds)
        load.running = False

    clock = threading.Thread(target=timeline)
    clock.start()
    asyncio.run(load.run())
    clock.join()
    time.sleep(1)  # the last answers' rows
    received = Counter(n for n in httpx.get(f"{upstream}/received", timeout=30).json() if n >= start)
    rows, statuses = rows_of(start)
    answers = load.answers
    acknowledged = [n for n, a in answers.items() if a.startswith("2")]
    refused = [n for n, a in answers.items() if a.startswith("503")]
    return {
        "phase": name, "sent": len(answers), "answers": dict(Counter(answers.values()).most_common()),
        "acknowledged": len(acknowledged), "503": len(refused), "ran": len(received),
        "unaudited": sum(1 for n in received if n not in rows),
        "503 but ran": sum(1 for n in refused if n in received),
        "503 ran untold": sum(1 for n in refused if n in received and "may have run" not in answers[n]),
        "failed 1 s after": sum(1 for n, a in answers.items() if not a.startswith("2")
                                and load.finished.get(n, 0) > ended[0] + 1),
        "lost": sum(1 for n in acknowledged if n not in received),
        "twice": sum(1 for n, count in received.items() if count > 1),
        "rows": dict(statuses), "next": load.next,
    }


@contextlib.contextmanager
def instances(project: Path, store: str, redis: str | None, upstream: str, root: Path) -> Iterator[list[str]]:
    """Two `gateway serve` instances of `root` on `store` (and Redis); their URLs."""
    agents = project / f"agents-{len(list(project.glob('agents-*')))}.yaml"
    agents.write_text(AGENTS.format(upstream=upstream, store=store, redis=f"  redis: {redis}\n" if redis else ""))
    ports = [free_port(), free_port()]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    env = {"GATEWAY_CACHE_DIR": str(project / "cache"), "PYTHONPATH": str(root)}
    commands = [python_module("gateway", "serve", "--port", str(port), "--specs", str(project / "specs"),
                              "--agents", str(agents)) for port in ports]
    with spawned(commands[0], f"{urls[0]}/healthz", env=env, cwd=root), \
            spawned(commands[1], f"{urls[1]}/healthz", env=env, cwd=root):
        yield urls


def postgres_disk(postgres: PostgresServer) -> tuple[str, Disk]:
    """A database whose tablespace is a tmpfs of its own: its URL and the disk."""
    import psycopg

    disk = Disk(postgres.folder / "disk", "64m")  # a folder the server's user can reach
    space = disk.folder / "space"
    space.mkdir()
    user = pwd.getpwnam("postgres")
    os.chown(space, user.pw_uid, user.pw_gid)
    with psycopg.connect(postgres.url(), autocommit=True) as conn:
        conn.execute(f"CREATE TABLESPACE bench_disk LOCATION '{space}'".encode())
        conn.execute(b"CREATE DATABASE bench TABLESPACE bench_disk")
    return postgres.url("bench"), disk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="load before and after each fault")
    parser.add_argument("--fault-seconds", type=float, default=8.0, help="how long each fault lasts")
    parser.add_argument("--callers", type=int, default=16)
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--gateway-root", type=Path, default=ROOT, help="the checkout whose gateway runs")
    args = parser.parse_args()
    phases = args.phases.split(",")
    if os.geteuid() != 0:
        print("not root: the disk phases (a tmpfs each) are left out")
        phases = [p for p in phases if "disk" not in p]
    root = args.gateway_root.resolve()
    postgres, redis = PostgresServer().start(), RedisServer().start()
    try:
        # The disks are unmounted (the ExitStack) before their folders are removed.
        with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as disks:
            project = Path(folder)
            (project / "specs").mkdir()
            (project / "specs" / "counter.json").write_text(json.dumps(SPEC))
            upstream_port = free_port()
            upstream = f"http://127.0.0.1:{upstream_port}"
            serve_upstream = [sys.executable, "-c",
                              f"from bench.faults import upstream_main; upstream_main({upstream_port})"]
            start = 1

            def run(names: list[str], urls: list[str], rows_of: Rows, faults: dict[str, Any]) -> None:
                nonlocal start
                for name in names:
                    result = run_phase(name, urls, upstream, faults[name], rows_of, start, args.seconds,
                                       args.fault_seconds, args.callers)
                    start = result["next"] + 1000
                    _print(result)
                    time.sleep(2)  # the pools find their servers again before the next fault

            with spawned(serve_upstream, f"{upstream}/received", env={"PYTHONPATH": str(ROOT)}):
                on_postgres = [p for p in phases if p in PG_PHASES]
                if on_postgres:
                    faults = {"pg-pause": (postgres.pause, postgres.resume),
                              "pg-restart": (postgres.halt, postgres.restart),
                              "redis-stop": (redis.halt, redis.start)}
                    if "pg-disk-full" in on_postgres:
                        store, pg_disk = postgres_disk(postgres)
                        disks.callback(pg_disk.unmount)
                        faults["pg-disk-full"] = (pg_disk.fill, pg_disk.free)
                    else:
                        store = postgres.create_database()
                    with instances(project, store, redis.url, upstream, root) as urls:
                        run(on_postgres, urls, postgres_rows(store), faults)
                if "sqlite-disk-full" in phases:
                    sqlite_disk = Disk(project / "sqlite-disk", "16m")
                    disks.callback(sqlite_disk.unmount)
                    path = sqlite_disk.folder / "state.db"
                    with instances(project, str(path), None, upstream, root) as urls:
                        run(["sqlite-disk-full"], urls, sqlite_rows(path),
                            {"sqlite-disk-full": (sqlite_disk.fill, sqlite_disk.free)})
    finally:
        postgres.resume()
        postgres.stop()
        redis.stop()
    print(f"\ngateway from {args.gateway_root}; {args.callers} callers; {args.seconds:g} s, a fault of "
          f"{args.fault_seconds:g} s, {args.seconds:g} s; {os.cpu_count()} cores shared by everything")


def _print(result: dict[str, Any]) -> None:
    print(f"\n== {result['phase']}: {result['sent']} writes sent")
    print("   answers: " + ", ".join(f"{k}: {v}" for k, v in result["answers"].items()))
    print("   audit rows by status: " + ", ".join(f"{k}: {v}" for k, v in sorted(result["rows"].items())))
    print("   " + "  ".join(f"{key}={result[key]}" for key in
                            ("acknowledged", "503", "ran", "unaudited", "503 but ran", "503 ran untold", "lost",
                             "twice", "failed 1 s after")))
    share = result["503 but ran"] / result["503"] if result["503"] else 0.0
    print(f"   of the 503s, {share:.0%} had run upstream")


if __name__ == "__main__":
    main()
