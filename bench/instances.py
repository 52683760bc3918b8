"""Several instances: chats per second with one and with two `gateway serve` processes on one PostgreSQL and
one Redis, and the per-call cost of an audit row written to PostgreSQL against SQLite.

    python -m bench.instances [--rounds 3] [--chats 300] [--rows 2000]

Needs PostgreSQL and Redis installed (Debian: postgresql, redis-server); both are started on free loopback
ports in temporary folders (PostgreSQL with fsync on, as in production) and stopped at the end.

Chats: an instant scripted LLM (text, no tools) in this process; each chat writes its audit row to
PostgreSQL. One round sends `--chats` chats from 32 concurrent callers to instance A alone, then the same
number spread over A and B; rounds alternate, and the medians are printed. On a 2-core machine two
instances share the same cores (and the LLM's thread and the database's): the figure says what a second
process adds here, not what a second machine would.

Audit rows: `Store.add_audit` in this process, one at a time and 8 concurrent, SQLite (WAL, the default)
against PostgreSQL with `synchronous_commit` on (a WAL flush per row) and off; the stores take turns in
each round.

Guards: a breaker check, a concurrency slot and the verdict per call, one call at a time: this process's
own (`CircuitBreaker`, a semaphore) against those counted in Redis (`SharedGuards`), in turns.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench.support import ROOT, free_port, python_module, spawned

sys.path.insert(0, str(ROOT / "tests"))

from scripted_llm import Recorded, Reply, ScriptedLLM  # noqa: E402
from shared_servers import PostgresServer, RedisServer  # noqa: E402

from gateway.safety.breaker import CircuitBreaker  # noqa: E402
from gateway.store import AuditRow, SQLiteStore, Store  # noqa: E402
from gateway.store.postgres import PostgresStore  # noqa: E402
from gateway.store.redis_counters import RedisCounters  # noqa: E402

AGENTS = """\
providers:
  openai: {{kind: openai, base_url: "{llm}/v1", api_key: k}}
agents:
  bench:
    model: openai/m
    instructions: Bench.
gateway:
  store: {store}
  redis: {redis}
