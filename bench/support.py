"""What the benchmarks share: processes on 127.0.0.1, the bench spec, the upstream, a raw MCP client, a table.

Every server a benchmark talks to runs in its own process (upstream, `gateway serve`, the FastMCP peer), so
the measuring client never shares a GIL with what it measures. Every address is 127.0.0.1.
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("BENCH_CORPUS") or ROOT.parent / "shared" / "corpus")  # the real specs, read in place
GITHUB = CORPUS / "github" / "api.github.com.json"
STRIPE = CORPUS / "apis-guru" / "stripe.com.json"
GRAPH = CORPUS / "apis-guru" / "microsoft.com" / "graph.json"

TOKEN = "bench-token-123"
# The one operation the call benchmarks make: path, query (exploded and not), a header, a JSON answer.
CALL_ARGS = {"owner": "octo", "repo": "hello world", "state": "open", "labels": ["bug", "ui"], "per_page": 30,
             "X-Request-Id": "bench"}
DIRECT_PATH = "/repos/octo/hello%20world/issues?state=open&labels=bug,ui&per_page=30"
DIRECT_HEADERS = {"Authorization": f"Bearer {TOKEN}", "X-Request-Id": "bench", "Accept": "application/json"}

_ITEM = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
                                          "tags": {"type": "array", "items": {"type": "string"}}}}
BENCH_SPEC: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "bench", "version": "1"},
    "servers": [{"url": "http://127.0.0.1:9"}],
    "paths": {"/repos/{owner}/{repo}/issues": {"get": {
        "operationId": "listIssues",
        "summary": "List a repository's issues.",
        "parameters": [
            {"name": "owner", "in": "path", "required": True, "schema": {"type": "string"}},
            {"name": "repo", "in": "path", "required": True, "schema": {"type": "string"}},
            {"name": "state", "in": "query", "schema": {"type": "string", "enum": ["open", "closed", "all"]}},
            {"name": "labels", "in": "query", "explode": False,
             "schema": {"type": "array", "items": {"type": "string"}}},
            {"name": "per_page", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100}},
            {"name": "X-Request-Id", "in": "header", "schema": {"type": "string"}},
        ],
        "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
            "type": "object", "properties": {"items": {"type": "array", "items": _ITEM}}}}}}},
    }}},
}

AGENTS_YAML = """\
providers:
  openai: {{kind: openai, base_url: "http://127.0.0.1:9/v1", api_key: unused}}
apis:
  bench: {{base_url: "{upstream}", auth: {{type: bearer, token: {token}}}}}
{github_api}agents:
  bench:
    model: openai/none
    tools: [{{api: bench}}]
{github_agent}"""
GITHUB_API = '  github: {{base_url: "{upstream}"}}\n'
GITHUB_AGENT = "  github:\n    model: openai/none\n    tools: [{api: github}]\n"


def write_project(folder: Path, upstream: str, *, github: bool) -> Path:
    """specs/ (the bench spec, and GitHub's spec linked in place when `github`) and agents.yaml in `folder`."""
    specs = folder / "specs"
    specs.mkdir(parents=True, exist_ok=True)
    (specs / "bench.json").write_text(json.dumps(BENCH_SPEC))
    if github:
        (specs / "github.json").symlink_to(GITHUB)  # read in place: the corpus is never copied
    (folder / "agents.yaml").write_text(AGENTS_YAML.format(
        upstream=upstream, token=TOKEN, github_api=GITHUB_API.format(upstream=upstream) if github else "",
        github_agent=GITHUB_AGENT if github else ""))
    return folder


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(url: str, process: subprocess.Popen[bytes], *, timeout: float = 120, poll: float = 0.01,
               log: IO[bytes] | None = None) -> float:
    """Poll `url` until it answers below 500; the time it took. Raises when the process dies first."""
    started = time.perf_counter()
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2, trust_env=False) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                err = ""
                if log is not None:
                    log.seek(0)
                    err = log.read().decode(errors="replace")[-800:]
                raise RuntimeError(f"{process.args!r} exited with {process.returncode}: {err}")
            try:
                if client.get(url).status_code < 500:
                    return time.perf_counter() - started
            except httpx.HTTPError:
                pass
            time.sleep(poll)
    raise RuntimeError(f"{url} was not ready within {timeout:g} s")


