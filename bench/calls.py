"""Tool calls through a running `gateway serve`, beside the direct httpx call to the same upstream and the peer.

    python -m bench.calls [--rounds 5] [--calls 200] [--concurrency 32] [--no-peer] [--floor]

Processes, all on 127.0.0.1: the upstream (bench/upstream.py), `gateway serve` (its own process, the bench
spec plus GitHub's spec from a warm cache), a bare pass-through proxy (bench/bare_proxy.py: the cost of one
extra hop in Python with no logic), FastMCP's `from_openapi` server for the bench spec and for GitHub's
(bench/peer.py, when installed), and this measuring client. Each round interleaves the sides so drift in the
machine's load hits them alike; a figure is the median over rounds of each round's figure.

Every caller is an `httpx.AsyncClient` of its own (with its own MCP session), as separate agents would be.
One client shared by every side and caller measured httpcore instead: its pool checks each idle
connection's socket (`getpeername`, `is_socket_readable`) on every request, which took ~45% of the measuring
process's CPU with 64 pooled connections to three origins, added ~1.5 ms to every call of every side and so
squeezed all the ratios towards 1.

- sequential: p50 of one call at a time: direct `GET`, the bare proxy (on the executor's client and on
  the candidates aiohttp and httpx), the gateway's
  `POST /agents/bench/tools/listIssues`, MCP `tools/call` on an open session (ours and the peer's).
- concurrent: `--concurrency` callers, each with its own client, sharing the calls; throughput in calls/s.
- first MCP call: a new session on the GitHub agent (initialize, initialized, tools/call), in ms.
- CPU per call of each serving process, to the nanosecond, and split by thread (the event loop's, pyreqwest's, the
  others'): the CPU goal is 1.6x the bare proxy's, whose client thread is a quarter of its CPU.
- with `--floor`: the floor of the promises (bench/promise_floor.py: every promise of the HTTP door kept once,
  plainly, on the same parts, no gateway code on the path) with every promise (in every round beside the others),
  and with each left out in turn and with none (each its own process, in the CPU count; without the audit and without
  any promise in the sequential rounds too); a second table says what each promise costs (the whole floor's CPU a
  call less the floor's without it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Any

import httpx

from bench.promise_floor import AUDIT_FORMS, FLOOR_KEY, PROMISES, flags
from bench.support import (
    CALL_ARGS,
    CLIENT_THREADS,
    DIRECT_HEADERS,
    DIRECT_PATH,
    DOOR,
    GITHUB,
    LOOP,
    TOKEN,
    Row,
    cpu_seconds,
    cpu_split,
    free_port,
    mcp_call,
    mcp_open,
    mcp_stateless_call,
    median,
    peer_installed,
    python_module,
    spawned,
    thread_cpu_ns,
    write_project,
)

Call = Callable[[], Awaitable[None]]
"""One call on one caller's own client."""

BARE = {"bare": "reqwest", "bare_aiohttp": "aiohttp", "bare_httpx": "httpx"}
"""The bare pass-through proxies (bench/bare_proxy.py), by side, and the client each sends on: the
executor's (pyreqwest through gateway.http.wire) and the candidates it was chosen against."""

FLOOR: dict[str, tuple[str, list[str]]] = {
    "floor": ("nothing", []),
    **{f"floor-{name}": (name, flags((name,))) for name in PROMISES},
    "floor-none": ("every promise", flags(PROMISES)),
    **{f"floor-audit-{form}": (f"its audit as {form}", ["--audit-form", form]) for form in AUDIT_FORMS[1:]},
}
"""The floor of the promises (bench/promise_floor.py), by side: what it leaves out (nothing, each promise in turn, all:
the call alone, the body parsed, the request built and sent, the answer read, parsed and sent; or the audit kept in
another form, a measurement) and its command line's flags."""
FLOOR_HEADERS = {"Authorization": f"Bearer {FLOOR_KEY}"}
TIMED_FLOORS = ("floor", "floor-audit", "floor-none", "floor-audit-exclusive", "floor-audit-file")


