"""An operation's servers: read from the spec, and a warning for one on another origin than the spec's.

The api's credentials and configured headers go only to the origin the operator chose: `apis.<name>.base_url`
(which replaces every server, an operation's own too) or else the spec's first top-level server. An operation or
path whose own server is another origin (`https://files.stripe.com` beside `https://api.stripe.com`, or a hostile
spec's `https://collector.example`) is called without them (`gateway.execution.executor`); the compiler says so
where the server is written, so `gateway validate` shows it before any call.
"""

from __future__ import annotations

from typing import Any

from ..catalog import Server, foreign_origin


def read_servers(raw: Any) -> tuple[Server, ...]:
    servers = []
    for entry in raw if isinstance(raw, list) else ():
        if isinstance(entry, dict) and isinstance(entry.get("url"), str):
            variables = {
                str(k): str(v.get("default", "")) for k, v in (entry.get("variables") or {}).items()
                if isinstance(v, dict)
            }
            servers.append(Server(url=entry["url"], variables=variables))
    return tuple(servers)


def operation_servers(spec_servers: tuple[Server, ...], operation: dict[str, Any], item: dict[str, Any],
                      pointer: str, warn: Any, api: str = "<name>") -> tuple[Server, ...]:
    """The most specific servers of an operation (its own, its path's, the spec's); `warn(pointer, message)` is
    told of one on another origin than the spec's first server."""
    own = read_servers(operation.get("servers"))
    servers = own or read_servers(item.get("servers")) or spec_servers
    if servers is not spec_servers and foreign_origin(servers[0], spec_servers):
        where = f"{pointer}/servers" if own else pointer.rsplit("/", 1)[0] + "/servers"
        spec_server = repr(spec_servers[0].url) if spec_servers else "none"
        warn(where, f"the server {servers[0].url!r} is another origin than the spec's ({spec_server}): this "
             f"operation is called without the api's credentials and headers, unless apis.{api}.base_url is set "
             f"(every call goes there) or apis.{api}.trusted_origins names that origin")
    return servers
