"""The floor of one extra hop in Python: a pass-through proxy with no logic at all.

    python -m bench.bare_proxy --port 9001 --upstream http://127.0.0.1:9000 [--client http1|aiohttp]

Any request it gets (its body read and ignored) becomes the bench's `GET` to the upstream, whose answer it
returns as it came. Same server stack as `gateway serve` (uvicorn with httptools and uvloop) and, by default,
the same client as the executor (gateway.http.http1); what the gateway costs beyond this row is its own work:
routing, validation, building the request, credentials, reading and shaping the answer, audit, logs.
`--client aiohttp` sends through an `aiohttp.ClientSession` instead: what the executor's own wire saves.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable

import uvicorn

from bench.support import DIRECT_HEADERS, DIRECT_PATH
from gateway.server.run import KEEP_ALIVE_SECONDS  # clients never find their connection closing

Fetch = Callable[[], Awaitable[tuple[int, bytes]]]


def _http1_fetch(target: str) -> Fetch:
    from gateway.http.http1 import Http1Wire

    wire = Http1Wire()
    headers = list(DIRECT_HEADERS.items())

    async def fetch() -> tuple[int, bytes]:
        response = await wire.send("GET", target, headers, None, timeout=30)
        try:
            return response.status_code, b"".join([chunk async for chunk in response.aiter_bytes()])
        finally:
            await response.aclose()

    return fetch


def _aiohttp_fetch(target: str) -> Fetch:
    import aiohttp

    session: list[aiohttp.ClientSession] = []

    async def fetch() -> tuple[int, bytes]:
        if not session:
            session.append(aiohttp.ClientSession())
        async with session[0].get(target, headers=DIRECT_HEADERS) as response:
            return response.status, await response.read()

    return fetch


def make_app(upstream: str, client: str = "http1"):  # type: ignore[no-untyped-def]
    fetch = (_aiohttp_fetch if client == "aiohttp" else _http1_fetch)(upstream + DIRECT_PATH)

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        status, body = await fetch()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--client", choices=("http1", "aiohttp"), default="http1")
    args = parser.parse_args()
    uvicorn.run(make_app(args.upstream, args.client), host="127.0.0.1", port=args.port, log_level="error",
                access_log=False, lifespan="off", timeout_keep_alive=KEEP_ALIVE_SECONDS)


if __name__ == "__main__":
    main()
