"""Load: N concurrent chats through a running gateway with the safety layer on.

`gateway serve` in its own process on 127.0.0.1 (client keys, SQLite audit, breaker, limits), the tests'
ScriptedLLM server as the model (each chat: one tool call, then the answer) and a real upstream
(the tests' RecordingServer answering like Open-Meteo). Every chat is one LLM round trip for the tool
call, one upstream call, one LLM round trip for the answer, and two audit rows (the tool call and the
chat), both committed before the answer returns. Reports throughput, latency percentiles, errors,
and whether every audit row is there.

    /work/venv/bin/python bench/load.py [--chats 200] [--concurrency 200] [--mode process|inprocess|bare]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "server"), str(ROOT / "tests" / "safety")]

from recording_server import RecordingServer  # noqa: E402
from safety_support import SAFE_AGENTS_YAML, WEATHER_KEY, build_app  # noqa: E402
from scripted_llm import Call, Recorded, Reply, ScriptedLLM  # noqa: E402
from server_support import route_upstream, running, write_project  # noqa: E402

from gateway.runtime import RuntimeHolder, load_runtime  # noqa: E402
from gateway.server import create_app  # noqa: E402

FORECAST = Call("getForecast", {"latitude": 52.52, "longitude": 13.41, "current": ["temperature_2m"]})
ANSWER = "It is 3.5 °C in Berlin."


class ToolThenAnswer(ScriptedLLM):
    """Any number of concurrent chats: a tool call first, the answer once the tool's result is in."""

    def _next(self, recorded: Recorded) -> Reply | None:
        with self._lock:
            self.requests.append(recorded)
        messages = recorded.body.get("messages", []) if isinstance(recorded.body, dict) else []
        if messages and messages[-1].get("role") == "tool":
            return Reply(text=ANSWER)
        return Reply(calls=[FORECAST])


async def _chat(client: httpx.AsyncClient, index: int) -> tuple[float, str | None]:
    started = time.perf_counter()
    try:
        response = await client.post("/v1/chat/completions", json={
            "model": "weather", "messages": [{"role": "user", "content": f"Weather in Berlin? ({index})"}]})
    except httpx.HTTPError as exc:
        return time.perf_counter() - started, f"{type(exc).__name__}: {exc}"
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        return elapsed, f"HTTP {response.status_code}: {response.text[:200]}"
    body = response.json()
    if body["choices"][0]["message"]["content"] != ANSWER or not body["gateway"]["steps"][0]["ok"]:
        return elapsed, f"unexpected answer: {str(body)[:200]}"
    return elapsed, None


async def _load(url: str, chats: int, concurrency: int) -> tuple[float, list[float], list[str]]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    headers = {"Authorization": f"Bearer {WEATHER_KEY}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120, limits=limits) as client:
        gate = asyncio.Semaphore(concurrency)

        async def one(index: int) -> tuple[float, str | None]:
            async with gate:
                return await _chat(client, index)

        started = time.perf_counter()
        results = await asyncio.gather(*(one(i) for i in range(chats)))
        wall = time.perf_counter() - started
    return wall, [r[0] for r in results], [r[1] for r in results if r[1]]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


@contextmanager
def _served(folder: Path, mode: str) -> Iterator[tuple[str, Path | None]]:
    """The gateway: `gateway serve` in its own process (default), or an app in this process."""
    store = folder / ".gateway" / "state.db"  # the default store beside agents.yaml
    if mode == "process":
        port = _free_port()
        command = [sys.executable, "-m", "gateway", "serve", "--port", str(port), "--specs", str(folder / "specs"),
                   "--agents", str(folder / "agents.yaml"), "--no-cache"]
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_healthy(url, process)
            yield url, store
        finally:
            process.terminate()
            process.wait(30)
        return
    if mode == "bare":
        app = create_app(RuntimeHolder(load_runtime(folder / "specs", folder / "agents.yaml")), watch=False)
        with running(app) as url:
            yield url, None
        return
    app, safety = build_app(folder, store=store)
    try:
        with running(app) as url:
            yield url, store
    finally:
        safety.store.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_healthy(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"`gateway serve` exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("`gateway serve` did not become healthy")


def _audit_summary(store: Path | None, expected: int) -> str:
    if store is None:
        return "- (no safety layer)"
    with sqlite3.connect(store) as db:
        rows = dict(db.execute("SELECT kind, count(*) FROM audit GROUP BY kind").fetchall())
    complete = rows == {"chat": expected, "tool": expected}
    return (f"{rows.get('chat', 0)} chat + {rows.get('tool', 0)} tool rows "
            f"(expected {expected} + {expected}: {'complete' if complete else 'MISSING'})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--mode", choices=["process", "inprocess", "bare"], default="process",
                        help="process: `gateway serve` in a subprocess (default); inprocess: the same app in this "
                             "process (shares its GIL with the scripted servers); bare: in process, no safety layer")
    args = parser.parse_args()
    warm = min(10, args.chats)

    with tempfile.TemporaryDirectory() as tmp, ToolThenAnswer() as llm, RecordingServer() as upstream:
        route_upstream(upstream)
        folder = Path(tmp)
        write_project(folder, llm.url, upstream.url, SAFE_AGENTS_YAML)
        with _served(folder, args.mode) as (url, store):
            asyncio.run(_load(url, warm, warm))  # warm up pools and caches
            wall, latencies, errors = asyncio.run(_load(url, args.chats, args.concurrency))
        audit = _audit_summary(store, args.chats + warm)

    print(f"chats: {args.chats}, concurrency: {args.concurrency}, mode: {args.mode}")
    print(f"wall: {wall:.2f} s, throughput: {args.chats / wall:.1f} chats/s")
    print(f"latency: p50 {_percentile(latencies, 0.5) * 1000:.0f} ms, p99 {_percentile(latencies, 0.99) * 1000:.0f} ms,"
          f" max {max(latencies) * 1000:.0f} ms, mean {statistics.mean(latencies) * 1000:.0f} ms")
    print(f"errors: {len(errors)}" + (f" (first: {errors[0]})" if errors else ""))
    print(f"audit: {audit}")
    print(f"LLM requests: {len(llm.requests)}, upstream requests: {len(upstream.requests)}")
    return 1 if errors or "MISSING" in audit else 0


if __name__ == "__main__":
    sys.exit(main())
