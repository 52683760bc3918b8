"""The floor of one extra hop in Python: a pass-through proxy with no logic at all (uvicorn + aiohttp).

    python -m bench.bare_proxy --port 9001 --upstream http://127.0.0.1:9000

Any request it gets (its body read and ignored) becomes the bench's `GET` to the upstream, whose answer it
returns as it came. Same server stack as `gateway serve` (uvicorn with httptools and uvloop) and the same
client as the executor (aiohttp); what the gateway costs beyond this row is its own work: routing,
validation, building the request, credentials, reading and shaping the answer, audit, logs.
"""

from __future__ import annotations

import argparse

import aiohttp
import uvicorn

from bench.support import DIRECT_HEADERS, DIRECT_PATH


def make_app(upstream: str):  # type: ignore[no-untyped-def]
    session: list[aiohttp.ClientSession] = []
    target = upstream + DIRECT_PATH

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        if not session:
            session.append(aiohttp.ClientSession())
        async with session[0].get(target, headers=DIRECT_HEADERS) as response:
            body = await response.read()
            status = response.status
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    args = parser.parse_args()
    uvicorn.run(make_app(args.upstream), host="127.0.0.1", port=args.port, log_level="error", access_log=False,
                lifespan="off")


if __name__ == "__main__":
    main()
