"""Hostile requests against a running `gateway serve`: how long each took, and how long `/healthz` waited meanwhile.

    python -m bench.stall [--only NAME ...]

Processes, all on 127.0.0.1: the upstream (bench/upstream.py), `gateway serve` (its own process: uvicorn with
httptools and uvloop, as operators run it) and this measuring client. While each hostile request runs, a thread
polls `GET /healthz` on a connection of its own every 10 ms; the table shows the hostile request's time and
status, the CPU time the gateway process spent meanwhile (/proc; the poller's requests included), and the slowest
`/healthz` answer seen meanwhile (the time any other caller would have waited). On a busy machine the wall-clock
figures wait for a core: run `baseline` beside them.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from bench.support import cpu_seconds, free_port, python_module, spawned

PATTERN = r"^(\w+\s?)*$"
SPEC: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "stall", "version": "1"},
    "servers": [{"url": "http://127.0.0.1:9"}],
    "paths": {
        "/numbers": {"post": {
            "operationId": "putNumbers",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["numbers"],
                "properties": {"numbers": {"type": "array", "items": {"type": "integer"}}}}}}},
            "responses": {"200": {"description": "ok"}}}},
        "/words": {"get": {
            "operationId": "findWords",
            "parameters": [{"name": "q", "in": "query", "required": True,
                            "schema": {"type": "string", "pattern": PATTERN}}],
            "responses": {"200": {"description": "ok"}}}},
        "/hooked": {"get": {"operationId": "hooked", "responses": {"200": {"description": "ok"}}}},
    },
}
AGENTS_YAML = """\
providers:
  openai: {{kind: openai, base_url: "http://127.0.0.1:9/v1", api_key: unused}}
apis:
  stall: {{base_url: "{upstream}"}}
agents:
  stall:
    model: openai/none
    tools: [{{api: stall}}]
    hooks:
      - {{on: before_tool_call, call: "stall_hooks:slow", tools: [hooked], timeout: 0.5, on_error: deny}}
"""
HOOKS = "import time\n\n\ndef slow(step):\n    time.sleep(3)\n"

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _chat(messages: list[Any]) -> Callable[[str], tuple[int, str]]:
    body = json.dumps({"model": "stall", "messages": messages}).encode()

    def send(gateway: str) -> tuple[int, str]:
        answer = httpx.post(f"{gateway}/v1/chat/completions", content=body, timeout=300,
                            headers={"content-type": "application/json"})
        return answer.status_code, answer.text
    return send


def _responses(items: list[Any]) -> Callable[[str], tuple[int, str]]:
    body = json.dumps({"model": "stall", "input": items}).encode()

    def send(gateway: str) -> tuple[int, str]:
        answer = httpx.post(f"{gateway}/v1/responses", content=body, timeout=300,
                            headers={"content-type": "application/json"})
        return answer.status_code, answer.text
    return send


def _direct(tool: str, arguments: dict[str, Any]) -> Callable[[str], tuple[int, str]]:
    def send(gateway: str) -> tuple[int, str]:
        answer = httpx.post(f"{gateway}/agents/stall/tools/{tool}", json=arguments, timeout=300)
        return answer.status_code, answer.text
    return send


def _mcp(tool: str, arguments: dict[str, Any]) -> Callable[[str], tuple[int, str]]:
    def send(gateway: str) -> tuple[int, str]:
        with httpx.Client(timeout=300) as client:
            url = f"{gateway}/mcp/stall"
            opened = client.post(url, headers=MCP_HEADERS, json={
                "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "1"}}})
            headers = {**MCP_HEADERS, "Mcp-Protocol-Version": "2025-06-18"}
            if "mcp-session-id" in opened.headers:
                headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
            client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            answer = client.post(url, headers=headers, json={
                "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
            return answer.status_code, answer.text
    return send


def _raw_headers(count: int, size: int) -> Callable[[str], tuple[int, str]]:
    """A GET with `count` headers of `size` bytes each, written in 64 KB pieces; the status line answered."""
    def send(gateway: str) -> tuple[int, str]:
        host, port = gateway.removeprefix("http://").split(":")
        head = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"".join(
            b"X-Pad-%d: %s\r\n" % (i, b"a" * size) for i in range(count)) + b"\r\n"
        with socket.create_connection((host, int(port)), timeout=300) as sock:
            try:
                for start in range(0, len(head), 65536):
                    sock.sendall(head[start:start + 65536])
            except OSError:
                pass  # the server answered and closed before reading it all
            try:
                answer = sock.recv(65536)
            except OSError as exc:
                return 0, f"no answer: {exc}"
        line = answer.split(b"\r\n", 1)[0].decode(errors="replace")
        return int(line.split()[1]) if line.startswith("HTTP/") else 0, answer.decode(errors="replace")
    return send


def _idle(gateway: str) -> tuple[int, str]:
    time.sleep(2)
    return 0, "(nothing sent: the /healthz figure is the machine's noise)"


ATTACKS: dict[str, tuple[str, Callable[[str], tuple[int, str]]]] = {
    "baseline": ("nothing (2 s idle)", _idle),
    "chat_60k_messages": ("chat, 60,000 tiny messages (1.8 MB)", _chat([{"role": "user", "content": "x"}] * 60_000)),
    "chat_60k_bad_messages": ("chat, 50,000 messages of a wrong shape",
                              _chat([{"role": "user", "content": "x", "name": 1}] * 50_000)),
    "chat_4096_last_bad": ("chat, 4,095 messages and a wrong 4,096th",
                           _chat([{"role": "user", "content": "x"}] * 4095 + [{"role": "user", "content": "x",
                                                                               "name": 1}])),
    "responses_60k_items": ("Responses, 60,000 input items",
                            _responses([{"role": "user", "content": "x"}] * 60_000)),
    "direct_100k_items": ("direct call, 100,000 wrong-typed array items", _direct("putNumbers",
                                                                                 {"numbers": ["x"] * 100_000})),
    "mcp_100k_items": ("MCP call, 100,000 wrong-typed array items", _mcp("putNumbers", {"numbers": ["x"] * 100_000})),
    "pattern_25": (f"direct call, pattern {PATTERN} and 25 characters", _direct("findWords", {"q": "a" * 24 + "!"})),
    "sync_hook": ("direct call, a sync hook sleeping 3 s (timeout 0.5 s)", _direct("hooked", {})),
    "headers_big": ("1 header of 128 MB", _raw_headers(1, 128 * 1024 * 1024)),
    "headers_many": ("200,000 headers of 10 bytes", _raw_headers(200_000, 10)),
}


_POLLER = """
import http.client, select, sys, time
host, port = sys.argv[1], int(sys.argv[2])
connection = http.client.HTTPConnection(host, port, timeout=300)
print("ready", flush=True)
while True:  # until stdin closes, after the poll in flight has answered
    started = time.perf_counter()
    connection.request("GET", "/healthz")
    connection.getresponse().read()
    print(time.perf_counter() - started, flush=True)
    if select.select([sys.stdin], [], [], 0.01)[0] and not sys.stdin.read(1):
        break
