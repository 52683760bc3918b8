"""The upstream API of the call benchmarks: a minimal ASGI app on 127.0.0.1, in its own process.

    python -m bench.upstream --port 9000

`/repos/...` answers a ~1.2 KB JSON document (the bench spec's answer); any other path answers `{}`.
"""

from __future__ import annotations

import argparse
import json

import uvicorn

from gateway.server.run import KEEP_ALIVE_SECONDS  # clients never find their connection closing

PAYLOAD = json.dumps({"items": [{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(20)]}).encode()
EMPTY = b"{}"


async def app(scope, receive, send):  # type: ignore[no-untyped-def]
    if scope["type"] != "http":
        return
    body = PAYLOAD if scope["path"].startswith("/repos/") else EMPTY
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="error", access_log=False, lifespan="off",
                timeout_keep_alive=KEEP_ALIVE_SECONDS)


if __name__ == "__main__":
    main()
