"""Faults under load: two `gateway serve` instances on one PostgreSQL and one Redis take writes while one part fails.

    python -m bench.faults [--seconds 4] [--fault-seconds 8] [--callers 16] [--gateway-root PATH]

Each phase sends POST /agents/writer/tools/write with a unique `n` from `--callers` concurrent callers, spread over
both instances: `--seconds` before the fault, `--fault-seconds` of it, `--seconds` after. One fault a phase:

- `pg-pause`: every PostgreSQL process is stopped (SIGSTOP) and continued (a hung database);
- `pg-restart`: PostgreSQL is shut down (fast) and started again on its data (every connection is cut);
- `redis-stop`: Redis is stopped and started again on its port.

The upstream (a counting ASGI app in its own process) keeps every `n` it received; the audit rows are read from
PostgreSQL afterwards. Printed per phase: answers by status, and the counts that matter:

- `ran`: writes the upstream received;
- `unaudited`: writes the upstream received that have no audit row (must be 0: nothing runs unrecorded);
- `503 but ran`: answered 503 although the upstream received them; `503 ran untold`: of those, the answers that
  did not say the call may have run;
- `failed 1 s after`: answers other than 2xx more than a second after the fault ended (stale connections);
- `lost`: acknowledged (2xx) but never received upstream; `twice`: received more than once.

`--gateway-root` runs the gateway of another checkout (e.g. an export of main) to compare before and after.
PostgreSQL runs without fsync (a test server): the faults are about connections, not the disk. On a 2-core machine
the instances, PostgreSQL, Redis, the upstream and the callers share the cores: the counts depend on the load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
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
  redis: {redis}
"""
PHASES = ("pg-pause", "pg-restart", "redis-stop")


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


def fault(name: str, postgres: PostgresServer, redis: RedisServer) -> tuple[Callable[[], None], Callable[[], None]]:
    if name == "pg-pause":
        return postgres.pause, postgres.resume
    if name == "pg-restart":
        return postgres.halt, postgres.restart
    return redis.halt, redis.start


def run_phase(name: str, urls: list[str], upstream: str, postgres: PostgresServer, redis: RedisServer, store: str,
              start: int, seconds: float, fault_seconds: float, callers: int) -> dict[str, Any]:
    load = Load(urls, start, callers)
    begin, end = fault(name, postgres, redis)

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
    import psycopg

    with psycopg.connect(store) as conn:
        rows = Counter(int(n) for (n,) in conn.execute(
            "SELECT arguments->>'n' FROM audit WHERE kind = 'tool' AND tool = 'write'").fetchall()
            if n is not None and int(n) >= start)
        statuses = Counter(status for (status,) in conn.execute(
            "SELECT status FROM audit WHERE kind = 'tool' AND tool = 'write' AND (arguments->>'n')::bigint >= %s",
            (start,)).fetchall())
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="load before and after each fault")
    parser.add_argument("--fault-seconds", type=float, default=8.0, help="how long each fault lasts")
    parser.add_argument("--callers", type=int, default=16)
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--gateway-root", type=Path, default=ROOT, help="the checkout whose gateway runs")
    args = parser.parse_args()
    postgres, redis = PostgresServer().start(), RedisServer().start()
    try:
        with tempfile.TemporaryDirectory() as folder:
            project = Path(folder)
            (project / "specs").mkdir()
            (project / "specs" / "counter.json").write_text(json.dumps(SPEC))
            upstream_port = free_port()
            upstream = f"http://127.0.0.1:{upstream_port}"
            store = postgres.create_database()
            (project / "agents.yaml").write_text(AGENTS.format(upstream=upstream, store=store, redis=redis.url))
            ports = [free_port(), free_port()]
            urls = [f"http://127.0.0.1:{port}" for port in ports]
            root = args.gateway_root.resolve()
            env = {"GATEWAY_CACHE_DIR": str(project / "cache"), "PYTHONPATH": str(root)}
            commands = [python_module("gateway", "serve", "--port", str(port), "--specs", str(project / "specs"),
                                      "--agents", str(project / "agents.yaml")) for port in ports]
            serve_upstream = [sys.executable, "-c",
                              f"from bench.faults import upstream_main; upstream_main({upstream_port})"]
            with spawned(serve_upstream, f"{upstream}/received", env={"PYTHONPATH": str(ROOT)}), \
                    spawned(commands[0], f"{urls[0]}/healthz", env=env, cwd=root), \
                    spawned(commands[1], f"{urls[1]}/healthz", env=env, cwd=root):
                results = []
                start = 1
                for phase in args.phases.split(","):
                    result = run_phase(phase, urls, upstream, postgres, redis, store, start, args.seconds,
                                       args.fault_seconds, args.callers)
                    results.append(result)
                    start = result["next"] + 1000
                    _print(result)
                    time.sleep(2)  # the pools find their servers again before the next fault
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


if __name__ == "__main__":
    main()