async def _bind(side: str, client: httpx.AsyncClient, urls: dict[str, str | None]) -> Call:
    """`side`'s call on `client` (an MCP side opens the client's own session first)."""
    plain = {  # the sides that are one HTTP request each: method, URL, request options
        "direct": ("GET", f"{urls['upstream']}{DIRECT_PATH}", {"headers": DIRECT_HEADERS}),
        **{name: ("POST", f"{urls[name]}/", {"json": CALL_ARGS}) for name in BARE},
        "http": ("POST", f"{urls['gateway']}/agents/bench/tools/listIssues", {"json": CALL_ARGS}),
        **{name: ("POST", f"{urls[name]}{DOOR}", {"json": CALL_ARGS, "headers": FLOOR_HEADERS})
           for name in FLOOR if urls.get(name)},
    }
    if side in plain:
        method, target, options = plain[side]

        async def request() -> None:
            response = await client.request(method, target, **options)
            assert response.status_code == 200, response.text[:300]
            response.json()

        return request
    url = f"{urls['gateway']}/mcp/bench" if side in ("mcp", "mcp2026") else f"{urls['peer']}/mcp"
    if side == "mcp2026":
        async def stateless() -> None:
            await mcp_stateless_call(client, url, "listIssues", CALL_ARGS)

        return stateless
    headers = await mcp_open(client, url)

    async def mcp_door() -> None:
        await mcp_call(client, url, headers, "listIssues", CALL_ARGS)

    return mcp_door


async def _sequential(sides: dict[str, Call], count: int, failed: dict[str, str]) -> dict[str, float]:
    """p50 latency (ms) per side of `count` calls one after another, the sides taking turns call by call
    (so a burst of load from elsewhere on the machine hits every side alike), in a new order each turn: a call
    that follows one served by the same process finds that process's code and data still in the CPU's caches,
    so a fixed order favoured whichever side came right after another side of the same server."""
    times: dict[str, list[float]] = {name: [] for name in sides if name not in failed}
    order = random.Random(8)  # seeded: runs take the same sequence of orders
    for _ in range(count):
        turn = list(times)
        order.shuffle(turn)
        for name in turn:
            if name not in times:
                continue
            started = time.perf_counter()
            try:
                await sides[name]()
            except (httpx.HTTPError, RuntimeError, AssertionError) as error:
                _failed(failed, name, error)
                del times[name]
                continue
            times[name].append(time.perf_counter() - started)
    return {name: median(values) * 1000 for name, values in times.items()}


async def _concurrent(callers: list[Call], count: int) -> float:
    """Throughput (calls/s) of the callers (each on its own client) sharing `count` calls."""
    remaining = [count]

    async def caller(call: Call) -> None:
        while remaining[0] > 0:
            remaining[0] -= 1
            await call()

    started = time.perf_counter()
    await asyncio.gather(*(caller(call) for call in callers))
    return count / (time.perf_counter() - started)


async def _first_calls(url: str, tool: str, sessions: int) -> float:
    """Median ms from nothing to the answer of the first tools/call on a new session."""
    times = []
    async with httpx.AsyncClient(timeout=60, trust_env=False) as client:
        for _ in range(sessions + 1):  # the first one warms the connection and the server's caches
            started = time.perf_counter()
            headers = await mcp_open(client, url)
            await mcp_call(client, url, headers, tool, {}, expect_ok=False)
            times.append(time.perf_counter() - started)
            if "Mcp-Session-Id" in headers:
                await client.delete(url, headers=headers)
    return median(times[1:]) * 1000


async def _github_tool(gateway: str) -> str:
    """A GitHub tool callable with `{}` (a GET without required arguments)."""
    async with httpx.AsyncClient(timeout=60, trust_env=False) as client:
        tools = (await client.get(f"{gateway}/agents/github/tools")).json()["data"]
    return next(t["name"] for t in tools if t["method"] == "GET" and not t["input_schema"].get("required"))


