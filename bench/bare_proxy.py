"""The floor of one extra hop in Python: a pass-through proxy with no logic at all.

    python -m bench.bare_proxy --port 9001 --upstream http://127.0.0.1:9000 [--client reqwest|aiohttp|httpx]

Any request it gets (its body read and ignored) becomes the bench's `GET` to the upstream, whose answer it
returns as it came. Same server stack as `gateway serve` (uvicorn with httptools and uvloop) and, by default,
the same client as the executor (pyreqwest through gateway.http.wire); what the gateway costs beyond this row
is its own work: routing, validation, building the request, credentials, reading and shaping the answer,
audit, logs. The other clients are the candidates it was chosen against: `--client aiohttp` sends through an
`aiohttp.ClientSession`, `--client httpx` through an `httpx.AsyncClient` on its own httpcore transport.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable

import uvicorn

from bench.support import DIRECT_HEADERS, DIRECT_PATH
from gateway.server.run import KEEP_ALIVE_SECONDS  # clients never find their connection closing

Fetch = Callable[[], Awaitable[tuple[int, bytes]]]


def _reqwest_fetch(target: str) -> Fetch:
    from gateway.http.wire import ReqwestWire

    wire = ReqwestWire()
    headers = list(DIRECT_HEADERS.items())

    async def fetch() -> tuple[int, bytes]:
        response = await wire.send("GET", target, headers, None, timeout=30)
        try:
            return response.status_code, b"".join([chunk async for chunk in response.aiter_bytes()])
        finally:
            await response.aclose()

    return fetch


def _httpx_fetch(target: str) -> Fetch:
    import httpx

    client = httpx.AsyncClient(trust_env=False)

    async def fetch() -> tuple[int, bytes]:
        response = await client.get(target, headers=DIRECT_HEADERS)
        return response.status_code, response.content

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


CLIENTS = {"reqwest": _reqwest_fetch, "aiohttp": _aiohttp_fetch, "httpx": _httpx_fetch}


def make_app(upstream: str, client: str = "reqwest"):  # type: ignore[no-untyped-def]
    fetch = CLIENTS[client](upstream + DIRECT_PATH)

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
    parser.add_argument("--client", choices=tuple(CLIENTS), default="reqwest")
    args = parser.parse_args()
    uvicorn.run(make_app(args.upstream, args.client), host="127.0.0.1", port=args.port, log_level="error",
                access_log=False, lifespan="off", timeout_keep_alive=KEEP_ALIVE_SECONDS)


if __name__ == "__main__":
    main()
