"""The peer: FastMCP's `from_openapi` server for one spec, over Streamable HTTP on 127.0.0.1, in its own process.

    python -m bench.peer --spec PATH --upstream http://127.0.0.1:9000 --port 9100 [--token T]

Installed only for the benchmark (`pip install -e '.[bench]'`). Served by uvicorn with the same settings
as `gateway serve` (access log off here too, so neither side pays for logging), at `/mcp`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token")
    args = parser.parse_args()

    import uvicorn
    from fastmcp import FastMCP

    from gateway.server.run import KEEP_ALIVE_SECONDS  # clients never find their connection closing

    try:
        import httpx2 as client_lib  # FastMCP 4 takes an httpx2 client (plain httpx is deprecated there)
    except ImportError:  # older FastMCP
        import httpx as client_lib  # type: ignore[no-redef]

    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    client = client_lib.AsyncClient(base_url=args.upstream, headers=headers, timeout=30)
    document = json.loads(args.spec.read_text())
    server = FastMCP.from_openapi(openapi_spec=document, client=client, name="peer")
    uvicorn.run(server.http_app(path="/mcp"), host="127.0.0.1", port=args.port, log_level="error",
                access_log=False, timeout_keep_alive=KEEP_ALIVE_SECONDS)


if __name__ == "__main__":
    main()
