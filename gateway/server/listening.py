"""Where the gateway may listen: a host other than loopback only with client keys (or when the operator says
something in front of it authenticates callers), so that an agents.yaml without `clients` never serves its agents
and their credentials to anyone who can reach the address. Read once, at start (`gateway serve`), and by the Host
check of every request (`gateway.server.hosts`).

`open_listener` binds the address before uvicorn serves it (uvicorn takes bound sockets: `Server.run(sockets=...)`),
so `gateway serve` says where it listens only once it does, and says in one line why it cannot (a port another
program holds) instead of uvicorn's log line and exit status 3.

`--host localhost` listens on every loopback address the name stands for (`open_listeners`): the ones it resolves to
here and, as RFC 6761 reserves the name for loopback, 127.0.0.1 and ::1 (when the machine has an IPv6 loopback), on
one port. A client resolves the name by its own rules (Node.js 17+, curl and browsers may try ::1 first), and one
that reached ::1 while the gateway listened on 127.0.0.1 only was refused.
"""

from __future__ import annotations

import contextlib
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


LOCALHOST_ADDRESSES = ("127.0.0.1", "::1")
"""What `localhost` names wherever a client resolves it (RFC 6761), beside what it resolves to here."""
_FREE_PORT_ATTEMPTS = 5
"""`--port 0` on several addresses: the port the first got may be another program's on the next; tries that often."""
_NO_SUCH_ADDRESS = (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT)
"""A loopback address this machine does not have (no IPv6): left out, as long as another one is listened on."""


def listen_addresses(host: str) -> list[str]:
    """The addresses `host` is listened on: `localhost`'s loopback addresses (the module's docstring), else itself."""
    bare = host.strip("[]")
    if bare != "localhost":
        return [bare]
    try:
        resolved = [info[4][0] for info in socket.getaddrinfo(bare, None, type=socket.SOCK_STREAM)]
    except socket.gaierror:
        resolved = []
    found = [str(address) for address in resolved if is_loopback(str(address))]
    return list(dict.fromkeys([*found, *LOCALHOST_ADDRESSES]))


def open_listeners(host: str, port: int, *, shared: bool = False) -> list[socket.socket]:
    """One socket per address of `host` (`listen_addresses`), all on one port (`port` 0: one free on all)."""
    addresses = listen_addresses(host)
    if len(addresses) == 1:
        return [open_listener(addresses[0], port, shared=shared)]
    for _ in range(_FREE_PORT_ATTEMPTS - 1):
        with contextlib.suppress(_TakenElsewhere):
            return _bind_all(addresses, port, shared, retry=port == 0)
    return _bind_all(addresses, port, shared, retry=False)


class _TakenElsewhere(Exception):
    """The free port the first address got is taken on another one: try again (`--port 0` only)."""


def _bind_all(addresses: list[str], port: int, shared: bool, *, retry: bool) -> list[socket.socket]:
    bound: list[socket.socket] = []
    missing: tuple[str, OSError] | None = None
    try:
        for address in addresses:
            chosen = bound[0].getsockname()[1] if bound else port
            try:
                bound.append(_bound(address, chosen, shared))
            except OSError as exc:
                if exc.errno in _NO_SUCH_ADDRESS:  # e.g. no IPv6 loopback on this machine
                    missing = missing or (address, exc)
                elif retry and bound and exc.errno == errno.EADDRINUSE:
                    raise _TakenElsewhere from None
                else:
                    raise CannotListen(_why_not(address, chosen, exc)) from None
        if not bound and missing is not None:
            raise CannotListen(_why_not(missing[0], port, missing[1]))
    except BaseException:
        for sock in bound:
            sock.close()
        raise
    return bound


def open_listener(host: str, port: int, *, shared: bool = False) -> socket.socket:
    """A TCP socket bound to `host`:`port` (port 0: a free one), for uvicorn to listen on; `shared`: inherited by
    the worker processes of `--workers N`. As uvicorn binds the socket its workers share: IPv6 for a host with a
    colon, else IPv4 (`localhost` is 127.0.0.1), SO_REUSEADDR (a restart is not refused for the old connections in
    TIME_WAIT; a port another socket listens on still is); IPv6 only, as asyncio binds an IPv6 host (`::` does not
    take IPv4's addresses as well)."""
    bare = host.strip("[]")
    try:
        return _bound(bare, port, shared)
    except OSError as exc:
        raise CannotListen(_why_not(bare, port, exc)) from None


def _bound(host: str, port: int, shared: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
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