@contextmanager
def spawned(command: Sequence[str], ready_url: str, *, env: dict[str, str] | None = None,
            cwd: Path = ROOT, ready_within: float = 120) -> Iterator[tuple[subprocess.Popen[bytes], float]]:
    """A server process, yielded once `ready_url` answers (within `ready_within` seconds), with its ready time;
    terminated afterwards."""
    # stderr goes to a file, not a pipe: a chatty server would block once a pipe's buffer is full.
    log = tempfile.TemporaryFile()
    process = subprocess.Popen(list(command), cwd=cwd, env={**os.environ, **(env or {})},
                               stdout=subprocess.DEVNULL, stderr=log)
    try:
        yield process, wait_ready(ready_url, process, timeout=ready_within, log=log)
    finally:
        log.close()
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


DOOR = "/agents/bench/tools/listIssues"
"""The direct call every instruction and system-call count makes."""


@dataclass(frozen=True)
class Side:
    """How to start one side of a direct-call count: `gateway serve` from a tree, or the bare proxy (the floor)."""

    command: list[str]
    ready: str
    path: str
    post: bool
    cwd: Path
    env: dict[str, str]
    headers: dict[str, str] = field(default_factory=dict)
    """What each call sends besides its body (the floor of the promises asks for its client's key)."""


def side(tree: Path | None, upstream: str, folder: Path, port: int) -> Side:
    """`gateway serve` from `tree` on the bench project (its own cache in `folder`), or (`tree` None) the bare proxy,
    on `port`, in front of `upstream`."""
    url = f"http://127.0.0.1:{port}"
    if tree is None:
        return Side(python_module("bench.bare_proxy", "--port", str(port), "--upstream", upstream), url + "/",
                    DIRECT_PATH, False, ROOT, {})
    project = write_project(folder / f"project-{port}", upstream, github=False)
    return Side(python_module("gateway", "serve", "--port", str(port), "--specs", str(project / "specs"),
                              "--agents", str(project / "agents.yaml")),
                f"{url}/healthz", DOOR, True, tree.resolve(),
                {"PYTHONPATH": str(tree.resolve()), "GATEWAY_CACHE_DIR": str(folder / f"cache-{port}")})


def sides(trees: Sequence[Path], bare: bool) -> list[tuple[str, Path | None]]:
    """This tree, the other `trees`, and the bare proxy when `bare`: (name, tree or None)."""
    named: list[tuple[str, Path | None]] = [(str(tree), tree) for tree in [Path("."), *trees]]
    return [*named, ("bare proxy", None)] if bare else named


def side_arguments(doc: str | None, calls: int, *, doors: bool = False, floor: bool = False) -> argparse.Namespace:
    """The command line of a direct-call count over sides: `--tree` (repeated), `--bare`, `--calls` (and with
    `doors`, `--door http|mcp|mcp2026`; with `floor`, `--floor` and `--floor-each`: bench/promise_floor.py)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, action="append", default=[], help="another source tree to compare")
    parser.add_argument("--bare", action="store_true", help="also the bare proxy (the floor)")
    parser.add_argument("--calls", type=int, default=calls)
    if floor:
        parser.add_argument("--floor", action="store_true", help="also the floor of the promises")
        parser.add_argument("--floor-each", action="store_true",
                            help="also the floor with each promise left out in turn, and with none")
    if doors:
        parser.add_argument("--door", choices=("http", "mcp", "mcp2026"), default="http",
                            help="direct POSTs, tools/calls of one MCP session (2025-06-18), or stateless (2026-07-28)")
    return parser.parse_args()


def bench_upstream(stack: ExitStack) -> str:
    """The bench's upstream (bench/upstream.py) in its own process for as long as `stack`; its URL."""
    port = free_port()
    upstream = f"http://127.0.0.1:{port}"
    stack.enter_context(spawned(python_module("bench.upstream", "--port", str(port)), upstream))
    return upstream