"""


class HealthPoller:
    """Polls `/healthz` every 10 ms from a process of its own (in this one, sending a 2 MB body would hold the
    poller's GIL and count as the gateway's delay); the latencies of the answers."""

    def __init__(self, gateway: str) -> None:
        host, port = gateway.removeprefix("http://").split(":")
        self._process = subprocess.Popen([sys.executable, "-c", _POLLER, host, port], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, text=True)
        self.latencies: list[float] = []

    def __enter__(self) -> HealthPoller:
        assert self._process.stdout is not None
        self._process.stdout.readline()
        time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        out, _ = self._process.communicate(timeout=310)  # closes stdin: the poll in flight answers, then it stops
        self.latencies = [float(line) for line in out.split()]


def measure(only: list[str]) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        folder = Path(tmp)
        port = free_port()
        upstream = f"http://127.0.0.1:{port}"
        stack.enter_context(spawned(python_module("bench.upstream", "--port", str(port)), upstream + "/"))
        (folder / "specs").mkdir()
        (folder / "specs" / "stall.json").write_text(json.dumps(SPEC))
        (folder / "agents.yaml").write_text(AGENTS_YAML.format(upstream=upstream))
        (folder / "stall_hooks.py").write_text(HOOKS)
        port = free_port()
        gateway = f"http://127.0.0.1:{port}"
        command = python_module("gateway", "serve", "--port", str(port), "--specs", str(folder / "specs"),
                                "--agents", str(folder / "agents.yaml"), "--no-access-log")
        pid = stack.enter_context(spawned(command, gateway + "/healthz", env={
            "GATEWAY_CACHE_DIR": str(folder / "cache"), "PYTHONPATH": str(folder)}))[0].pid
        for name, (what, attack) in ATTACKS.items():
            if only and name not in only:
                continue
            with HealthPoller(gateway) as poller:
                cpu = cpu_seconds(pid)
                started = time.perf_counter()
                status, text = attack(gateway)
                took = time.perf_counter() - started
                cpu = cpu_seconds(pid) - cpu
            slowest = max(poller.latencies, default=0.0) * 1000
            rows.append({"name": name, "what": what, "status": status, "seconds": took, "gateway_cpu_seconds": cpu,
                         "healthz_max_ms": slowest, "healthz_answers": len(poller.latencies),
                         "answer": text[:160].replace("\n", " ")})
            print(f"{name:24} {status:4} {took:8.2f} s  cpu {cpu:6.2f} s  /healthz max {slowest:8.1f} ms "
                  f"({len(poller.latencies)} answers)  {rows[-1]['answer'][:100]}", file=sys.stderr)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[], choices=sorted(ATTACKS))
    parser.add_argument("--json", action="store_true", help="the rows as JSON on stdout")
    args = parser.parse_args()
    rows = measure(args.only)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("| attack | status | its time (s) | gateway CPU (s) | slowest /healthz meanwhile (ms) |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['what']} | {row['status']} | {row['seconds']:.2f} | {row['gateway_cpu_seconds']:.2f} | "
              f"{row['healthz_max_ms']:.0f} |")


if __name__ == "__main__":
    main()
