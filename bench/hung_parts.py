"""A hung shared part: what a caller meets on each door, and how long, while Redis or PostgreSQL does not answer.

    python -m bench.hung_parts [--rounds 3] [--hold 45] [--faults redis-stop,redis-silent,pg-stop]
                               [--gateway-root PATH]

Two `gateway serve` instances share one PostgreSQL store and one Redis: `direct` talks to Redis itself, `proxied`
through a TCP proxy on 127.0.0.1 (tests/quiet_proxy.py). Faults, one a round each:

- `redis-stop`: redis-server SIGSTOPped (connections open, new ones accepted by the kernel, nothing answers);
- `redis-silent`: the proxy accepts connections and swallows every byte (a hung server behind a load balancer);
- `pg-stop`: every PostgreSQL process SIGSTOPped.

While the part hangs, at once and concurrently: one call on each door of the instance that meets the fault (a tool
call on the direct HTTP door, a chat completion whose scripted model calls the tool, an MCP `tools/call`), and
bystanders, requests whose path needs no shared part (the tool listing of the HTTP door, `/healthz`) every 100 ms;
and `/readyz`. Printed per fault: each door's answer (status, error code, the start of the message) and seconds,
medians over the rounds, the bystanders' p50 / max, the load average beside each. A door still waiting after
`--hold` seconds is given its part back (SIGCONT / the proxy speaks) and counted as "no answer in hold". Then
each door is called again: `after` says whether it works without a restart.

`--gateway-root` runs the gateway of another checkout (e.g. an export of main) for the before figures.

`--cost N` measures instead what the bound costs when nothing hangs: N questions of each kind to the PostgreSQL
store in this process (`ping`, an audit row written and its outcome, `take_tokens`), p50 and p90 in µs, with the
`gateway` that `PYTHONPATH` finds first (an export of main, or this tree).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from bench.support import ROOT, free_port, mcp_open, python_module, spawned

sys.path.insert(0, str(ROOT / "tests"))

from quiet_proxy import QuietProxy  # noqa: E402
from recording_server import RecordingServer, Reply  # noqa: E402
from safety.counted_writes import write_counter_project  # noqa: E402
from scripted_llm import Call, Recorded, ScriptedLLM  # noqa: E402
from scripted_llm import Reply as LLMReply  # noqa: E402
from shared_servers import PostgresServer, RedisServer  # noqa: E402

FAULTS = ("redis-stop", "redis-silent", "pg-stop")
DOORS = ("http", "chat", "mcp")
GATEWAY = "gateway:\n  store: {store}\n  redis: {redis}\n"


class ToolThenText(ScriptedLLM):
    """A model that calls `write` when the last message is the user's, and says what the tool answered after."""

    def _next(self, recorded: Recorded) -> LLMReply | None:
        messages = recorded.body.get("messages") or [{}]
        last = messages[-1]
        if last.get("role") == "tool":
            return LLMReply(text=f"the tool said: {str(last.get('content'))[:200]}")
        return LLMReply(calls=[Call("write", {"n": int(time.time() * 1000) % 1_000_000})])


def load() -> float:
    return os.getloadavg()[0]


def short(answer: httpx.Response | BaseException, door: str) -> str:
    if isinstance(answer, BaseException):
        return type(answer).__name__
    try:
        body = answer.json()
    except ValueError:
        body = {}
    if isinstance(body, dict) and "error" in body and isinstance(body["error"], dict):
        return f"{answer.status_code} {body['error'].get('code')}: {str(body['error'].get('message'))[:110]}"
    if door == "chat" and answer.status_code == 200:
        return f"200 model read: {body['choices'][0]['message']['content'][:110]}"
    if door == "mcp" and answer.status_code == 200:
        result = body.get("result", {})
        text = (result.get("content") or [{}])[0].get("text", "")
        return f"200 isError={result.get('isError')}: {text[:110]}"
    return f"{answer.status_code}"


