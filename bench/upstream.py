"""The upstream API of the call benchmarks: a minimal ASGI app on 127.0.0.1, in its own process.

    python -m bench.upstream --port 9000

`/repos/...` answers a ~1.2 KB JSON document (the bench spec's answer); any other path answers `{}`. `--delay S`:
each answer waits S seconds first (a slow api, for benchmarks of waiting for a slot).
"""

from __future__ import annotations

import argparse
import asyncio
import json

import uvicorn

from gateway.server.run import KEEP_ALIVE_SECONDS  # clients never find their connection closing

PAYLOAD = json.dumps({"items": [{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(20)]}).encode()
EMPTY = b"{}"
DELAY = 0.0
"""Seconds each answer waits (`--delay`)."""


async def app(scope, receive, send):  # type: ignore[no-untyped-def]
    if scope["type"] != "http":
        return
    body = PAYLOAD if scope["path"].startswith("/repos/") else EMPTY
    if DELAY:
        await asyncio.sleep(DELAY)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds each answer waits first")
    args = parser.parse_args()
    global DELAY
    DELAY = args.delay
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="error", access_log=False, lifespan="off",
                timeout_keep_alive=KEEP_ALIVE_SECONDS)


if __name__ == "__main__":
    main()
