"""The cost of tracing: server CPU per direct tool call with OpenTelemetry off and on, side by side.

    python -m bench.tracing [--rounds 7] [--calls 300]

Two `gateway serve` processes from this tree on the same project and upstream: "off" without OTEL_* variables
(no tracer provider: the span helpers open nothing), "on" exporting every span over OTLP/HTTP (the SDK's batch
processor) to a sink in this process that answers 200 and drops what it gets. Rounds alternate the two, so the
machine's drift hits both alike; a figure is the median over rounds, the ratio on/off is what tracing costs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import threading
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.ab import _round
from bench.support import cpu_seconds, free_port, python_module, spawned, write_project


class _Sink(BaseHTTPRequestHandler):
    exports = 0
    received = 0

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        _Sink.exports += 1
        _Sink.received += len(body)
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    tree = Path(__file__).resolve().parents[1]
    sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as folder, ExitStack() as stack:
        upstream_port = free_port()
        upstream = f"http://127.0.0.1:{upstream_port}"
        stack.enter_context(spawned(python_module("bench.upstream", "--port", str(upstream_port)), upstream))
        sides = {}
        for name in ("off", "on"):
            project = write_project(Path(folder) / name, upstream, github=False)
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            command = python_module("gateway", "serve", "--port", str(port), "--specs", str(project / "specs"),
                                    "--agents", str(project / "agents.yaml"))
            env = {"PYTHONPATH": str(tree), "GATEWAY_CACHE_DIR": str(Path(folder) / f"cache-{name}")}
            if name == "on":
                env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{sink.server_address[1]}"
            process, _ = stack.enter_context(spawned(command, f"{url}/healthz", env=env, cwd=tree))
            sides[name] = (url, process)
        cpu: dict[str, list[float]] = {"off": [], "on": []}
        p50: dict[str, list[float]] = {"off": [], "on": []}
        for url, _ in sides.values():
            asyncio.run(_round(url, 50))  # warm-up
        for index in range(args.rounds):
            for name in (("off", "on") if index % 2 == 0 else ("on", "off")):
                url, process = sides[name]
                before = cpu_seconds(process.pid)
                timings = asyncio.run(_round(url, args.calls))
                cpu[name].append((cpu_seconds(process.pid) - before) / args.calls * 1e6)
                p50[name].append(statistics.median(timings) * 1e6)
    sink.shutdown()
    if not _Sink.exports:
        raise RuntimeError("the traced gateway exported nothing: is the otel extra installed?")
    off, on = statistics.median(cpu["off"]), statistics.median(cpu["on"])
    print(f"direct door, tracing off vs on, {args.rounds} rounds x {args.calls} calls (medians over rounds)")
    print(f"  server CPU off {off:8.0f} us   on {on:8.0f} us   on/off {on / off:.2f}  (per call)")
    p_off, p_on = statistics.median(p50["off"]), statistics.median(p50["on"])
    print(f"  p50        off {p_off:8.0f} us   on {p_on:8.0f} us   on/off {p_on / p_off:.2f}")
    print(f"  the sink got {_Sink.exports} OTLP export requests, {_Sink.received / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