def rss_mb(pid: int) -> float:
    """Resident memory of a live process, from /proc (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """CPU time a live process has used so far, every thread's (ended ones too), to the nanosecond: the kernel's
    CPU clock of the process (`clock_getcpuclockid(3)`, Linux; any user may read another process's). /proc's
    `stat` counts it in clock ticks (10 ms: 17 µs a call over 600 calls), too coarse for a ratio of two processes."""
    return time.clock_gettime_ns(_process_clock(pid)) / 1e9


_LIBC = ctypes.CDLL(None)  # the C library the interpreter runs on (`clock_getcpuclockid` answers its error itself)


def _process_clock(pid: int) -> int:
    clock = ctypes.c_int()
    failed = _LIBC.clock_getcpuclockid(pid, ctypes.byref(clock))
    if failed:
        raise OSError(failed, f"clock_getcpuclockid({pid}): {os.strerror(failed)}")
    return clock.value


CLIENT_THREADS = "pyreqwest"
"""The name pyreqwest gives the threads of its runtime (the executor's client: connections, TLS, the wire)."""
LOOP = "event loop"
"""The serving process's main thread, where uvicorn runs the event loop (and with it all the app's Python)."""


def thread_cpu_ns(pid: int) -> dict[int, tuple[str, int]]:
    """Each live thread of a process: its name (`comm`) and its time on a CPU so far in ns (the first field of the
    kernel's `/proc/PID/task/TID/schedstat`; public, no privileges). The main thread is named `LOOP`; Python 3.11
    does not name its threads, so every other Python thread is `python`."""
    out: dict[int, tuple[str, int]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ns = int((task / "schedstat").read_text().split()[0])
            name = (task / "comm").read_text().strip()
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended between the listing and the read
        tid = int(task.name)
        out[tid] = (LOOP if tid == pid else name, ns)
    return out


def thread_ticks(pid: int) -> dict[int, tuple[int, int]]:
    """Each live thread's user and system CPU so far, in clock ticks (`/proc/PID/task/TID/stat`'s utime and stime):
    the kernel samples which mode a thread is in at each tick, so over a few hundred ticks their ratio says what
    share of the thread's exact time (`thread_cpu_ns`) was spent in the kernel (system calls: sockets, files,
    locks), which callgrind's instruction counts do not see."""
    out: dict[int, tuple[int, int]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        out[int(task.name)] = (int(fields[11]), int(fields[12]))
    return out


def cpu_split(before: dict[int, tuple[str, int]], after: dict[int, tuple[str, int]], total_ns: int
              ) -> dict[str, tuple[int, int]]:
    """The CPU (ns) a process spent between two `thread_cpu_ns` readings, by thread name: {name: (ns, threads that
    ran)}. A thread that ended in between is gone from /proc: `ended threads` is what the process clock's `total_ns`
    holds beyond the live threads' sum."""
    split: dict[str, tuple[int, int]] = {}
    for tid, (name, ns) in after.items():
        spent = ns - before.get(tid, (name, 0))[1]
        if spent:
            ran, threads = split.get(name, (0, 0))
            split[name] = (ran + spent, threads + 1)
    ended = total_ns - sum(ns for ns, _ in split.values())
    if ended > 1000:  # beyond the few ns between reading the clock and the threads
        split["ended threads"] = (ended, 0)
    return split


def python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def peer_installed() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import fastmcp"], capture_output=True)
    return probe.returncode == 0


# --- a raw MCP client: one httpx POST per message, so the client's own cost equals the direct call's ---

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
PROTOCOL = "2025-06-18"
_ids = itertools.count(1)


def _mcp_payload(response: httpx.Response) -> dict[str, Any]:
    if response.status_code >= 400:
        raise RuntimeError(f"MCP HTTP {response.status_code}: {response.text[:300]}")
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                message = json.loads(line[5:])
                if "id" in message:
                    return message  # type: ignore[no-any-return]
        raise RuntimeError(f"no JSON-RPC answer in the event stream: {response.text[:300]}")
    return response.json()  # type: ignore[no-any-return]


async def mcp_open(client: httpx.AsyncClient, url: str) -> dict[str, str]:
    """initialize + notifications/initialized; the headers every later message of the session carries."""
    response = await client.post(url, headers=MCP_HEADERS, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
    answer = _mcp_payload(response)
    if "error" in answer:
        raise RuntimeError(f"MCP initialize failed: {answer['error']}")
    headers = {**MCP_HEADERS, "Mcp-Protocol-Version": answer["result"].get("protocolVersion", PROTOCOL)}
    if "mcp-session-id" in response.headers:
        headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
    done = await client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    if done.status_code >= 400:
        raise RuntimeError(f"MCP initialized notification: HTTP {done.status_code}")
    return headers


async def mcp_call(client: httpx.AsyncClient, url: str, headers: dict[str, str], tool: str,
                   arguments: dict[str, Any], *, expect_ok: bool = True) -> dict[str, Any]:
    # Unique ids: a session matches answers to requests by id, and concurrent callers share the session.
    answer = _mcp_payload(await client.post(url, headers=headers, json={
        "jsonrpc": "2.0", "id": next(_ids), "method": "tools/call", "params": {"name": tool, "arguments": arguments}}))
    if "error" in answer:
        raise RuntimeError(f"MCP tools/call {tool} failed: {answer['error']}")
    if expect_ok and answer["result"].get("isError"):
        raise RuntimeError(f"MCP tools/call {tool} answered an error: {str(answer['result'])[:300]}")
    return answer["result"]  # type: ignore[no-any-return]


STATELESS_PROTOCOL = "2026-07-28"
STATELESS_ENVELOPE = {"io.modelcontextprotocol/protocolVersion": STATELESS_PROTOCOL,
             "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
             "io.modelcontextprotocol/clientCapabilities": {}}


async def mcp_stateless_call(client: httpx.AsyncClient, url: str, tool: str, arguments: dict[str, Any]) -> None:
    """One `tools/call` in the stateless 2026-07-28 protocol (no session; the envelope and routing headers on
    every request), as the official Python client sends it in its default mode."""
    headers = {**MCP_HEADERS, "Mcp-Protocol-Version": STATELESS_PROTOCOL, "Mcp-Method": "tools/call", "Mcp-Name": tool}
    answer = _mcp_payload(await client.post(url, headers=headers, json={
        "jsonrpc": "2.0", "id": next(_ids), "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": STATELESS_ENVELOPE}}))
    if "error" in answer or answer["result"].get("isError"):
        raise RuntimeError(f"MCP tools/call {tool} failed: {str(answer)[:300]}")


# --- the table ---

@dataclass
class Row:
    """One line of the table: our figure beside the floor (and the peer) measured in the same run."""

    work: str
    unit: str
    ours: float | None
    floor: float | str | None = None
    floor_name: str = ""
    peer: float | str | None = None
    goal: str = ""
    met: bool | None = None
    note: str = ""


def clocked(step: Callable[..., object], *given: Any) -> float:
    """Microseconds of this thread's CPU that `step(*given)` took: a thread-CPU clock, so the teammates' work on the
    shared cores and this process's other threads do not count (bench/search_reach.py, bench/search_stay.py)."""
    began = time.thread_time_ns()
    step(*given)
    return (time.thread_time_ns() - began) / 1000


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def _fmt(value: float | str | None, unit: str) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "ms":
        return f"{value:.3f} ms" if value < 10 else f"{value:.1f} ms"
    if unit in ("MB", "µs"):
        return f"{value:.0f} {unit}"
    return f"{value:,.0f} {unit}"


def _ratio(value: float | str | None, floor: float | str | None) -> str:
    if not isinstance(value, float | int) or not isinstance(floor, float | int) or not floor:
        return "—"
    return f"{value / floor:.2f}×"


def render_table(rows: Sequence[Row]) -> str:
    header = ["work", "floor", "ours", "ours/floor", "peer", "peer/floor", "goal", "met"]
    lines = [header]
    for row in rows:
        floor = f"{row.floor_name} {_fmt(row.floor, row.unit)}".strip() if row.floor is not None else "—"
        met = "—" if row.met is None else ("yes" if row.met else "NO")
        lines.append([row.work, floor, _fmt(row.ours, row.unit), _ratio(row.ours, row.floor),
                      _fmt(row.peer, row.unit), _ratio(row.peer, row.floor), row.goal, met])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = ["| " + " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)) + " |" for line in lines]
    out.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    notes = [f"- {row.work}: {row.note}" for row in rows if row.note]
    return "\n".join(out + ([""] + notes if notes else []))