class Doors:
    """One caller per door of one instance (an MCP session opened beforehand)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = httpx.AsyncClient(timeout=120, trust_env=False)
        self.mcp_headers: dict[str, str] = {}
        self.n = 0

    async def open(self) -> None:
        self.mcp_headers = await mcp_open(self.client, f"{self.url}/mcp/writer")

    async def call(self, door: str) -> httpx.Response:
        self.n += 1
        if door == "http":
            return await self.client.post(f"{self.url}/agents/writer/tools/write", json={"n": self.n})
        if door == "chat":
            return await self.client.post(f"{self.url}/v1/chat/completions", json={
                "model": "writer", "messages": [{"role": "user", "content": "write"}]})
        response = await self.client.post(f"{self.url}/mcp/writer", headers=self.mcp_headers, json={
            "jsonrpc": "2.0", "id": 1000 + self.n, "method": "tools/call",
            "params": {"name": "write", "arguments": {"n": self.n}}})
        # the session's answer, as JSON (an event stream's data line when the door streams)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            for line in response.text.splitlines():
                if line.startswith("data:") and line[5:].strip():
                    return httpx.Response(response.status_code, json=json.loads(line[5:]))
        return response

    async def aclose(self) -> None:
        await self.client.aclose()


async def one_round(doors: Doors, fault: tuple[Callable[[], None], Callable[[], None]], hold: float
                    ) -> dict[str, Any]:
    begin, end = fault
    for door in DOORS:  # warm: each door has run once with every part answering
        answer = await doors.call(door)
        if answer.status_code != 200:
            raise RuntimeError(f"{door} before the fault: {short(answer, door)}")
    begin()
    started = time.monotonic()
    waits: list[float] = []
    stop = asyncio.Event()

    async def bystander() -> None:
        while not stop.is_set():
            t0 = time.monotonic()
            for path in ("/agents/writer/tools", "/healthz"):
                (await doors.client.get(f"{doors.url}{path}")).raise_for_status()
            waits.append((time.monotonic() - t0) / 2)
            await asyncio.sleep(0.1)

    async def timed(door: str) -> tuple[str, float]:
        t0 = time.monotonic()
        try:
            answer: httpx.Response | BaseException = await doors.call(door)
        except httpx.HTTPError as exc:
            answer = exc
        return short(answer, door), time.monotonic() - t0

    async def ready() -> tuple[str, float]:
        t0 = time.monotonic()
        answer = await doors.client.get(f"{doors.url}/readyz")
        return f"{answer.status_code} {answer.text[:160]}", time.monotonic() - t0

    watching = asyncio.ensure_future(bystander())
    calls = [asyncio.ensure_future(timed(door)) for door in DOORS] + [asyncio.ensure_future(ready())]
    done, _ = await asyncio.wait(calls, timeout=hold)
    ended = time.monotonic() - started
    end()
    results = [await c for c in calls]
    stop.set()
    await watching
    after = []
    for door in DOORS:
        answer = await doors.call(door)
        after.append(answer.status_code == 200 and "isError=True" not in short(answer, door))
    out: dict[str, Any] = {"load": load(), "bystander": waits, "after": all(after), "held": ended}
    for (door, c), (what, seconds) in zip([*((d, None) for d in DOORS), ("readyz", None)], results, strict=True):
        del c
        answered_in_hold = seconds < hold
        out[door] = (what if answered_in_hold else f"no answer in {hold:g} s (then: {what})", seconds)
    return out


async def measure(urls: dict[str, str], faults: dict[str, tuple[Callable[[], None], Callable[[], None]]],
                  names: list[str], rounds: int, hold: float) -> None:
    for name in names:
        door_url = urls["proxied" if name == "redis-silent" else "direct"]
        doors = Doors(door_url)
        await doors.open()
        got = []
        for _ in range(rounds):
            got.append(await one_round(doors, faults[name], hold))
            await asyncio.sleep(1)
        await doors.aclose()
        print(f"\n== {name} ({rounds} rounds; load average {got[0]['load']:.1f} -> {got[-1]['load']:.1f})")
        for door in (*DOORS, "readyz"):
            seconds = statistics.median(g[door][1] for g in got)
            print(f"   {door:7} median {seconds:6.2f} s  [{', '.join(f'{g[door][1]:.2f}' for g in got)}]  "
                  f"{got[-1][door][0]}")
        waits = sorted(w for g in got for w in g["bystander"])
        print(f"   bystanders (tool listing, /healthz): {len(waits)} requests, "
              f"p50 {statistics.median(waits) * 1000:.1f} ms, max {waits[-1] * 1000:.1f} ms")
        print(f"   after the part is back: every door answers 200 without a restart: "
              f"{all(g['after'] for g in got)}")


async def bound_cost(n: int) -> None:
    """The bound alone: CPU per question that answers at once, awaited bare and through `within`, in turns."""
    from gateway.store.answer_within import within

    async def answer() -> int:
        return 1

    bare, bounded = [], []
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(n):
            await answer()
        bare.append((time.process_time() - t0) / n * 1e6)
        t0 = time.process_time()
        for _ in range(n):
            await within(2.0, answer(), "bench")
        bounded.append((time.process_time() - t0) / n * 1e6)
    print(f"   the bound alone: {statistics.median(bounded) - statistics.median(bare):.1f} µs CPU a question "
          f"(bare {statistics.median(bare):.2f}, within {statistics.median(bounded):.2f}; medians of 5 x {n}; "
          f"load {load():.1f})")


async def question_cost(store_url: str, n: int) -> None:
    import gateway
    from gateway.store import AuditRow, Bucket
    from gateway.store.postgres import PostgresStore

    store = PostgresStore(store_url)
    bucket = [Bucket("bench:cost", 1e9, 1e9)]

    async def audit_row() -> None:
        row = AuditRow(time=time.time(), kind="tool", agent="writer", tool="write", status="running")
        await store.add_audit(row)
        row.status = "ok"
        await store.update_audit(row)

    kinds: dict[str, Callable[[], Any]] = {"ping": store.ping, "audit row + outcome": audit_row,
                                           "take_tokens": lambda: store.take_tokens(bucket)}
    print(f"gateway from {Path(gateway.__file__).parent.parent}; {n} questions each, load average {load():.1f}")
    if hasattr(__import__("gateway.store.postgres", fromlist=["within"]), "within"):
        await bound_cost(20_000)
    for name, ask in kinds.items():
        for _ in range(20):
            await ask()
        took = []
        for _ in range(n):
            t0 = time.perf_counter()
            await ask()
            took.append((time.perf_counter() - t0) * 1e6)
        took.sort()
        print(f"   {name:20} p50 {statistics.median(took):8.1f} µs  p90 {took[int(n * 0.9)]:8.1f} µs  "
              f"(load {load():.1f})")
    await store.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hold", type=float, default=45.0, help="seconds a fault lasts at most")
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument("--gateway-root", type=Path, default=ROOT, help="the checkout whose gateway runs")
    parser.add_argument("--cost", type=int, default=0, help="measure N questions to PostgreSQL instead")
    args = parser.parse_args()
    root = args.gateway_root.resolve()
    if args.cost:
        postgres = PostgresServer().start()
        try:
            asyncio.run(question_cost(postgres.create_database(), args.cost))
        finally:
            postgres.stop()
        return
    postgres, redis = PostgresServer().start(), RedisServer().start()
    proxy = QuietProxy(redis.port)
    try:
        with tempfile.TemporaryDirectory() as folder, ExitStack() as stack, \
                RecordingServer() as upstream, ToolThenText() as llm:
            stack.enter_context(proxy.running())
            upstream.route("/write", lambda request: Reply(201, {"ok": True}))
            store = postgres.create_database()
            urls = {}
            env = {"GATEWAY_CACHE_DIR": str(Path(folder) / "cache"), "PYTHONPATH": str(root)}
            for name, redis_port in (("direct", redis.port), ("proxied", proxy.port)):
                project = Path(folder) / name  # the counter's write (tests/safety/counted_writes.py)
                agents = write_counter_project(project, llm.url, upstream.url, GATEWAY.format(
                    store=store, redis=f"redis://127.0.0.1:{redis_port}/0"))
                port = free_port()
                urls[name] = f"http://127.0.0.1:{port}"
                stack.enter_context(spawned(
                    python_module("gateway", "serve", "--port", str(port), "--specs", str(project / "specs"),
                                  "--agents", str(agents)), f"{urls[name]}/healthz", env=env, cwd=root))
            faults = {"redis-stop": (redis.pause, redis.resume), "redis-silent": (proxy.silence, proxy.speak),
                      "pg-stop": (postgres.pause, postgres.resume)}
            asyncio.run(measure(urls, faults, args.faults.split(","), args.rounds, args.hold))
    finally:
        postgres.resume()
        redis.resume()
        postgres.stop()
        redis.stop()
    print(f"\ngateway from {root}; {os.cpu_count()} cores shared by everything")


if __name__ == "__main__":
    main()