async def _peer_tool(url: str, wanted: str) -> str:
    """The peer's name for the same operation (FastMCP may name it differently)."""
    async with httpx.AsyncClient(timeout=120, trust_env=False) as client:
        headers = await mcp_open(client, url)
        answer = await client.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        text = answer.text
        data = next(json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")) \
            if answer.headers.get("content-type", "").startswith("text/event-stream") else answer.json()
    names = [t["name"] for t in data["result"]["tools"]]
    simple = wanted.replace("_", "").replace("-", "").lower()
    return next((n for n in names if n.replace("_", "").replace("-", "").replace("/", "").lower() == simple), names[0])


async def _measure(urls: dict[str, str | None], pids: dict[str, int], rounds: int, calls: int,
                   callers: int) -> dict[str, Any]:
    floors = [name for name in FLOOR if urls.get(name)]
    names = ["direct", *BARE, "http", "mcp", "mcp2026"] + (["peer"] if urls["peer"] else []) + floors
    # Most of the floor's variants only in the CPU count: a promise costs a few µs, under what a p50 resolves, and each
    # side more in the sequential turns leaves every process's caches colder at its next call (21 sides at a turn
    # put the bare proxy at 3x direct, not 1.6x). Timed: the whole floor, without its largest promise (the audit's
    # two commits), and without any.
    timed = [name for name in names if name not in floors or name in TIMED_FLOORS]
    crowded = [name for name in names if name not in floors or name == "floor"]
    failed: dict[str, str] = {}  # a side that fails (the peer under load) is reported, not fatal
    async with AsyncExitStack() as stack:
        async def client() -> httpx.AsyncClient:
            return await stack.enter_async_context(httpx.AsyncClient(timeout=60, trust_env=False))

        sides = {name: await _bind(name, await client(), urls) for name in names}
        crowds: dict[str, list[Call]] = {}
        for name in crowded:
            try:
                crowds[name] = [await _bind(name, await client(), urls) for _ in range(callers)]
            except (httpx.HTTPError, RuntimeError, AssertionError) as error:
                _failed(failed, name + "@concurrent", error)
        for name in names:  # warm-up: connections, caches, validators on every side and every caller
            for call in [sides[name]] * 50 + crowds.get(name, []):
                await call()
        p50: dict[str, list[float]] = {name: [] for name in names}
        throughput: dict[str, list[float]] = {name: [] for name in names}
        for _ in range(rounds):
            for name, value in (await _sequential({name: sides[name] for name in timed}, calls, failed)).items():
                p50[name].append(value)
            for name in crowded:
                if name + "@concurrent" not in failed:
                    throughput[name].append(await _failsafe(_concurrent(crowds[name], calls * 2),
                                                            name + "@concurrent", failed))
        cpu, cpu_threads = await _cpu_per_call(sides=sides, pids=pids, calls=calls * rounds)
    first: dict[str, float] = {}
    gateway = urls["gateway"] or ""
    if urls["github"]:
        tool = await _github_tool(gateway)
        first["ours"] = await _first_calls(f"{gateway}/mcp/github", tool, rounds * 2)
        if urls["peer_github"]:
            try:
                peer_tool = await _peer_tool(f"{urls['peer_github']}/mcp", tool)
                first["peer"] = await _first_calls(f"{urls['peer_github']}/mcp", peer_tool, rounds * 2)
            except (httpx.HTTPError, RuntimeError, KeyError) as error:
                first["peer"] = _failed({}, "peer's first calls", error)  # type: ignore[assignment]
    return {"p50_ms": {k: failed.get(k) or median(v) for k, v in p50.items() if v or k in failed},
            "throughput": {k: failed.get(k + "@concurrent") or median(v) for k, v in throughput.items() if v},
            "first_ms": first, "cpu_us": cpu, "cpu_threads_us": cpu_threads}


async def _cpu_per_call(sides: dict[str, Call], pids: dict[str, int], calls: int
                        ) -> tuple[dict[str, float], dict[str, dict[str, tuple[float, int]]]]:
    """CPU time (µs) the serving process spends per call, one door at a time (unlike wall time, this hardly moves
    when other work shares the machine), and the same split by thread: {side: {thread name: (µs, threads)}}."""
    serving = {"direct": "upstream", **{name: name for name in BARE}, "http": "gateway",
               "mcp": "gateway", "mcp2026": "gateway", "peer": "peer", **{name: name for name in FLOOR}}
    out: dict[str, float] = {}
    split: dict[str, dict[str, tuple[float, int]]] = {}
    for name, call in sides.items():
        pid = pids.get(serving[name])
        if pid is None:
            continue
        try:
            threads, before = thread_cpu_ns(pid), cpu_seconds(pid)
            for _ in range(calls):
                await call()
            spent = cpu_seconds(pid) - before
            by_thread = cpu_split(threads, thread_cpu_ns(pid), round(spent * 1e9))
        except (httpx.HTTPError, RuntimeError, AssertionError):
            continue
        out[name] = spent / calls * 1e6
        split[name] = {thread: (ns / calls / 1e3, count) for thread, (ns, count) in by_thread.items()}
    return out, split


async def _failsafe(work: Awaitable[float], name: str, failed: dict[str, str]) -> float:
    try:
        return await work
    except (httpx.HTTPError, RuntimeError, AssertionError) as error:
        _failed(failed, name, error)
        return float("nan")


def _failed(failed: dict[str, str], name: str, error: Exception) -> str:
    """Record a side's failure for its table cell, and say on stderr what it was."""
    failed[name] = f"failed: {type(error).__name__}"
    print(f"bench.calls: {name} failed: {type(error).__name__}: {str(error)[:300]}", file=sys.stderr)
    return failed[name]


def measure(rounds: int = 5, calls: int = 200, callers: int = 32, *, peer: bool = True,
            github: bool = True, floor: bool = False) -> dict[str, Any]:
    """Start every process, measure, stop them; the raw figures."""
    peer = peer and peer_installed()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        folder = Path(tmp)
        port = free_port()
        upstream = f"http://127.0.0.1:{port}"
        pids: dict[str, int] = {}
        pids["upstream"] = stack.enter_context(spawned(python_module("bench.upstream", "--port", str(port)),
                                                       upstream + "/"))[0].pid
        bares: dict[str, str | None] = {}
        for name, client in BARE.items():
            port = free_port()
            bares[name] = f"http://127.0.0.1:{port}"
            pids[name] = stack.enter_context(spawned(python_module(
                "bench.bare_proxy", "--port", str(port), "--upstream", upstream, "--client", client),
                f"{bares[name]}/"))[0].pid
        floors: dict[str, str | None] = {}
        for name, (_, options) in FLOOR.items() if floor else ():
            port = free_port()
            floors[name] = f"http://127.0.0.1:{port}"
            pids[name] = stack.enter_context(spawned(python_module(
                "bench.promise_floor", "--port", str(port), "--upstream", upstream, *options),
                f"{floors[name]}/healthz"))[0].pid
        write_project(folder, upstream, github=github and GITHUB.exists())
        env = {"GATEWAY_CACHE_DIR": str(folder / "cache")}
        port = free_port()
        gateway = f"http://127.0.0.1:{port}"
        command = python_module("gateway", "serve", "--port", str(port), "--specs", str(folder / "specs"),
                                "--agents", str(folder / "agents.yaml"))
        pids["gateway"] = stack.enter_context(spawned(command, gateway + "/healthz", env=env))[0].pid
        urls: dict[str, str | None] = {"upstream": upstream, **bares, **floors, "gateway": gateway, "peer": None,
                                       "peer_github": None,
                                       "github": gateway if github and GITHUB.exists() else None}
        if peer:
            port = free_port()
            urls["peer"] = f"http://127.0.0.1:{port}"
            pids["peer"] = stack.enter_context(spawned(python_module(
                "bench.peer", "--spec", str(folder / "specs" / "bench.json"), "--upstream", upstream,
                "--port", str(port), "--token", TOKEN), f"{urls['peer']}/mcp"))[0].pid
            if urls["github"]:
                port = free_port()
                urls["peer_github"] = f"http://127.0.0.1:{port}"
                stack.enter_context(spawned(python_module(
                    "bench.peer", "--spec", str(GITHUB), "--upstream", upstream, "--port", str(port)),
                    f"{urls['peer_github']}/mcp"))
        figures = asyncio.run(_measure(urls, pids, rounds, calls, callers))
    figures["peer"] = peer
    return figures


def _within(value: Any, limit: float | None, *, at_least: bool = False) -> bool | None:
    if not isinstance(value, float | int) or limit is None:
        return None
    return value >= limit if at_least else value <= limit


def _times(factor: float, floor: Any) -> float | None:
    """`factor` × a floor figure; None when the floor side failed (its cell says why)."""
    return factor * floor if isinstance(floor, float | int) else None


def rows(figures: dict[str, Any], callers: int = 32) -> list[Row]:
    p50, tput, first = figures["p50_ms"], figures["throughput"], figures["first_ms"]
    direct_p50, direct_tput = p50["direct"], tput["direct"]
    absent = None if figures["peer"] else "not run"
    out = [
        Row("one extra hop, bare pass-through proxy, sequential p50", "ms", p50["bare"], p50["direct"],
            "direct httpx", peer="—", note="uvicorn + the executor's client (pyreqwest) and nothing else "
                                         "(bench/bare_proxy.py): the floor of one extra loopback hop in Python"),
        Row("one extra hop, bare proxy on aiohttp, sequential p50", "ms", p50["bare_aiohttp"], p50["direct"],
            "direct httpx", peer="—", note="the same proxy sending through an aiohttp.ClientSession (a candidate)"),
        Row("one extra hop, bare proxy on httpx, sequential p50", "ms", p50["bare_httpx"], p50["direct"],
            "direct httpx", peer="—", note="the same proxy sending through an httpx.AsyncClient (httpcore)"),
        Row("one proxied call over HTTP, sequential p50", "ms", p50["http"], p50["direct"], "direct httpx",
            peer="n/a (MCP only)", goal="<= 1.8× direct", met=_within(p50["http"], _times(1.8, direct_p50))),
        *(Row(f"{callers} concurrent callers, bare proxy on {client}", "calls/s", tput[name], tput["direct"],
              "direct httpx", peer="—") for name, client in BARE.items()),
        Row(f"{callers} concurrent callers, HTTP door", "calls/s", tput["http"], tput["direct"], "direct httpx",
            peer="n/a (MCP only)", goal=">= 0.7× direct",
            met=_within(tput["http"], _times(0.7, direct_tput), at_least=True)),
        Row(f"{callers} concurrent callers, MCP door", "calls/s", tput["mcp"], tput["direct"], "direct httpx",
            peer=tput.get("peer", absent), goal=">= 0.5× direct",
            met=_within(tput["mcp"], _times(0.5, direct_tput), at_least=True)),
        Row("MCP tools/call over Streamable HTTP, p50", "ms", p50["mcp"], p50["direct"], "direct httpx",
            peer=p50.get("peer", absent), goal="<= 2.3× direct", met=_within(p50["mcp"], _times(2.3, direct_p50)),
            note="a 2025-06-18 session, as most MCP clients speak today: opened by the SDK's "
                 "StreamableHTTPSessionManager, its tools/call answered through the SDK's server kernel in the "
                 "request's own task (gateway/server/mcp/inline.py), JSON responses"),
        Row(f"{callers} concurrent callers, MCP door, stateless 2026-07-28", "calls/s", tput["mcp2026"],
            tput["direct"], "direct httpx", peer="—", goal=">= 0.5× direct",
            met=_within(tput["mcp2026"], _times(0.5, direct_tput), at_least=True)),
        Row("MCP tools/call, stateless 2026-07-28 protocol, p50", "ms", p50["mcp2026"], p50["direct"],
            "direct httpx", peer="—", goal="<= 2.5× direct", met=_within(p50["mcp2026"], _times(2.5, direct_p50)),
            note="no session, the envelope on every request: the official Python client's default; answered through "
                 "the SDK's envelope ladder and kernel in the request's task (gateway/server/mcp/stateless.py)"),
    ]
    cpu = figures.get("cpu_us", {})
    for name, client in BARE.items():
        if name in cpu and "direct" in cpu:
            out.append(Row(f"CPU per call in the serving process, bare proxy on {client}", "µs", cpu[name],
                           cpu["direct"], "upstream's own", peer="—"))
    if "http" in cpu and "direct" in cpu:
        out.append(Row("CPU per call in the serving process, HTTP door", "µs", cpu["http"], cpu["direct"],
                       "upstream's own", peer="n/a (MCP only)",
                       note="CPU of the gateway process per proxied call, every thread, to the nanosecond (its CPU "
                            "clock); the floor is the upstream process's CPU per direct call"))
    if "http" in cpu and "bare" in cpu:
        out.append(Row("CPU per call, HTTP door against the bare proxy", "µs", cpu["http"], cpu["bare"],
                       "bare proxy's", peer="—", goal="<= 1.6× bare",
                       met=_within(cpu["http"], _times(1.6, cpu["bare"])),
                       note="what the gateway's own work costs beyond one extra hop on the same server and client"))
    threads = figures.get("cpu_threads_us", {})
    if "http" in threads and "bare" in threads:
        ours, floor = _by_place(threads["http"]), _by_place(threads["bare"])
        for place, what in (("loop", "on the event loop's thread"), ("client", "on pyreqwest's threads"),
                            ("other", "on the other threads")):
            out.append(Row(f"CPU per call {what}, HTTP door against the bare proxy", "µs", ours[place],
                           floor[place], "bare proxy's", peer="—"))
        if "http" in cpu and "bare" in cpu:
            allowed = 1.6 * cpu["bare"] - ours["client"] - ours["other"]
            out.append(Row("CPU per call on the event loop's thread, HTTP door, against what the goal leaves it", "µs",
                           ours["loop"], allowed, "1.6× bare less ours off the loop", peer="—", goal="<= 1×",
                           met=_within(ours["loop"], allowed),
                           note="the CPU goal in the loop's terms: what its thread may spend once the gateway's "
                                "threads off the loop (the client's, the store's) are paid"))
    if "mcp" in cpu and "direct" in cpu:
        out.append(Row("CPU per call in the serving process, MCP door", "µs", cpu["mcp"], cpu["direct"],
                       "upstream's own", peer=cpu.get("peer", absent)))
    if "mcp2026" in cpu and "direct" in cpu:
        out.append(Row("CPU per call in the serving process, MCP door, stateless 2026-07-28", "µs", cpu["mcp2026"],
                       cpu["direct"], "upstream's own", peer="—"))
    if isinstance(p50.get("floor"), float):
        out += _floor_rows(figures, callers)
    if "ours" in first:
        out.append(Row("first call on a new MCP session (GitHub's tools)", "ms", first["ours"],
                       peer=first.get("peer", absent), goal="<= 20 ms", met=_within(first["ours"], 20),
                       note="initialize + initialized + tools/call, median of new sessions"))
    return out


def _floor_rows(figures: dict[str, Any], callers: int) -> list[Row]:
    """The floor of the promises against the goals, and the HTTP door against the floor."""
    p50, tput, cpu = figures["p50_ms"], figures["throughput"], figures.get("cpu_us", {})
    out = [Row("the floor of the promises, every promise, sequential p50", "ms", p50["floor"], p50["direct"],
               "direct httpx", peer="—", goal="<= 1.8× direct", met=_within(p50["floor"], _times(1.8, p50["direct"])),
               note="bench/promise_floor.py: every promise of the HTTP door kept once, plainly, on the same parts"),
           Row("the HTTP door against the floor of the promises, sequential p50", "ms", p50["http"], p50["floor"],
               "the floor's", peer="—")]
    for name, what in (("floor-audit", "all but the audit's two commits"), ("floor-none", "no promise"),
                       ("floor-audit-exclusive", "its audit's SQLite lock held (a measurement)"),
                       ("floor-audit-file", "its audit as appended lines (a measurement)")):
        if isinstance(p50.get(name), float):
            out.append(Row(f"the floor of the promises, {what}, sequential p50", "ms", p50[name], p50["direct"],
                           "direct httpx", peer="—", goal="<= 1.8× direct",
                           met=_within(p50[name], _times(1.8, p50["direct"]))))
    if "floor" in tput:
        out.append(Row(f"{callers} concurrent callers, the floor of the promises", "calls/s", tput["floor"],
                       tput["direct"], "direct httpx", peer="—", goal=">= 0.7× direct",
                       met=_within(tput["floor"], _times(0.7, tput["direct"]), at_least=True)))
    if "floor" in cpu and "bare" in cpu:
        out.append(Row("CPU per call, the floor of the promises against the bare proxy", "µs", cpu["floor"],
                       cpu["bare"], "bare proxy's", peer="—", goal="<= 1.6× bare",
                       met=_within(cpu["floor"], _times(1.6, cpu["bare"]))))
    if "floor" in cpu and "http" in cpu:
        out.append(Row("CPU per call, the HTTP door against the floor of the promises", "µs", cpu["http"],
                       cpu["floor"], "the floor's", peer="—"))
    return out


def floor_table(figures: dict[str, Any]) -> str:
    """Each side of the floor (and, for scale, direct, the bare proxy and the HTTP door): CPU per call by place, p50
    where it was timed, and what each promise costs: the whole floor's CPU less that of the floor without it."""
    p50, cpu, threads = figures["p50_ms"], figures.get("cpu_us", {}), figures.get("cpu_threads_us", {})
    whole, whole_loop = cpu.get("floor"), _by_place(threads["floor"])["loop"] if "floor" in threads else None
    lines = [["side", "leaves out", "p50 × direct", "CPU a call", "loop", "pyreqwest", "other", "cost: CPU a call",
              "cost: loop"]]
    for name in ["direct", "bare", "http", *FLOOR]:
        if name not in cpu or name not in threads:
            continue
        places, side = _by_place(threads[name]), FLOOR.get(name)
        off = side is not None and name != "floor"
        leaves = "—" if side is None else side[0]
        timed = f"{p50[name] / p50['direct']:.2f}×" if isinstance(p50.get(name), float) else "—"
        costs = [f"{whole - cpu[name]:+.1f} µs", f"{whole_loop - places['loop']:+.1f} µs"] \
            if off and whole is not None and whole_loop is not None else ["", ""]
        lines.append([name, leaves, timed, f"{cpu[name]:.1f} µs",
                      *(f"{places[place]:.1f} µs" for place in ("loop", "client", "other")), *costs])
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = ["| " + " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)) + " |" for line in lines]
    out.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return ("The floor of the promises (a promise's cost: the whole floor's CPU a call less the floor's without it; "
            "CPU by thread: the event loop's, pyreqwest's, the others'):\n" + "\n".join(out))


def _by_place(split: dict[str, tuple[float, int]]) -> dict[str, float]:
    """A side's CPU per call (µs) by where it ran: the event loop's thread, the client's, every other."""
    loop = split.get(LOOP, (0.0, 0))[0]
    client = split.get(CLIENT_THREADS, (0.0, 0))[0]
    return {"loop": loop, "client": client,
            "other": sum(us for name, (us, _) in split.items() if name not in (LOOP, CLIENT_THREADS))}


def thread_table(figures: dict[str, Any]) -> str:
    """Each serving process's CPU per call (µs, `_cpu_per_call`) by thread name, with how many threads of that name
    ran while the side was measured."""
    split: dict[str, dict[str, tuple[float, int]]] = figures.get("cpu_threads_us", {})
    names = sorted({name for side in split.values() for name in side}, key=lambda n: (n != LOOP, n))
    lines = [["side", "all threads", *names]]
    for side, by_name in split.items():
        cells = [f"{by_name[n][0]:.1f} µs ({by_name[n][1]})" if n in by_name else "—" for n in names]
        lines.append([side, f"{sum(us for us, _ in by_name.values()):.1f} µs", *cells])
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = ["| " + " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)) + " |" for line in lines]
    out.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "CPU per call by thread (the threads of that name that ran):\n" + "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200, help="sequential calls per side per round")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument("--no-github", action="store_true", help="skip the first-call rows on GitHub's spec")
    parser.add_argument("--floor", action="store_true",
                        help="also the floor of the promises (bench/promise_floor.py), whole and each promise left out")
    args = parser.parse_args()
    from bench.support import render_table

    figures = measure(args.rounds, args.calls, args.concurrency, peer=not args.no_peer, github=not args.no_github,
                      floor=args.floor)
    print(render_table(rows(figures, args.concurrency)))
    print()
    print(thread_table(figures))
    if args.floor:
        print()
        print(floor_table(figures))


if __name__ == "__main__":
    main()
