"""MCP: what a new session costs with a large agent, over Streamable HTTP on a running gateway.

An agent sees every operation of a large spec (by default the corpus's api.github.com.json, ~1000 tools;
read in place, never copied). For several fresh sessions in a row the script times: open the session
(handshake or discovery), `tools/list`, and the first `tools/call` (answered by a local upstream). The
first listing after start renders the agent's tools; every later session reuses that rendering, so
its cost should not grow with the catalog beyond sending the list. Both protocol eras are measured.
Then one client opens `--flood` sessions as fast as it can (2025 protocol): past its cap
(`gateway.mcp.max_sessions_per_client`) it is refused with 429 while the gateway's memory stays put.

    python bench/mcp_session.py [--spec PATH] [--sessions 5] [--flood 300]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "server")]

import httpx  # noqa: E402
from mcp import Client  # noqa: E402
from recording_server import RecordingServer, Reply  # noqa: E402
from server_support import running  # noqa: E402

from bench.support import rss_mb  # noqa: E402
from gateway.runtime import RuntimeHolder, load_runtime  # noqa: E402
from gateway.server import create_app  # noqa: E402

CORPUS_GITHUB = ROOT.parent / "shared" / "corpus" / "github" / "api.github.com.json"

AGENTS = """\
providers:
  openai: {{kind: openai, base_url: "http://127.0.0.1:9/v1", api_key: unused}}
apis:
  big: {{base_url: "{upstream}"}}
agents:
  everything:
    model: openai/none
    tools: [{{api: big}}]
"""


async def _session(url: str, mode: str, tool: str, arguments: dict) -> tuple[float, float, float, int]:
    started = time.perf_counter()
    async with Client(url, mode=mode) as client:
        opened = time.perf_counter()
        tools, cursor = [], None
        while True:  # a large agent's listing comes in pages
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        listed = time.perf_counter()
        await client.call_tool(tool, arguments)
        called = time.perf_counter()
    return opened - started, listed - opened, called - listed, len(tools)


async def _measure(url: str, sessions: int, tool: str, arguments: dict) -> None:
    for mode in ("legacy", "auto"):
        rows = [await _session(url, mode, tool, arguments) for _ in range(sessions)]
        first, rest = rows[0], rows[1:]
        print(f"{mode:6}  tools={first[3]}  first session: open {first[0] * 1000:.1f} ms, "
              f"list {first[1] * 1000:.1f} ms, call {first[2] * 1000:.1f} ms")
        if rest:
            print(f"{'':6}  later sessions (median of {len(rest)}): "
                  f"open {statistics.median(r[0] for r in rest) * 1000:.1f} ms, "
                  f"list {statistics.median(r[1] for r in rest) * 1000:.1f} ms, "
                  f"call {statistics.median(r[2] for r in rest) * 1000:.1f} ms")


async def _flood(url: str, count: int) -> None:
    """One client opens `count` sessions without ending any: how many are opened, how many refused."""
    statuses: dict[int, int] = {}
    before = rss_mb(os.getpid())
    started = time.perf_counter()
    async with httpx.AsyncClient(timeout=60, trust_env=False) as client:
        for _ in range(count):
            response = await client.post(url, headers={"accept": "application/json, text/event-stream"}, json={
                "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}}})
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
    took = time.perf_counter() - started
    print(f"flood   {count} initialize from one client in {took:.1f} s: "
          f"{', '.join(f'{n}x {status}' for status, n in sorted(statuses.items()))}; "
          f"process RSS {before:.0f} -> {rss_mb(os.getpid()):.0f} MB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=CORPUS_GITHUB)
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--flood", type=int, default=300, help="sessions one client tries to open (0: skip)")
    args = parser.parse_args()
    if not args.spec.exists():
        print(f"no spec at {args.spec}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as folder, RecordingServer() as upstream:
        specs = Path(folder) / "specs"
        specs.mkdir()
        shutil.copy(args.spec, specs / f"big{args.spec.suffix}")  # into a temporary folder, deleted after the run
        agents = Path(folder) / "agents.yaml"
        agents.write_text(AGENTS.format(upstream=upstream.url))
        started = time.perf_counter()
        runtime = load_runtime(specs, agents)
        print(f"runtime: {len(runtime.catalog)} tools in {time.perf_counter() - started:.2f} s (cache allowed)")
        toolset = runtime.toolset("everything")
        tool = next(t for t in toolset if not t.input_schema.get("required"))  # callable with {}
        upstream.route("/", Reply(200, {}))
        app = create_app(RuntimeHolder(runtime), watch=False)
        with running(app) as url:
            asyncio.run(_measure(f"{url}/mcp/everything", args.sessions, tool.name, {}))
            if args.flood:
                asyncio.run(_flood(f"{url}/mcp/everything", args.flood))
    return 0


if __name__ == "__main__":
    sys.exit(main())
