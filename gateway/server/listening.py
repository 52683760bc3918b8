"""Where the gateway may listen: a host other than loopback only with client keys (or when the operator says
something in front of it authenticates callers), so that an agents.yaml without `clients` never serves its agents
and their credentials to anyone who can reach the address. Read once, at start (`gateway serve`), and by the Host
check of every request (`gateway.server.hosts`).

`open_listener` binds the address before uvicorn serves it (uvicorn takes bound sockets: `Server.run(sockets=...)`),
so `gateway serve` says where it listens only once it does, and says in one line why it cannot (a port another
program holds) instead of uvicorn's log line and exit status 3.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from collections.abc import Mapping

from ..config.model import ClientConfig
from ..errors import ConfigError


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, clients: Mapping[str, ClientConfig], *, allow_public: bool = False) -> None:
    """Refuse to serve a non-loopback host without client keys (unless the operator said so)."""
    if clients or allow_public or is_loopback(host):
        return
    raise ConfigError(
        f"refusing to listen on {host}: agents.yaml has no `clients`, so anyone who can reach this address could "
        "use every agent and its credentials. Add `clients: {name: {key: ${KEY}, agents: [...]}}` to agents.yaml, "
        "bind to 127.0.0.1, or pass --allow-public if something in front of the gateway authenticates callers."
    )


CANNOT_LISTEN_EXIT = 4
"""`gateway serve`'s exit status when it cannot listen on `--host`/`--port` (taken, not this machine's, privileged)."""


class CannotListen(Exception):
    """The address cannot be listened on; the message says which and what to do."""


def open_listener(host: str, port: int, *, shared: bool = False) -> socket.socket:
    """A TCP socket bound to `host`:`port` (port 0: a free one), for uvicorn to listen on; `shared`: inherited by
    the worker processes of `--workers N`. As uvicorn binds the socket its workers share: IPv6 for a host with a
    colon, else IPv4 (`localhost` is 127.0.0.1), SO_REUSEADDR (a restart is not refused for the old connections in
    TIME_WAIT; a port another socket listens on still is); IPv6 only, as asyncio binds an IPv6 host (`::` does not
    take IPv4's addresses as well)."""
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((bare, port))
    except OSError as exc:
        sock.close()
        raise CannotListen(_why_not(bare, port, exc)) from None
    sock.set_inheritable(shared)  # else no process the gateway starts (a hook, a sandbox) holds the port
    return sock


def _why_not(host: str, port: int, exc: OSError) -> str:
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if isinstance(exc, socket.gaierror):
        return f"cannot listen on {where}: the host name {host!r} does not resolve ({exc.strerror}); pass --host " \
               "an address of this machine (127.0.0.1 by default)"
    if exc.errno == errno.EADDRINUSE:
        return f"cannot listen on {where}: another program is listening there (another `gateway serve`?); stop it, " \
               "or choose another port with --port (0 takes a free one)"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {where}: {host} is not an address of this machine; pass --host one of its own " \
               "(127.0.0.1 by default)"
    if exc.errno == errno.EACCES:
        return f"cannot listen on {where}: this user may not take port {port} (below 1024 needs privileges); " \
               "choose a port above 1023 with --port"
    return f"cannot listen on {where}: {exc.strerror or exc}"