"""
CALLERS = 32


class InstantLLM(ScriptedLLM):  # type: ignore[misc]  # tests/ is not a typed package
    def _next(self, recorded: Recorded) -> Reply | None:
        return Reply(text="Done.")


async def _chats(urls: list[str], count: int) -> float:
    """Chats per second, `count` chats from CALLERS concurrent callers, spread over `urls` in turn."""
    body = {"model": "bench", "messages": [{"role": "user", "content": "go"}]}
    queue = list(range(count))

    async def caller(client: httpx.AsyncClient) -> None:
        while queue:
            number = queue.pop()
            answer = await client.post(f"{urls[number % len(urls)]}/v1/chat/completions", json=body)
            answer.raise_for_status()

    async with httpx.AsyncClient(timeout=60, trust_env=False) as client:
        started = time.perf_counter()
        await asyncio.gather(*(caller(client) for _ in range(CALLERS)))
        return count / (time.perf_counter() - started)


def measure_chats(postgres: PostgresServer, redis: RedisServer, rounds: int, chats: int) -> dict[str, float]:
    with InstantLLM() as llm, tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        (project / "specs").mkdir()
        (project / "agents.yaml").write_text(AGENTS.format(llm=llm.url, store=postgres.create_database(),
                                                           redis=redis.url))
        ports = [free_port(), free_port()]
        urls = [f"http://127.0.0.1:{port}" for port in ports]
        commands = [python_module("gateway", "serve", "--port", str(port), "--specs", str(project / "specs"),
                                  "--agents", str(project / "agents.yaml")) for port in ports]
        env = {"GATEWAY_CACHE_DIR": str(project / "cache")}
        with spawned(commands[0], f"{urls[0]}/healthz", env=env), spawned(commands[1], f"{urls[1]}/healthz",
                                                                            env=env):
            asyncio.run(_chats(urls, 100))  # warm both
            one, two = [], []
            for _ in range(rounds):
                one.append(asyncio.run(_chats(urls[:1], chats)))
                two.append(asyncio.run(_chats(urls, chats)))
    return {"one": statistics.median(one), "two": statistics.median(two)}


async def _audit_rows(store: Store, rows: int, concurrency: int) -> float:
    """Microseconds of wall time per row, `rows` rows written by `concurrency` concurrent writers."""
    row = AuditRow(time=time.time(), kind="tool", agent="bench", tool="getThing", arguments={"id": 7}, latency_ms=1.0)
    left = [rows]

    async def writer() -> None:
        while left[0] > 0:
            left[0] -= 1
            await store.add_audit(AuditRow(**_fields(row)))  # a new row each time: the store sets its id

    started = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(concurrency)))
    return (time.perf_counter() - started) / rows * 1e6


def _fields(row: AuditRow) -> dict[str, Any]:
    return {name: getattr(row, name) for name in AuditRow.__dataclass_fields__}


def measure_audit(postgres: PostgresServer, rounds: int, rows: int) -> dict[str, dict[str, float]]:
    url = postgres.create_database()
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        makers: dict[str, Callable[[], Store]] = {
            "SQLite": lambda: SQLiteStore(Path(folder) / "state.db"),
            "PostgreSQL, synchronous_commit on": lambda: PostgresStore(url),
            "PostgreSQL, synchronous_commit off": lambda: PostgresStore(url + "?options=-c%20synchronous_commit%3Doff"),
        }

        async def one_round() -> None:
            for name, make in makers.items():
                store = make()
                try:
                    await _audit_rows(store, 50, 1)  # warm: the pool open, the file made
                    for concurrency in (1, 8):
                        spent = await _audit_rows(store, rows, concurrency)
                        results.setdefault(name, {}).setdefault(f"{concurrency}", []).append(spent)
                finally:
                    await store.aclose()

        for _ in range(rounds):
            asyncio.run(one_round())
    return {name: {k: statistics.median(v) for k, v in by.items()} for name, by in results.items()}


def measure_guards(redis: RedisServer, rounds: int, calls: int) -> dict[str, float]:
    """Microseconds per call for a breaker check, a concurrency slot and the verdict: in the process
    (`CircuitBreaker` and a semaphore) against Redis (`SharedGuards.enter` and `settle`)."""

    async def local_calls() -> float:
        breaker, slots = CircuitBreaker(), asyncio.Semaphore(16)
        started = time.perf_counter()
        for _ in range(calls):
            breaker.allow()
            async with slots:
                pass
            breaker.record(True)
        return (time.perf_counter() - started) / calls * 1e6

    async def redis_calls(counters: RedisCounters) -> float:
        started = time.perf_counter()
        for _ in range(calls):
            lease, _ = await counters.guards.enter("a", reset_after=30, limit=16, wait=1, lease=10)
            await counters.guards.settle("a", lease, True, failures=5, reset_after=30)
        return (time.perf_counter() - started) / calls * 1e6

    async def run() -> dict[str, float]:
        counters = RedisCounters(redis.url)
        try:
            await redis_calls(counters)
            spent: dict[str, list[float]] = {"local": [], "redis": []}
            for _ in range(rounds):
                spent["local"].append(await local_calls())
                spent["redis"].append(await redis_calls(counters))
        finally:
            await counters.aclose()
        return {name: statistics.median(values) for name, values in spent.items()}

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chats", type=int, default=300, help="chats per round and per setup")
    parser.add_argument("--rows", type=int, default=2000, help="audit rows per round, store and concurrency")
    args = parser.parse_args()
    postgres, redis = PostgresServer().start(durable=True), RedisServer().start()
    try:
        audit = measure_audit(postgres, args.rounds, args.rows)
        guards = measure_guards(redis, args.rounds, args.rows)
        chats = measure_chats(postgres, redis, args.rounds, args.chats)
    finally:
        postgres.stop()
        redis.stop()
    print(f"audit row, wall time per row (median of {args.rounds} rounds of {args.rows} rows):")
    base = audit["SQLite"]
    for name, by in audit.items():
        print(f"  {name:<36} 1 writer {by['1']:8.1f} us ({by['1'] / base['1']:.2f}x SQLite)"
              f"   8 writers {by['8']:8.1f} us ({by['8'] / base['8']:.2f}x)")
    print(f"guards per tool call, one at a time: in the process {guards['local']:.1f} us, in Redis "
          f"{guards['redis']:.1f} us (+{guards['redis'] - guards['local']:.1f} us)")
    print(f"chats per second, {CALLERS} callers, instant LLM, median of {args.rounds} rounds of {args.chats}:")
    print(f"  one instance  {chats['one']:7.1f}/s")
    print(f"  two instances {chats['two']:7.1f}/s  ({chats['two'] / chats['one']:.2f}x)")


if __name__ == "__main__":
    main()
