"""Per-call overhead of the gateway's executor beside a direct httpx call to the same local upstream.

    python bench/call.py [--calls 400]

Both sides use one pooled httpx.AsyncClient against a uvicorn upstream on 127.0.0.1 that answers a small
JSON document. The executor additionally validates the arguments, serializes them from the binding,
injects a bearer token, reads the body under the cap, parses, redacts and shapes it. Printed: medians (ms)
of each side, the overhead and the ratio, plus the median of the executor's in-process stages alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import threading
import time

import httpx
import uvicorn

from gateway.catalog import Argument, Catalog, Tool
from gateway.config.credentials import BearerAuth
from gateway.config.model import ApiConfig, Manifest
from gateway.execution.arguments import validate_arguments
from gateway.execution.executor import Executor
from gateway.http.request import build_request

PAYLOAD = json.dumps({"items": [{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(20)]}).encode()


async def app(scope, receive, send):  # type: ignore[no-untyped-def]
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(PAYLOAD)).encode())]})
    await send({"type": "http.response.body", "body": PAYLOAD})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_upstream() -> tuple[uvicorn.Server, str]:
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    return server, f"http://127.0.0.1:{port}"


def _tool() -> Tool:
    schema = {
        "type": "object",
        "properties": {
            "owner": {"type": "string"}, "repo": {"type": "string"},
            "state": {"type": "string", "enum": ["open", "closed", "all"]},
            "labels": {"type": "array", "items": {"type": "string"}},
            "per_page": {"type": "integer", "minimum": 1, "maximum": 100},
            "X-Request-Id": {"type": "string"},
        },
        "required": ["owner", "repo"],
    }
    return Tool(
        name="listIssues", api="bench", operation_id="listIssues", method="GET", path="/repos/{owner}/{repo}/issues",
        description="", input_schema=schema, response_media_types=("application/json",),
        arguments=(
            Argument(name="owner", location="path", wire_name="owner", required=True, style="simple"),
            Argument(name="repo", location="path", wire_name="repo", required=True, style="simple"),
            Argument(name="state", location="query", wire_name="state", style="form", explode=True),
            Argument(name="labels", location="query", wire_name="labels", style="form", explode=False),
            Argument(name="per_page", location="query", wire_name="per_page", style="form", explode=True),
            Argument(name="X-Request-Id", location="header", wire_name="X-Request-Id", style="simple"),
        ),
    )


ARGS = {"owner": "octo", "repo": "hello world", "state": "open", "labels": ["bug", "ui"], "per_page": 30,
        "X-Request-Id": "bench"}


async def _measure(calls: int, base: str) -> dict[str, float]:
    tool = _tool()
    manifest = Manifest(apis={"bench": ApiConfig(name="bench", base_url=base,
                                                 auth=[BearerAuth(token="bench-token-123")])})
    executor = Executor(manifest, Catalog([tool]))
    direct = httpx.AsyncClient()
    url = f"{base}/repos/octo/hello%20world/issues?state=open&labels=bug,ui&per_page=30"
    headers = {"Authorization": "Bearer bench-token-123", "X-Request-Id": "bench", "Accept": "application/json"}

    async def one_direct() -> None:
        response = await direct.get(url, headers=headers)
        response.json()

    async def one_gateway() -> None:
        result = await executor.execute(tool, ARGS)
        assert result.ok, result.error

    for _ in range(30):  # warm both pools and the validator cache
        await one_direct()
        await one_gateway()
    direct_times: list[float] = []
    gateway_times: list[float] = []
    for _ in range(calls):  # interleaved so drift in the machine's load hits both sides alike
        started = time.perf_counter()
        await one_direct()
        direct_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        await one_gateway()
        gateway_times.append(time.perf_counter() - started)
    stage_times = []
    for _ in range(calls):
        started = time.perf_counter()
        validate_arguments(tool, ARGS)
        build_request(tool, ARGS, manifest.api("bench"), reserved={("header", "authorization")})
        stage_times.append(time.perf_counter() - started)
    await executor.aclose()
    await direct.aclose()
    d, g = statistics.median(direct_times) * 1000, statistics.median(gateway_times) * 1000
    return {"calls": calls, "direct_median_ms": round(d, 3), "gateway_median_ms": round(g, 3),
            "overhead_ms": round(g - d, 3), "ratio": round(g / d, 2),
            "validate_and_build_median_ms": round(statistics.median(stage_times) * 1000, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    options = parser.parse_args()
    server, base = _start_upstream()
    try:
        print(json.dumps(asyncio.run(_measure(options.calls, base)), indent=2))
    finally:
        server.should_exit = True


if __name__ == "__main__":
    main()
